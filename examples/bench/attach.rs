//! Scenario 2, attach: connect → last byte of the snapshot of a 10,000-entry
//! session, against streaming the raw log file over a Unix socket; and the
//! pod's memory for it.

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::Instant;

use anyhow::ensure;
use pod::protocol::{AssistantItem, LogEntry, Segment, TurnEndReason};

use crate::util::{filler, median, ms, PodProcess, Row};
use crate::Config;

pub const ENTRIES: usize = 10_000;
const MIB: f64 = 1024.0 * 1024.0;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let log = session(&dir.path().join("data"))?;
    let log_len = std::fs::metadata(&log)?.len();

    let raw_socket = dir.path().join("raw.sock");
    let listener = UnixListener::bind(&raw_socket)?;
    let served = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            if let Ok(mut file) = std::fs::File::open(&served) {
                let _ = std::io::copy(&mut file, &mut stream);
            }
        }
    });

    let mut pod = PodProcess::spawn(dir.path(), &["--provider", "offline"])?;
    pod.wait_listening(Instant::now())?;
    let snapshot = read_snapshot(&pod.socket)?;
    let parsed: serde_json::Value = serde_json::from_slice(&snapshot)?;
    ensure!(
        parsed["entries"].as_array().map(Vec::len) == Some(ENTRIES + 1),
        "the snapshot does not hold the whole session"
    );

    let mut raw = Vec::new();
    let mut attach = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let n = read_to_end(&raw_socket)?;
        raw.push(ms(t.elapsed()));
        ensure!(
            n as u64 == log_len,
            "raw stream sent {n} of {log_len} bytes"
        );
        let t = Instant::now();
        read_snapshot(&pod.socket)?;
        attach.push(ms(t.elapsed()));
    }
    let (_, peak) = pod.rss()?;
    let raw = median(&raw);
    let attach = median(&attach);
    let rss_bar = 2.0 * log_len as f64 + 30.0 * MIB;
    Ok(vec![
        Row::at_most(
            "2. attach 10,000 entries, connect → snapshot",
            format!("{raw:.2} ms raw file over socket"),
            format!("{attach:.2} ms"),
            attach / raw,
            "≤ 2×",
            2.0,
        ),
        Row::at_most(
            "2. attach, pod peak RSS",
            format!(
                "2 × {:.1} MiB log + 30 MiB = {:.1} MiB",
                log_len as f64 / MIB,
                rss_bar / MIB
            ),
            format!("{:.1} MiB", peak as f64 / MIB),
            peak as f64 / rss_bar,
            "≤ 1× the bar",
            1.0,
        ),
    ])
}

/// Writes the session every attach row reads: `ENTRIES` entries of ~1 KiB,
/// alternating user input and assistant text, the last turn closed (so the
/// pod has nothing to commit on startup and the snapshot is the only frame
/// a client gets). Returns the log's path.
pub fn session(data_dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    session_of(data_dir, ENTRIES)
}

/// The same session with `entries` entries.
pub fn session_of(data_dir: &Path, entries: usize) -> anyhow::Result<std::path::PathBuf> {
    crate::util::write_session(
        data_dir,
        (0..entries).map(|i| {
            if i + 1 == entries {
                LogEntry::TurnEnd {
                    reason: TurnEndReason::Completed,
                    turn_id: None,
                    request_id: None,
                    usage: None,
                    error: None,
                }
            } else if i % 2 == 0 {
                LogEntry::UserInput {
                    segments: vec![Segment::text(filler(1000, i))],
                    at: LogEntry::now(),
                    turn_id: None,
                    request_id: None,
                    resolved: Default::default(),
                }
            } else {
                LogEntry::AssistantItems {
                    items: vec![AssistantItem::Text {
                        text: filler(1000, i),
                    }],
                }
            }
        }),
    )
}

/// Connects and reads until the snapshot's closing newline. An idle pod
/// sends nothing after it, so the last byte of a read is that newline.
pub(crate) fn read_snapshot(socket: &Path) -> anyhow::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(socket)?;
    let mut data = Vec::with_capacity(16 << 20);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = stream.read(&mut buf)?;
        ensure!(
            n > 0,
            "the pod closed the connection before the snapshot ended"
        );
        data.extend_from_slice(&buf[..n]);
        if buf[n - 1] == b'\n' {
            return Ok(data);
        }
    }
}

/// Connects and reads everything the raw server streams.
fn read_to_end(socket: &Path) -> anyhow::Result<usize> {
    let mut stream = UnixStream::connect(socket)?;
    let mut data = Vec::with_capacity(16 << 20);
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(data.len());
        }
        data.extend_from_slice(&buf[..n]);
    }
}
