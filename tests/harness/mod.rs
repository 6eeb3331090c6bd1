//! Test harness: a real `pod serve` process on a temporary directory, and
//! plain blocking clients on real Unix sockets.
#![allow(dead_code)]

pub mod schema;
pub mod ws;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const POD: &str = env!("CARGO_BIN_EXE_pod");

/// Log lines as their entries' kinds, an assistant block as
/// `assistant:TYPE` and the pod's environment entry as `environment`: the
/// shape of a turn, for comparing logs.
pub fn kinds(log: &[Value]) -> Vec<String> {
    log.iter()
        .map(|l| {
            let entry = &l["entry"];
            match entry["kind"].as_str().unwrap() {
                "assistant_items" => {
                    format!("assistant:{}", entry["items"][0]["type"].as_str().unwrap())
                }
                "hook_injected_items" if entry["items"][0]["source"] == "environment" => {
                    "environment".to_owned()
                }
                kind => kind.to_owned(),
            }
        })
        .collect()
}

/// The log line of the first entry of `kind` (`assistant:TYPE` and
/// `environment` as [`kinds`] names them): tests find entries by what they
/// are, not by where they happen to fall.
pub fn first_of<'a>(log: &'a [Value], kind: &str) -> &'a Value {
    let at = kinds(log)
        .iter()
        .position(|k| k == kind)
        .unwrap_or_else(|| panic!("no {kind} entry in {:?}", kinds(log)));
    &log[at]
}

/// A running `pod serve`, killed on drop.
pub struct Pod {
    pub dir: tempfile::TempDir,
    pub child: Child,
    pub socket: PathBuf,
    pub data_dir: PathBuf,
    pub workspace: PathBuf,
}

pub struct PodBuilder {
    args: Vec<String>,
    env: Vec<(String, String)>,
    dir: Option<tempfile::TempDir>,
    script: Option<String>,
}

impl PodBuilder {
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<const N: usize>(mut self, args: [&str; N]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Use the `script` provider with this script (JSONL).
    pub fn script(mut self, script: &str) -> Self {
        self.script = Some(script.into());
        self
    }

    /// Reuse the directory of an earlier pod (its data dir and workspace).
    pub fn in_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.dir = Some(dir);
        self
    }

    pub fn start(self) -> Pod {
        let dir = self.dir.unwrap_or_else(|| tempfile::tempdir().unwrap());
        let socket = dir.path().join("run/pod.sock");
        let data_dir = dir.path().join("data");
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        let mut cmd = Command::new(POD);
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--workspace")
            .arg(&workspace)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(script) = &self.script {
            let path = dir.path().join("script.jsonl");
            std::fs::write(&path, script).unwrap();
            cmd.arg("--provider")
                .arg("script")
                .arg("--script")
                .arg(path);
        }
        // Tests mean tools to run unasked unless they choose a mode.
        if !self.args.iter().any(|a| a == "--approval") {
            cmd.arg("--approval").arg("auto");
        }
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let mut pod = Pod {
            dir,
            child,
            socket,
            data_dir,
            workspace,
        };
        pod.wait_listening();
        pod
    }
}

impl Pod {
    pub fn builder() -> PodBuilder {
        PodBuilder {
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
            script: None,
        }
    }

