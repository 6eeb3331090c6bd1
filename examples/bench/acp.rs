//! Scenario 17, `pod acp`: what an editor pays for speaking the Agent
//! Client Protocol instead of the pod's own. Two pods alike, the same
//! model: `session/prompt` → first `agent_message_chunk` at the editor
//! against `run` → first `text_delta` on the Unix socket, turns alternating
//! so both conversations grow alike; and `session/load` of a 10,000-entry session
//! (every entry replayed as `session/update`s before the reply) against a
//! socket attach to it.
//!
//! The editor here writes JSON-RPC by hand: the bench measures time, and
//! the conformance of `pod acp` is `tests/acp.rs`'s job, with the official
//! SDK.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use serde_json::{json, Value};

use crate::attach::{read_snapshot, session};
use crate::sse::{find, Plan, SseServer};
use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

/// A short answer after a short think, as in scenario 5.
const PLAN: Plan = Plan {
    think: Duration::from_millis(10),
    tokens: 50,
    interval: None,
};

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 21 };
    let mut rows = first_chunk(config, reps)?;
    rows.extend(load(config, reps)?);
    Ok(rows)
}

fn first_chunk(config: &Config, reps: usize) -> anyhow::Result<Vec<Row>> {
    let sse = SseServer::start(PLAN)?;
    // Two pods alike, one per client: an editor is told of every turn of
    // its session, so on one pod each side would read the other's deltas.
    let (socket_dir, acp_dir) = (
        tempfile::tempdir_in(&config.tmp)?,
        tempfile::tempdir_in(&config.tmp)?,
    );
    let mut socket_pod = PodProcess::spawn(socket_dir.path(), &sse.pod_args())?;
    socket_pod.wait_listening(Instant::now())?;
    let mut acp_pod = PodProcess::spawn(acp_dir.path(), &sse.pod_args())?;
    acp_pod.wait_listening(Instant::now())?;
    let mut client = SocketClient::connect(&socket_pod.socket)?;
    let mut editor = Editor::start(acp_dir.path(), &acp_pod)?;
    let session_id = editor.new_session(&acp_dir.path().join("ws"))?;
    let (mut socket, mut acp) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        socket.push(ms(client.turn()?));
        acp.push(ms(editor.prompt(&session_id)?));
    }
    let (socket, acp) = (median(&socket), median(&acp));
    Ok(vec![Row::at_most(
        "17. acp: session/prompt → first agent_message_chunk vs run → first text_delta",
        format!("{socket:.2} ms run → first text_delta (Unix socket)"),
        format!("{acp:.2} ms"),
        acp / socket,
        "≤ 1.2×",
        1.2,
    )])
}

fn load(config: &Config, reps: usize) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    session(&dir.path().join("data"))?;
    let mut pod = PodProcess::spawn(dir.path(), &["--provider", "offline"])?;
    pod.wait_listening(Instant::now())?;
    let snapshot: Value = serde_json::from_slice(&read_snapshot(&pod.socket)?)?;
    let session_id = snapshot["session_id"]
        .as_str()
        .context("a snapshot without a session_id")?
        .to_owned();
    let mut editor = Editor::start(dir.path(), &pod)?;
    let (mut attach, mut loads) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        read_snapshot(&pod.socket)?;
        attach.push(ms(t.elapsed()));
        loads.push(ms(editor.load(&session_id, &dir.path().join("ws"))?));
    }
    let (attach, loads) = (median(&attach), median(&loads));
    Ok(vec![Row::at_most(
        "17. acp: session/load of 10,000 entries vs a socket attach",
        format!("{attach:.2} ms connect → snapshot"),
        format!("{loads:.2} ms session/load → reply, every entry replayed"),
        loads / attach,
        "≤ 2×",
        2.0,
    )])
}

/// A client of the pod's own protocol on one connection, for the baseline.
struct SocketClient {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

impl SocketClient {
    fn connect(socket: &Path) -> anyhow::Result<SocketClient> {
        let stream = UnixStream::connect(socket)?;
        let writer = stream.try_clone()?;
        let mut client = SocketClient {
            writer,
            reader: BufReader::with_capacity(1 << 20, stream),
            line: Vec::new(),
        };
        client.next_line()?;
        Ok(client)
    }

