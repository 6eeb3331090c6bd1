//! The `bash` tool: `bash -c` in the workspace root.
//!
//! The command runs as the leader of its own session and process group, so that
//! cancelling, timing out or finishing can kill everything it started
//! (pipelines, `&` jobs, grandchildren) in one signal — killing only `bash`
//! would leave a `sleep 30; touch marker` running after the turn was
//! cancelled. stdout and stderr share one pipe, so the model reads them
//! interleaved as a terminal would show them, and the pipe is read into a
//! [`CapBuffer`] so a command printing gigabytes costs bounded memory.
//!
//! It is started as a [tool process](super::process): between `fork` and
//! `exec` it confines itself with the pod's [`Sandbox`] and the seccomp
//! filter (prepared in the pod, so the child only makes system calls) and
//! asks to be killed when the pod dies (`PR_SET_PDEATHSIG`); that
//! reaches `bash` alone, so the [`reaper`](super::reaper) kills the rest of
//! the group: a `kill -9` of the pod leaves nothing of its command running.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::{kill_process_group, Pid, Signal};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::registry::{Args, Run, Runner, ToolDef};
use super::{CapBuffer, OutputSink, Sandbox, ToolLimits, ToolOutcome};
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;
use crate::workspace::Workspace;

pub const BASH: &str = builtin::BASH.name;

pub const BASH_TOOL: ToolDef = ToolDef {
    facts: builtin::BASH,
    spec,
    args: Args::of::<BashArgs>(),
    runner: Runner::Toolbox,
    run: Run::Own,
};

/// After the command ends, how long output still buffered in the pipe may
/// take to arrive. Only a process that escaped the group (`setsid`) keeps
/// the pipe open longer, and it is not waited for.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

