//! Starting one MCP server: spawn it, initialise it over `rmcp`, list its
//! tools — within the server's timeout, keeping the tail of its stderr for
//! the error a user will read when it does not come up.

use std::collections::VecDeque;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use rustix::process::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::{mpsc, Notify};

use super::McpServerConfig;

/// Lines of stderr kept for error messages.
const TAIL_LINES: usize = 12;
/// Longest stderr line kept; longer ones are cut.
const TAIL_LINE_BYTES: usize = 400;

/// A server that came up: its `rmcp` service, its process and its tools.
pub(super) struct Started {
    pub service: RunningService<RoleClient, PodClient>,
    /// Killed when dropped: the supervisor keeps it as long as the
    /// connection lives.
    pub child: Child,
    pub pid: Option<u32>,
    pub tools: Vec<Tool>,
    /// Fires when the server sends a message `rmcp` drops for its size.
    pub oversized: Arc<Notify>,
}

/// The longest message `rmcp` takes from a server; a longer one is dropped
/// (and only logged), so the call it answered would wait for its timeout.
pub(super) const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The server's stdout as `rmcp` reads it, watched for a message longer
/// than [`MAX_MESSAGE_BYTES`]: the calls waiting on the server then end at
/// once saying why, instead of as a timeout minutes later.
struct Watched<R> {
    inner: R,
    /// Bytes since the last newline.
    line: usize,
    oversized: Arc<Notify>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = &buf.filled()[before..];
        let line = match memchr::memrchr(b'\n', read) {
            Some(at) => read.len() - at - 1,
            None => self.line + read.len(),
        };
        if self.line <= MAX_MESSAGE_BYTES && line > MAX_MESSAGE_BYTES {
            self.oversized.notify_waiters();
        }
        self.line = line;
        polled
    }
}

/// The pod's side of one MCP connection. It answers the server's requests
/// with `rmcp`'s defaults (no sampling, no roots) and reports
/// `tools/list_changed` so the supervisor lists the tools again.
pub(super) struct PodClient {
    tools_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for PodClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("pod", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.tools_changed.send(());
    }
}

/// The process group of a running server, shared between its supervisor
/// (which replaces it on restart) and the registry (which kills what is left
/// when the pod stops, after the actors are gone).
#[derive(Debug, Clone, Default)]
pub(super) struct ProcessSlot(Arc<Mutex<Option<u32>>>);

impl ProcessSlot {
    fn set(&self, pid: Option<u32>) {
        *self.lock() = pid;
    }

    /// The pid of the server's process, leaving it in place.
    pub fn get(&self) -> Option<u32> {
        *self.lock()
    }

    /// Takes the pid: the caller is now the one to end the group.
    pub fn take(&self) -> Option<u32> {
        self.lock().take()
    }

    /// Kills the whole process group (a server started by `npx` or `uvx`
    /// is a tree of processes) and forgets it.
    pub fn kill(&self) {
        if let Some(pid) = self.take() {
            signal_group(pid, Signal::Kill);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<u32>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Sends `signal` to the process group led by `pid`; a group that is
/// already gone is not an error.
pub(super) fn signal_group(pid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if let Err(e) = rustix::process::kill_process_group(pid, signal) {
        if e != rustix::io::Errno::SRCH {
            tracing::warn!("cannot signal MCP server process group {pid:?}: {e}");
        }
    }
}

/// The last lines a server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: &[u8]) {
        let mut text = String::from_utf8_lossy(line).trim_end().to_owned();
        if text.is_empty() {
            return;
        }
        if text.len() > TAIL_LINE_BYTES {
            let cut = crate::tools::floor_char_boundary(&text, TAIL_LINE_BYTES);
            text.truncate(cut);
            text.push('…');
        }
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(text);
    }

    pub fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Reads the server's stderr to its end, keeping the last lines. It must
    /// be drained whatever it holds (binary, endless lines), or a chatty
    /// server would block on a full pipe.
    async fn follow(self, mut stderr: ChildStderr) {
        let mut chunk = [0u8; 4096];
        let mut line = Vec::new();
        loop {
            let n = match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for piece in chunk[..n].split_inclusive(|b| *b == b'\n') {
                if line.len() < TAIL_LINE_BYTES * 2 {
                    line.extend_from_slice(piece);
                }
                if piece.ends_with(b"\n") {
                    self.push(&line);
                    line.clear();
                }
            }
        }
        self.push(&line);
    }
}

/// Spawns the server as a [tool process](crate::tools::process) — its own
/// session and process group — initialises it and lists
/// its tools, all within `config.timeout_s`. On failure whatever was
/// spawned is killed, and the error says what happened.
pub(super) async fn start(
    config: &McpServerConfig,
    workspace: &Path,
    process: &ProcessSlot,
    stderr_tail: &StderrTail,
    tools_changed: mpsc::UnboundedSender<()>,
) -> Result<Started, String> {
    stderr_tail.clear();
    let confinement = crate::tools::process::Confinement::unsandboxed()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let mut command = Command::new(&config.command);
    crate::tools::process::harden(&mut command, confinement);
    command
        .args(&config.args)
        .envs(&config.env)
        .current_dir(workspace.join(config.cwd.as_deref().unwrap_or(Path::new(""))));
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| spawn_error(config, workspace, &e))?;
    let pid = child.id();
    process.set(pid);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        process.kill();
        return Err("cannot start it: its stdin and stdout could not be piped".into());
    };
    let oversized = Arc::new(Notify::new());
    let transport = (
        Watched {
            inner: stdout,
            line: 0,
            oversized: oversized.clone(),
        },
        stdin,
    );
    let stderr_done = child
        .stderr
        .take()
        .map(|stderr| tokio::spawn(stderr_tail.clone().follow(stderr)));
    let timeout = Duration::from_secs(config.timeout_s);
    let client = PodClient { tools_changed };
    let handshake = async {
        let service = client
            .serve(transport)
            .await
            .map_err(|e| format!("the server did not initialise: {e}"))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| format!("the server did not list its tools: {e}"))?;
        Ok::<_, String>((service, tools))
    };
    let error = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok((service, tools))) => {
            return Ok(Started {
                service,
                child,
                pid,
                tools,
                oversized,
            })
        }
        Ok(Err(error)) => error,
        Err(_) => format!(
            "the server did not initialise within {} s (timeout_s)",
            config.timeout_s
        ),
    };
    process.kill();
    if let Some(done) = stderr_done {
        let _ = tokio::time::timeout(Duration::from_millis(500), done).await;
    }
    Err(with_stderr(error, stderr_tail))
}