    fn next_line(&mut self) -> anyhow::Result<()> {
        self.line.clear();
        if self.reader.read_until(b'\n', &mut self.line)? == 0 {
            bail!("the pod closed the connection");
        }
        Ok(())
    }

    /// One turn: `run` → first `text_delta`, then on to the turn's end.
    fn turn(&mut self) -> anyhow::Result<Duration> {
        let t = Instant::now();
        self.writer.write_all(
            b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n",
        )?;
        let mut first = None;
        loop {
            self.next_line()?;
            if first.is_none() && self.line.starts_with(b"{\"type\":\"text_delta\"") {
                first = Some(t.elapsed());
            }
            if self.line.starts_with(b"{\"type\":\"entry\"")
                && find(&self.line, b"\"kind\":\"turn_end\"").is_some()
            {
                return first.context("a turn without a text_delta");
            }
        }
    }
}

/// `pod acp` as an editor runs it: this program re-executed as `pod acp`
/// (see `main`), on the pod of `pod`, JSON-RPC on its stdin and stdout.
struct Editor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Editor {
    fn start(dir: &Path, pod: &PodProcess) -> anyhow::Result<Editor> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("acp")
            .env("POD_SOCKET", &pod.socket)
            .env("POD_DATA_DIR", dir.join("data"))
            .env("POD_NAME", "default")
            .env("POD_WORKSPACE", dir.join("ws"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start pod acp")?;
        let stdin = child.stdin.take().context("pod acp without stdin")?;
        let stdout = BufReader::with_capacity(
            1 << 20,
            child.stdout.take().context("pod acp without stdout")?,
        );
        let mut editor = Editor {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        editor.call("initialize", json!({"protocolVersion": 1}), |_| {})?;
        Ok(editor)
    }

    fn new_session(&mut self, cwd: &Path) -> anyhow::Result<String> {
        let reply = self.call("session/new", json!({"cwd": cwd, "mcpServers": []}), |_| {})?;
        reply["sessionId"]
            .as_str()
            .map(str::to_owned)
            .context("session/new without a sessionId")
    }

    /// `session/prompt`: the time to the first `agent_message_chunk`.
    fn prompt(&mut self, session_id: &str) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let mut first = None;
        let reply = self.call(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}),
            |line| {
                if first.is_none() && find(line, b"\"agent_message_chunk\"").is_some() {
                    first = Some(t.elapsed());
                }
            },
        )?;
        ensure!(
            reply["stopReason"] == "end_turn",
            "the prompt ended {reply}"
        );
        first.context("a prompt without an agent_message_chunk")
    }

    /// `session/load`: the time to its reply, every entry replayed before it.
    fn load(&mut self, session_id: &str, cwd: &Path) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let mut updates = 0usize;
        self.call(
            "session/load",
            json!({"sessionId": session_id, "cwd": cwd, "mcpServers": []}),
            |_| updates += 1,
        )?;
        let took = t.elapsed();
        ensure!(
            updates >= crate::attach::ENTRIES / 2,
            "session/load replayed {updates} updates of a {}-entry session",
            crate::attach::ENTRIES
        );
        Ok(took)
    }

    /// Sends one request and reads up to its reply; every other line (the
    /// notifications before it) goes to `on_other`.
    fn call(
        &mut self,
        method: &str,
        params: Value,
        mut on_other: impl FnMut(&[u8]),
    ) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut request = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )?;
        request.push(b'\n');
        self.stdin.write_all(&request)?;
        let needle = format!("\"id\":{id},");
        let mut line = Vec::new();
        loop {
            line.clear();
            if self.stdout.read_until(b'\n', &mut line)? == 0 {
                bail!("pod acp closed stdout during {method}");
            }
            if find(&line, b"\"method\"").is_none() && find(&line, needle.as_bytes()).is_some() {
                let reply: Value = serde_json::from_slice(&line)?;
                if let Some(error) = reply.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok(reply["result"].clone());
            }
            on_other(&line);
        }
    }
}

impl Drop for Editor {
    /// `pod acp` goes with the scenario; the pod it spoke to is the
    /// scenario's own and stops with its `PodProcess`.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