pub fn spec(limits: &ToolLimits) -> ToolSpec {
    ToolSpec {
        name: BASH.into(),
        description: format!(
            "Run a shell command with `bash -c` in the workspace root. stdout and stderr are \
             returned together, followed by the exit code. stdin is empty (no interactive \
             programs). Times out after {}s (or `timeout_secs`, if lower); a timed-out or \
             cancelled command is killed with everything it started. Background jobs (`&`) \
             are killed when the command finishes. Long output keeps its beginning and end. \
             Prefer read_file, grep, glob and edit_file for files.",
            limits.bash_timeout.as_secs()
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line, run by `bash -c`."},
                "timeout_secs": {"type": "integer", "minimum": 1, "description": "Kill the command after this many seconds (capped by the pod's limit)."},
                "background": {"type": "boolean", "description": "Start it as a background job that outlives this call (a server, a watcher): the call returns at once with the job's id; read its output with job_output, stop it with job_kill."}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    pub(super) command: String,
    timeout_secs: Option<u64>,
    /// Start it as a background job ([`super::jobs`]) instead.
    #[serde(default)]
    pub(super) background: bool,
}

/// Kills the command's process group when told to, or when dropped: if the
/// call's future is dropped mid-run, nothing it started is left behind. The
/// [`reaper`](super::reaper) watches the group meanwhile, for a pod that
/// dies before it can.
pub(crate) struct ProcessGroup(Option<Pid>);

impl ProcessGroup {
    pub(crate) fn new(leader: Option<Pid>) -> Self {
        if let Some(group) = leader {
            super::reaper::watch(group, true);
        }
        Self(leader)
    }

    pub(crate) fn kill(&mut self) {
        if let Some(pid) = self.0.take() {
            // ESRCH (everyone already gone) is the expected, harmless case.
            let _ = kill_process_group(pid, Signal::Kill);
            super::reaper::watch(pid, false);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What the pipe has delivered so far; each chunk is also streamed to the
/// sink as text as soon as it arrives, as far as [`LiveBudget`] allows.
struct Captured {
    output: CapBuffer,
    ends_with_newline: bool,
    eof: bool,
    sink: OutputSink,
    /// The start of a UTF-8 character split across two reads.
    carry: Vec<u8>,
    live: LiveBudget,
}

/// How much output is streamed live: a burst of this many bytes at once…
const LIVE_BURST: f64 = 256.0 * 1024.0;
/// …then this many a second.
const LIVE_RATE: f64 = 256.0 * 1024.0;

/// Live output is a hint for people watching, and a command can print far
/// faster than any client reads (`yes`, a build dumping a log): streaming
/// all of it only fills the clients' queues until they are cut off as
/// lagged. A token bucket lets a burst through and then [`LIVE_RATE`]; what
/// is over is left out of the live view, and the next chunk shown (or the
/// end) says how much was — the tool's result still keeps the output's
/// beginning and end, as always. A command printing at a human pace is
/// streamed whole.
struct LiveBudget {
    tokens: f64,
    at: Instant,
    /// Bytes left out since the last chunk shown.
    skipped: usize,
}

impl LiveBudget {
    fn new(now: Instant) -> Self {
        Self {
            tokens: LIVE_BURST,
            at: now,
            skipped: 0,
        }
    }

    /// What to stream for `text` at `now`: it, preceded by a note of what
    /// was left out before it; or nothing, when over budget.
    fn admit(&mut self, text: &str, now: Instant) -> Option<String> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * LIVE_RATE).min(LIVE_BURST);
        self.at = now;
        if (text.len() as f64) > self.tokens {
            self.skipped += text.len();
            return None;
        }
        self.tokens -= text.len() as f64;
        Some(match std::mem::take(&mut self.skipped) {
            0 => text.to_owned(),
            skipped => format!("{}{text}", left_out(skipped)),
        })
    }

    /// The note to end the live view with, when output was left out last.
    fn finish(&mut self) -> Option<String> {
        (self.skipped > 0).then(|| left_out(std::mem::take(&mut self.skipped)))
    }
}

fn left_out(bytes: usize) -> String {
    format!(
        "\n[… {} KiB of output not shown live; the result keeps its beginning and end …]\n",
        bytes.div_ceil(1024)
    )
}

impl Captured {
    fn record(&mut self, read: std::io::Result<usize>, chunk: &[u8]) {
        match read {
            Ok(0) | Err(_) => {
                self.eof = true;
                self.stream(true);
            }
            Ok(n) => {
                self.output.push(&chunk[..n]);
                self.ends_with_newline = chunk[n - 1] == b'\n';
                self.carry.extend_from_slice(&chunk[..n]);
                self.stream(false);
            }
        }
    }

    /// Sends what can be sent as text: everything but a character still
    /// incomplete at the end (unless the stream ended).
    fn stream(&mut self, at_end: bool) {
        let ready = match std::str::from_utf8(&self.carry) {
            Err(e) if e.error_len().is_none() && !at_end => e.valid_up_to(),
            _ => self.carry.len(),
        };
        if ready > 0 {
            let text = String::from_utf8_lossy(&self.carry[..ready]);
            if let Some(shown) = self.live.admit(&text, Instant::now()) {
                (self.sink)(&shown);
            }
            self.carry.drain(..ready);
        }
        if at_end {
            if let Some(note) = self.live.finish() {
                (self.sink)(&note);
            }
        }
    }
}

enum End {
    Exited(std::io::Result<ExitStatus>),
    Cancelled,
    TimedOut(Duration),
}

pub async fn run(
    ws: &Workspace,
    limits: &ToolLimits,
    sandbox: &Sandbox,
    args: BashArgs,
    cancel: CancellationToken,
    output: OutputSink,
) -> ToolOutcome {
    let timeout = args.timeout_secs.map_or(limits.bash_timeout, |s| {
        Duration::from_secs(s.max(1)).min(limits.bash_timeout)
    });
    let spawned = spawn(ws, sandbox, &args.command, true);
    let (mut child, reader) = match spawned {
        Ok(parts) => parts,
        Err(e) => return ToolOutcome::error(format!("cannot start bash: {e}")),
    };
    let mut group = ProcessGroup::new(child.id().and_then(|id| Pid::from_raw(id as i32)));
    let mut reader = match pipe::Receiver::from_owned_fd(reader) {
        Ok(r) => r,
        Err(e) => return ToolOutcome::error(format!("cannot read bash output: {e}")),
    };
    let mut captured = Captured {
        output: CapBuffer::new(limits.output_cap_bytes),
        ends_with_newline: true,
        eof: false,
        sink: output,
        carry: Vec::new(),
        live: LiveBudget::new(Instant::now()),
    };
    let mut chunk = vec![0u8; 16 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let end = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break End::Cancelled,
            _ = &mut deadline => break End::TimedOut(timeout),
            read = reader.read(&mut chunk), if !captured.eof => captured.record(read, &chunk),
            status = child.wait() => break End::Exited(status),
        }
    };
    group.kill();
    if !matches!(end, End::Exited(_)) {
        // Reap the killed leader; SIGKILL makes this immediate.
        let _ = child.wait().await;
    }
    let _ = tokio::time::timeout(DRAIN_GRACE, async {
        while !captured.eof {
            let read = reader.read(&mut chunk).await;
            captured.record(read, &chunk);
        }
    })
    .await;
    let (status_line, is_error) = match end {
        End::Exited(Ok(status)) => describe(status),
        End::Exited(Err(e)) => (format!("[could not wait for the command: {e}]"), true),
        End::Cancelled => (super::KILLED.to_owned(), true),
        End::TimedOut(after) => (
            format!(
                "[timed out after {}s: the command was killed]",
                after.as_secs_f64()
            ),
            true,
        ),
    };
    if !captured.ends_with_newline {
        captured.output.push(b"\n");
    }
    captured.output.push(status_line.as_bytes());
    let mut output = captured.output.finish();
    if let Some(note) = sandbox.refusal_note(&output) {
        output.push('\n');
        output.push_str(&note);
    }
    ToolOutcome { output, is_error }
}

fn describe(status: ExitStatus) -> (String, bool) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("[exit code: {code}]"), code != 0),
        (None, Some(signal)) => (format!("[killed by signal {signal}]"), true),
        (None, None) => ("[exit status unknown]".to_owned(), true),
    }
}