/// Resolves when the process `pid` has exited. The connection alone cannot
/// tell: a child the server started may hold its stdout open after it died.
/// Without a pid, or where pidfds are not supported, it never resolves and
/// the connection closing is the only sign.
pub(super) async fn process_exit(pid: Option<u32>) {
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    let Some(pid) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(Pid::from_raw)
    else {
        return std::future::pending().await;
    };
    let fd = match pidfd_open(pid, PidfdFlags::NONBLOCK) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return,
        Err(e) => {
            tracing::debug!("cannot watch MCP server process {pid:?}: {e}");
            return std::future::pending().await;
        }
    };
    // SAFETY: the pidfd is an `OwnedFd` that the `AsyncFd` owns until it is
    // dropped, so it stays open and refers to the same file all along.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    match registered {
        Ok(fd) => {
            let _ = fd.readable().await;
        }
        Err(e) => {
            tracing::debug!("cannot watch MCP server process {pid:?}: {e}");
            std::future::pending::<()>().await;
        }
    }
}

/// `error`, followed by the server's last stderr lines if it wrote any.
pub(super) fn with_stderr(error: String, stderr_tail: &StderrTail) -> String {
    let tail = stderr_tail.text();
    if tail.is_empty() {
        error
    } else {
        format!("{error}; its stderr ends with:\n{tail}")
    }
}

fn spawn_error(config: &McpServerConfig, workspace: &Path, e: &std::io::Error) -> String {
    let cwd = workspace.join(config.cwd.as_deref().unwrap_or(Path::new("")));
    match e.kind() {
        std::io::ErrorKind::NotFound if !cwd.is_dir() => {
            format!("cannot start it: its cwd {} does not exist", cwd.display())
        }
        std::io::ErrorKind::NotFound => format!(
            "cannot start `{}`: no such program (is it installed and on PATH?)",
            config.command
        ),
        _ => format!("cannot start `{}`: {e}", config.command),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_cut_to_size() {
        let tail = StderrTail::default();
        for i in 0..20 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        tail.push("x".repeat(1000).as_bytes());
        let text = tail.text();
        assert!(text.starts_with("line 9\n"), "{text}");
        assert!(text.ends_with("x…"));
        assert_eq!(text.lines().count(), TAIL_LINES);
    }

    /// The error `start` fails with for `config`.
    async fn start_error(config: &McpServerConfig) -> String {
        let (tx, _rx) = mpsc::unbounded_channel();
        start(
            config,
            Path::new("/"),
            &ProcessSlot::default(),
            &StderrTail::default(),
            tx,
        )
        .await
        .err()
        .expect("the server should fail to start")
    }

    #[tokio::test]
    async fn a_missing_program_is_named() {
        let config: McpServerConfig =
            toml::from_str("command = \"/nonexistent/mcp-server\"").unwrap();
        let error = start_error(&config).await;
        assert!(error.contains("/nonexistent/mcp-server"), "{error}");
        assert!(error.contains("no such program"), "{error}");
    }

    #[tokio::test]
    async fn a_server_that_exits_at_once_fails_with_its_stderr() {
        let config: McpServerConfig = toml::from_str(
            "command = \"sh\"\nargs = [\"-c\", \"echo 'missing API key' >&2; exit 3\"]",
        )
        .unwrap();
        let error = start_error(&config).await;
        assert!(error.contains("did not initialise"), "{error}");
        assert!(error.ends_with("missing API key"), "{error}");
    }
}
