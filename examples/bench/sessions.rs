//! Scenario 6, sessions: `list_sessions` over a data directory of 1,000
//! sessions, through the socket, while the current session grows between
//! listings — against listing the directory (`read_dir` + a `stat` per log).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use serde_json::Value;

use crate::util::{median, ms, realistic_entry, PodProcess, Row};
use crate::Config;

const SESSIONS: usize = 1_000;
const ENTRIES: usize = 40;
/// The bar: a listing answers within this.
const BAR_MS: f64 = 50.0;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 20 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let data = dir.path().join("data");
    for _ in 0..SESSIONS {
        // The last one written is the pod's current session.
        crate::util::write_session(&data, (0..ENTRIES).map(|i| realistic_entry(i, 400)))?;
    }
    let mut pod = PodProcess::spawn(dir.path(), &["--provider", "offline"])?;
    pod.wait_listening(Instant::now())?;
    let mut client = Client::connect(&pod.socket)?;
    client.until(|f| f["type"] == "snapshot")?;

    // The first listing builds the index from the logs.
    let t = Instant::now();
    let listed = client.list_sessions()?;
    let cold = ms(t.elapsed());
    ensure!(
        listed == SESSIONS,
        "listed {listed} sessions, not {SESSIONS}"
    );

    let sessions_dir = data.join("sessions");
    let mut baseline = Vec::new();
    let mut listing = Vec::new();
    for i in 0..reps {
        // The current session grows, so each listing has appends to follow.
        client.send(&format!(
            r#"{{"type":"run","segments":[{{"type":"text","text":"turn {i}"}}]}}"#
        ))?;
        client.until(|f| f["type"] == "entry" && f["entry"]["kind"] == "turn_end")?;
        let t = Instant::now();
        let n = list_dir(&sessions_dir)?;
        baseline.push(ms(t.elapsed()));
        ensure!(n == SESSIONS, "read_dir found {n} logs");
        let t = Instant::now();
        let n = client.list_sessions()?;
        listing.push(ms(t.elapsed()));
        ensure!(n == SESSIONS, "listed {n} sessions");
    }
    let baseline = median(&baseline);
    let listing = median(&listing);
    Ok(vec![Row::at_most(
        "6. list_sessions, 1,000 sessions",
        format!("{baseline:.2} ms read_dir + stat of the logs"),
        format!("{listing:.2} ms request → response (first, index built: {cold:.0} ms)"),
        listing / BAR_MS,
        "≤ 1× (50 ms)",
        1.0,
    )])
}

/// The baseline: what any listing must do at least — name and stat every log.
fn list_dir(dir: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with(".jsonl") {
            entry.metadata()?;
            n += 1;
        }
    }
    Ok(n)
}

struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn connect(socket: &Path) -> anyhow::Result<Client> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    fn send(&mut self, frame: &str) -> anyhow::Result<()> {
        self.writer.write_all(frame.as_bytes())?;
        self.writer.write_all(b"\n")?;
        Ok(())
    }

    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.reader.read_line(&mut line)?;
            ensure!(n > 0, "the pod closed the connection");
            let frame: Value = serde_json::from_str(&line).context("a bad frame")?;
            if pred(&frame) {
                return Ok(frame);
            }
        }
    }

    /// Sends `list_sessions` and waits for its answer; returns how many
    /// sessions it listed.
    fn list_sessions(&mut self) -> anyhow::Result<usize> {
        self.send(r#"{"type":"list_sessions","request_id":"ls"}"#)?;
        let answer = self.until(|f| f["request_id"] == "ls")?;
        answer["sessions"]
            .as_array()
            .map(Vec::len)
            .with_context(|| format!("list_sessions failed: {answer}"))
    }
}
