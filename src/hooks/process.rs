//! Running one hook: `bash -c COMMAND` through the tool processes' one
//! spawn path ([`crate::tools::tool_command`]: its own session, the bash
//! sandbox unless the hook says `sandbox = false`, dying with the pod,
//! watched by the reaper), the event on stdin, stdout and stderr read up to
//! [`OUTPUT_CAP`] each, killed with its whole process group at its timeout.
//!
//! Nothing a hook does can hold the pod longer than its timeout plus
//! [`DRAIN_GRACE`]: stdin is written concurrently with the reads (a hook
//! that never reads it is fine), output past the cap is read and dropped
//! (so a chatty hook is not blocked on a full pipe), and what it leaves
//! running when it exits is killed once the grace is over.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::Hook;
use crate::tools::{tool_command, ProcessGroup, Sandbox};

/// How much of each of stdout and stderr is kept.
pub const OUTPUT_CAP: usize = 1024 * 1024;

/// After the hook's process exits, how long its pipes are still read (a
/// child it started may still be writing).
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How a hook ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signalled(i32),
    TimedOut(Duration),
    /// It could not be started at all.
    Failed(String),
}

/// What one run of a hook came to.
#[derive(Debug)]
pub struct Ran {
    pub end: End,
    /// At most [`OUTPUT_CAP`] bytes each.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Ran {
    /// The last non-empty line of stderr, for a warning.
    pub fn last_stderr_line(&self) -> Option<String> {
        String::from_utf8_lossy(&self.stderr)
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(300).collect())
    }
}

/// Runs `hook` in `root` with `input` on its stdin. Must be polled on the
/// pod's main thread (see [`tool_command`]).
pub async fn run(hook: &Hook, root: &Path, sandbox: &Sandbox, input: &[u8]) -> Ran {
    let mut command = match tool_command(root, hook.sandbox.then_some(sandbox), &hook.command) {
        Ok(command) => command,
        Err(e) => return failed(format!("cannot prepare it: {e}")),
    };
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return failed(format!("cannot start it: {e}")),
    };
    drop(command);
    let mut group = ProcessGroup::new(child.id().and_then(|id| Pid::from_raw(id as i32)));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let mut out = Vec::new();
    let mut err = Vec::new();
    let end = {
        let write = async move {
            if let Some(mut stdin) = stdin {
                // A hook that exits without reading is not an error.
                let _ = stdin.write_all(input).await;
            }
        };
        let io = async {
            tokio::join!(
                write,
                read_capped(stdout, &mut out),
                read_capped(stderr, &mut err)
            )
        };
        let mut io = std::pin::pin!(io);
        let mut io_done = false;
        let deadline = tokio::time::sleep(hook.timeout);
        let mut deadline = std::pin::pin!(deadline);
        let end = loop {
            tokio::select! {
                status = child.wait() => break match status {
                    Ok(status) => match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                        (Some(code), _) => End::Exited(code),
                        (None, Some(signal)) => End::Signalled(signal),
                        (None, None) => End::Failed("its exit status is unknown".into()),
                    },
                    Err(e) => End::Failed(format!("cannot wait for it: {e}")),
                },
                _ = &mut io, if !io_done => io_done = true,
                _ = &mut deadline => break End::TimedOut(hook.timeout),
            }
        };
        if matches!(end, End::TimedOut(_)) {
            group.kill();
            let _ = child.wait().await;
        }
        if !io_done {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut io).await;
        }
        end
    };
    group.kill();
    Ran {
        end,
        stdout: out,
        stderr: err,
    }
}

fn failed(reason: String) -> Ran {
    Ran {
        end: End::Failed(reason),
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

/// Reads `pipe` to its end, keeping the first [`OUTPUT_CAP`] bytes.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, kept: &mut Vec<u8>) {
    let Some(mut pipe) = pipe else { return };
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::HookEvent;
    use crate::protocol::SandboxMode;
    use crate::tools::SandboxPolicy;

    fn hook(command: &str, timeout: Duration) -> Hook {
        Hook {
            event: HookEvent::TurnEnd,
            matcher: None,
            command: command.into(),
            timeout,
            sandbox: false,
            position: 1,
        }
    }

    fn sandbox(root: &Path) -> Sandbox {
        Sandbox::new(
            SandboxPolicy {
                mode: SandboxMode::Off,
                network: true,
                unix_sockets: false,
            },
            root,
        )
    }

    async fn ran(command: &str, timeout: Duration, input: &[u8]) -> Ran {
        let dir = tempfile::tempdir().unwrap();
        run(
            &hook(command, timeout),
            dir.path(),
            &sandbox(dir.path()),
            input,
        )
        .await
    }

    #[tokio::test]
    async fn the_event_is_on_stdin_and_the_answer_on_stdout() {
        let r = ran(
            "cat; echo oops >&2; exit 3",
            Duration::from_secs(10),
            b"{\"event\":1}",
        )
        .await;
        assert_eq!(r.end, End::Exited(3));
        assert_eq!(r.stdout, b"{\"event\":1}");
        assert_eq!(r.last_stderr_line().as_deref(), Some("oops"));
    }

    #[tokio::test]
    async fn a_hook_that_never_reads_stdin_is_fine() {
        let big = vec![b'x'; 4 * 1024 * 1024];
        let r = ran("echo done", Duration::from_secs(10), &big).await;
        assert_eq!(r.end, End::Exited(0));
        assert_eq!(r.stdout, b"done\n");
    }

    #[tokio::test]
    async fn output_is_capped_and_the_hook_still_finishes() {
        let r = ran(
            "head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2",
            Duration::from_secs(20),
            b"",
        )
        .await;
        assert_eq!(r.end, End::Exited(0));
        assert_eq!(r.stdout.len(), OUTPUT_CAP);
        assert_eq!(r.stderr.len(), OUTPUT_CAP);
    }

    #[tokio::test]
    async fn a_timed_out_hook_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        let command = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let r = run(
            &hook(&command, Duration::from_millis(300)),
            dir.path(),
            &sandbox(dir.path()),
            b"",
        )
        .await;
        assert_eq!(r.end, End::TimedOut(Duration::from_millis(300)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !marker.exists(),
            "the hook's background child was killed too"
        );
    }

    #[tokio::test]
    async fn a_hook_runs_in_its_own_session_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(
            &hook(
                "pwd; ps -o sid= -p $$; ps -o sid= -p $PPID",
                Duration::from_secs(10),
            ),
            dir.path(),
            &sandbox(dir.path()),
            b"",
        )
        .await;
        let text = String::from_utf8_lossy(&r.stdout).into_owned();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        assert_eq!(
            std::fs::canonicalize(lines[0]).unwrap(),
            std::fs::canonicalize(dir.path()).unwrap()
        );
        assert_ne!(lines[1], lines[2], "its own session: {text}");
    }
}