/// Starts `bash -c command` with stdout and stderr on one pipe and stdin
/// closed; returns the child and the pipe's read end. The write ends live
/// only in the child once this returns, so the read end sees EOF when every
/// process holding them has exited. A background job passes `kill_on_drop`
/// false: dropping its handle must not kill it — its group is killed on
/// purpose (kill, stop, the reaper), never by accident.
pub(super) fn spawn(
    ws: &Workspace,
    sandbox: &Sandbox,
    command: &str,
    kill_on_drop: bool,
) -> std::io::Result<(tokio::process::Child, OwnedFd)> {
    let (read_end, write_end) = pipe_with(PipeFlags::CLOEXEC)?;
    let write_err = write_end.try_clone()?;
    let mut cmd = tool_command(ws.root(), Some(sandbox), command)?;
    cmd.kill_on_drop(kill_on_drop)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(write_err));
    let child = cmd.spawn()?;
    drop(cmd);
    Ok((child, read_end))
}

/// `bash -c command` in `root` as a [tool process](super::process) — the
/// leader of its own session (so of its own process group, with no
/// controlling terminal), under the seccomp filter, without the pod's
/// secrets, dying with the pod — confined by `sandbox` when given (`bash`
/// commands, background jobs), else only by the filter (hooks). The caller
/// sets its stdio, spawns it and hands its pid to a [`ProcessGroup`].
///
/// The child gets `PR_SET_PDEATHSIG`, which fires when the *thread* that
/// forked it exits, not the process. That is the thread polling the
/// caller's future: the pod's actix main thread, which lives as long as the
/// pod (tests drive it from their own runtime thread, which outlives the
/// call). Spawning from a pool thread that can retire (`spawn_blocking`)
/// would kill commands at random, so spawning must stay on that thread.
pub(crate) fn tool_command(
    root: &std::path::Path,
    sandbox: Option<&Sandbox>,
    command: &str,
) -> std::io::Result<Command> {
    let mut cmd = confined_command("bash", root, sandbox)?;
    cmd.arg("-c").arg(command);
    Ok(cmd)
}

/// `program` (no shell) in `root` as a tool process, exactly as confined as
/// [`tool_command`]'s `bash`: for the pod's own short runs (the
/// environment's `git status`) that need no shell to start.
pub(crate) fn confined_command(
    program: &str,
    root: &std::path::Path,
    sandbox: Option<&Sandbox>,
) -> std::io::Result<Command> {
    let confinement = match sandbox {
        Some(sandbox) => sandbox.confinement()?,
        None => super::process::Confinement::unsandboxed()?,
    };
    let mut cmd = Command::new(program);
    super::process::harden(&mut cmd, confinement);
    cmd.current_dir(root)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .kill_on_drop(true);
    if let Some(tmpdir) = sandbox.and_then(Sandbox::tmpdir) {
        cmd.env("TMPDIR", tmpdir);
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_output_is_streamed_whole_at_a_human_pace_and_sampled_beyond() {
        let start = Instant::now();
        let mut live = LiveBudget::new(start);
        let chunk = "x".repeat(64 * 1024);
        // The burst: four 64 KiB chunks at once.
        for _ in 0..4 {
            assert_eq!(live.admit(&chunk, start).as_deref(), Some(chunk.as_str()));
        }
        // Over budget: left out, and said so with the next chunk shown.
        assert_eq!(live.admit(&chunk, start), None);
        assert_eq!(live.admit(&chunk, start), None);
        let later = start + Duration::from_millis(250);
        let shown = live.admit("done\n", later).unwrap();
        assert!(
            shown.starts_with("\n[… 128 KiB of output not shown live"),
            "{shown}"
        );
        assert!(shown.ends_with("…]\ndone\n"), "{shown}");
        assert_eq!(live.finish(), None, "nothing left out since");
        // A line a second never runs out.
        let mut at = later;
        for _ in 0..100 {
            at += Duration::from_secs(1);
            assert_eq!(live.admit("a line\n", at).as_deref(), Some("a line\n"));
        }
        // Output left out at the very end is noted at the end.
        let mut flood = LiveBudget::new(at);
        for _ in 0..5 {
            flood.admit(&chunk, at);
        }
        assert!(flood.finish().unwrap().contains("64 KiB"));
    }
}
