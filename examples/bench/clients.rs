//! Protocol clients for the fan-out scenario: many on one tokio thread, each
//! timing the `text_delta`s it receives and checking its `entry` frames.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{bail, ensure, Context as _};
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

use crate::sse::{find, stamps_of};
use crate::util::now_us;

/// What one client saw of one turn.
pub struct Seen {
    /// Receive time − embedded send time of each delta, in µs.
    pub latencies_us: Vec<u32>,
    /// When the last delta arrived (µs since the epoch).
    pub last_delta_us: u64,
    /// The earliest embedded send time seen.
    pub first_stamp_us: u64,
}

/// Connects, reads the snapshot (then counts itself in `ready`), and reads
/// until the `turn_end` entry. Fails if an entry's seq is not the next one.
pub async fn client(socket: &Path, ready: Arc<AtomicUsize>) -> anyhow::Result<Seen> {
    let mut stream = UnixStream::connect(socket).await?;
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut watch = Watch::new(ready);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the pod closed the connection");
        }
        let now = now_us();
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(end) = memchr::memchr(b'\n', &buf[start..]) {
            let line = &buf[start..start + end];
            start += end + 1;
            if watch.frame(line, now)? {
                return Ok(watch.seen);
            }
        }
        buf.drain(..start);
    }
}

/// What a client makes of each frame, whatever carries it (a line of the
/// Unix socket, a WebSocket message).
pub struct Watch {
    pub seen: Seen,
    next_seq: Option<u64>,
    ready: Arc<AtomicUsize>,
}

impl Watch {
    pub fn new(ready: Arc<AtomicUsize>) -> Watch {
        Watch {
            seen: Seen {
                latencies_us: Vec::with_capacity(16 << 10),
                last_delta_us: 0,
                first_stamp_us: u64::MAX,
            },
            next_seq: None,
            ready,
        }
    }

    /// Takes one frame received at `now`; true once it was the `turn_end`.
    pub fn frame(&mut self, line: &[u8], now: u64) -> anyhow::Result<bool> {
        let seen = &mut self.seen;
        match self.next_seq {
            None => {
                self.next_seq = Some(snapshot_next_seq(line)?);
                self.ready.fetch_add(1, Ordering::AcqRel);
            }
            Some(_) if line.starts_with(b"{\"type\":\"text_delta\"") => {
                let before = seen.latencies_us.len();
                for stamp in stamps_of(line) {
                    seen.latencies_us.push(now.saturating_sub(stamp) as u32);
                    seen.first_stamp_us = seen.first_stamp_us.min(stamp);
                }
                ensure!(seen.latencies_us.len() > before, "a delta without a stamp");
                seen.last_delta_us = now;
            }
            Some(expected) if line.starts_with(b"{\"type\":\"entry\"") => {
                let seq = seq_of(line).context("an entry without a seq")?;
                ensure!(seq == expected, "entry seq {seq}, expected {expected}");
                if find(line, b"\"kind\":\"turn_end\"").is_some() {
                    return Ok(true);
                }
                self.next_seq = Some(expected + 1);
            }
            Some(_) if line.starts_with(b"{\"type\":\"error\"") => {
                bail!("the pod sent an error: {}", String::from_utf8_lossy(line))
            }
            Some(_) => {}
        }
        Ok(false)
    }
}

/// The seq the first `entry` after this snapshot must carry.
fn snapshot_next_seq(line: &[u8]) -> anyhow::Result<u64> {
    let snapshot: serde_json::Value = serde_json::from_slice(line)?;
    let entries = snapshot["entries"].as_array().context("no entries")?;
    let last = entries.last().and_then(|e| e["seq"].as_u64()).unwrap_or(0);
    Ok(last + 1)
}

fn seq_of(line: &[u8]) -> Option<u64> {
    let at = find(line, b"\"seq\":")? + 6;
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}