    pub fn start() -> Pod {
        Pod::builder().start()
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(mut stderr) = self.child.stderr.take() {
                    std::io::Read::read_to_string(&mut stderr, &mut err).ok();
                }
                panic!("pod serve exited ({status}) before listening: {err}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("pod serve did not listen within 20 s");
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// The current session's log lines, parsed.
    pub fn log_lines(&self) -> Vec<Value> {
        let pointer: Value =
            serde_json::from_slice(&std::fs::read(self.state_file()).unwrap()).unwrap();
        let id = pointer["session_id"].as_str().unwrap().to_owned();
        self.session_lines(&id)
    }

    /// The pod's name: derived from its workspace, as `pod` derives it.
    pub fn name(&self) -> String {
        pod::cli::derived_name(&self.workspace.canonicalize().unwrap())
    }

    /// The pod's state file, `pods/NAME.json`.
    pub fn state_file(&self) -> PathBuf {
        self.data_dir.join(format!("pods/{}.json", self.name()))
    }

    pub fn session_lines(&self, session_id: &str) -> Vec<Value> {
        read_lines(&self.data_dir.join(format!("sessions/{session_id}.jsonl")))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits for the process to exit on its own.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pod did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Keeps the directory (data and workspace) for a restarted pod.
    pub fn into_dir(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }

    /// A `pod` command aimed at this pod.
    pub fn command(&self, subcommand: &str) -> Command {
        let mut cmd = Command::new(POD);
        cmd.arg(subcommand)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--data-dir")
            .arg(&self.data_dir)
            // As a user runs them, in the pod's workspace (the environment,
            // so that a test may still give `--workspace`).
            .env("POD_WORKSPACE", &self.workspace)
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"));
        cmd
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asserts a `pod` command succeeded (showing its stderr if not) and
/// returns its stdout.
pub fn succeeded(output: std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A blocking protocol client that records every frame.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    pub frames: Vec<Value>,
}

impl Client {
    pub fn connect(socket: &Path) -> Client {
        let stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            frames: Vec::new(),
        }
    }

    /// Waits up to `timeout` for each frame instead of 20 s: a real model on
    /// a busy CPU can stay silent for minutes (`tests/real_model.rs`).
    pub fn patient(&self, timeout: Duration) {
        self.writer.set_read_timeout(Some(timeout)).unwrap();
    }

    /// Sends a frame; one that is a method must pass the schema.
    pub fn send(&mut self, frame: Value) {
        self.send_raw(format!("{frame}\n").as_bytes());
    }

    /// Sends bytes as they are; each line that is a JSON object with a
    /// method's `type` must pass the schema.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        schema::check_sent(bytes);
        self.send_unchecked(bytes);
    }

    /// Sends bytes without checking them: for frames malformed on purpose.
    pub fn send_unchecked(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// The next frame, or `None` at EOF.
    pub fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("pod sent a bad frame ({e}): {line}"));
                schema::check_received(&v);
                self.frames.push(v.clone());
                Some(v)
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// Reads until a frame matches; returns it.
    pub fn until_with(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            match self.next() {
                Some(v) if pred(&v) => return v,
                Some(_) => {}
                None => panic!("connection closed while waiting for {what}"),
            }
        }
    }

    pub fn until_type(&mut self, ty: &str) -> Value {
        self.until_with(ty, |v| v["type"] == ty)
    }

    /// Reads until an `entry` of this kind.
    pub fn until_entry(&mut self, kind: &str) -> Value {
        self.until_with(kind, |v| v["type"] == "entry" && v["entry"]["kind"] == kind)
    }

    /// Sends a `run` with one text segment.
    pub fn run(&mut self, text: &str) {
        self.send(serde_json::json!({"type":"run","segments":[{"type":"text","text":text}]}));
    }

    /// The `(session_id, seq, entry)` of the snapshot and every `entry` frame
    /// received so far, in order.
    pub fn log_view(&self) -> Vec<(String, u64, Value)> {
        let mut view = Vec::new();
        for frame in &self.frames {
            match frame["type"].as_str() {
                Some("snapshot") => {
                    let sid = frame["session_id"].as_str().unwrap().to_owned();
                    for line in frame["entries"].as_array().unwrap() {
                        view.push((
                            sid.clone(),
                            line["seq"].as_u64().unwrap(),
                            line["entry"].clone(),
                        ));
                    }
                }
                Some("entry") => view.push((
                    frame["session_id"].as_str().unwrap().to_owned(),
                    frame["seq"].as_u64().unwrap(),
                    frame["entry"].clone(),
                )),
                _ => {}
            }
        }
        view
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        schema::record_count();
    }
}

/// Waits for a condition, polling; for state that has no event to wait on
/// (a file on disk, a process's memory).
pub fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A script line: one model reply streaming `words` text chunks with a delay.
pub fn slow_text_reply(words: usize, delay_ms: u64) -> String {
    let mut events = Vec::new();
    for i in 0..words {
        events.push(serde_json::json!({"delay_ms": delay_ms}));
        events.push(serde_json::json!({"text": format!("w{i} ")}));
    }
    serde_json::json!({ "events": events }).to_string()
}

impl Client {
    /// Reads until a frame matches.
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        self.until_with("a matching frame", pred)
    }
}

/// A script: one step of `bash` calls `(call_id, command)`, then a text
/// reply.
pub fn bash_step(calls: &[(&str, &str)]) -> String {
    let events: Vec<Value> = calls
        .iter()
        .map(|(id, command)| {
            serde_json::json!({"tool_call":{"id":id,"name":"bash","arguments":{"command":command}}})
        })
        .collect();
    format!(
        "{}\n{}\n",
        serde_json::json!({ "events": events }),
        serde_json::json!({"events":[{"text":"done"}]})
    )
}

/// A directory for the test's files that the sandbox does not allow
/// writing to: the target directory's scratch space, unless the checkout
/// itself lives under a temp directory (a CI clone in /tmp), then /var/tmp.
pub fn outside_temp_dirs() -> std::path::PathBuf {
    let system_tmp = std::env::temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| "/tmp".into());
    let allowed = |p: &std::path::Path| p.starts_with("/tmp") || p.starts_with(&system_tmp);
    let target = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = target.canonicalize().unwrap_or(target);
    if !allowed(&target) {
        return target;
    }
    let var_tmp = std::path::PathBuf::from("/var/tmp/pod-sandbox-tests");
    std::fs::create_dir_all(&var_tmp).unwrap();
    var_tmp
}
