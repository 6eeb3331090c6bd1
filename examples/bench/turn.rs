//! Scenario 5, the pod's overhead on a turn: time from `run` to the first
//! `text_delta` at a client, against the loopback model server's own time to
//! first byte as a plain HTTP client sees it — for the same request body: the
//! conversation grows by 2,000 tokens a turn, and sending it is the model
//! server's time, not the pod's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::sse::{Plan, SseServer};
use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

const PLAN: Plan = Plan {
    think: Duration::from_millis(10),
    tokens: 2000,
    interval: None,
};

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 21 };
    let sse = SseServer::start(PLAN)?;
    let address = sse.address().to_owned();
    let mut direct = Vec::new();
    let mut via_pod = Vec::new();
    for _ in 0..reps {
        via_pod.push(ms(first_turn(config, &sse)?));
        direct.push(ms(direct_ttfb(&address, &sse.last_body())?));
    }
    let direct = median(&direct);
    let via_pod = median(&via_pod);
    let overhead = via_pod - direct;
    Ok(vec![Row::at_most(
        "5. turn: first delta at a client − server TTFB",
        format!("{direct:.2} ms server TTFB (direct HTTP client)"),
        format!("{via_pod:.2} ms run → first text_delta"),
        overhead / 2.0,
        "≤ 1× (2 ms)",
        1.0,
    )])
}

/// The first turn of a fresh pod: time from writing `run` to reading the
/// first `text_delta`. Each repetition gets its own pod, so that what is
/// measured is the pod's work on a turn, not the growth of the conversation
/// every request carries (see docs/performance.md).
fn first_turn(config: &Config, sse: &SseServer) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let mut pod = PodProcess::spawn(dir.path(), &sse.pod_args())?;
    pod.wait_listening(Instant::now())?;
    let stream = UnixStream::connect(&pod.socket)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let t = Instant::now();
    writer.write_all(b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n")?;
    let mut first = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            bail!("the pod closed the connection mid-turn");
        }
        if first.is_none() && line.starts_with(b"{\"type\":\"text_delta\"") {
            first = Some(t.elapsed());
        }
        if line.starts_with(b"{\"type\":\"entry\"")
            && crate::sse::find(&line, b"\"kind\":\"turn_end\"").is_some()
        {
            break;
        }
    }
    first.context("a turn without a text_delta")
}

/// Connect, POST `body` as a chat completion request, read until the first
/// SSE event is complete; then read the rest of the reply unmeasured.
pub fn direct_ttfb(address: &str, body: &[u8]) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let mut request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         accept: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request)?;
    let mut data = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let ttfb = loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            bail!("the model server closed before its first event");
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(head) = crate::sse::find(&data, b"\r\n\r\n") {
            if crate::sse::find(&data[head..], b"\n\n").is_some() {
                break t.elapsed();
            }
        }
    };
    while stream.read(&mut buf)? > 0 {}
    Ok(ttfb)
}
