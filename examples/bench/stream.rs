//! Scenario 7, streaming cost: the CPU time `pod serve` spends on a streamed
//! answer with one client attached, against a bare reader of the same
//! stream — the same HTTP client (reqwest) and SSE parser
//! (eventsource-stream), parsing each chunk's JSON and doing nothing else —
//! run as a process of its own (this program re-executed with
//! `bare-read`), in the same run.
//!
//! CPU time is read from `/proc/PID/task/*/schedstat` (nanoseconds on a CPU,
//! every thread), before the `run` and after the `turn_end`; the bare
//! reader reads its own the same way around its request.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use futures::StreamExt;

use crate::sse::{Plan, SseServer};
use crate::util::{median, PodProcess, Row};
use crate::Config;

const CHUNKS: usize = 2000;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 3 } else { 9 };
    // A model's pace: one chunk every half millisecond, each read alone.
    let plan = Plan {
        think: Duration::ZERO,
        tokens: CHUNKS,
        interval: Some(Duration::from_micros(500)),
    };
    let sse = SseServer::start(plan)?;
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let args = sse.pod_args();
    let mut pod = PodProcess::spawn(dir.path(), &args)?;
    pod.wait_listening(Instant::now())?;
    let stream = UnixStream::connect(&pod.socket)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let body_file = dir.path().join("body.json");
    let mut pod_ms = Vec::new();
    let mut bare_ms = Vec::new();
    for _ in 0..reps {
        let before = cpu_ns(pod.pid())?;
        writer.write_all(
            b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n",
        )?;
        let mut deltas = 0;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                bail!("the pod closed the connection mid-turn");
            }
            if line.starts_with(b"{\"type\":\"text_delta\"") {
                deltas += 1;
            }
            if line.starts_with(b"{\"type\":\"entry\"")
                && crate::sse::find(&line, b"\"kind\":\"turn_end\"").is_some()
            {
                break;
            }
        }
        let after = cpu_ns(pod.pid())?;
        ensure!(deltas > 0, "the turn streamed no text");
        pod_ms.push(per_thousand(after - before));

        std::fs::write(&body_file, sse.last_body())?;
        let out = Command::new(std::env::current_exe()?)
            .arg("bare-read")
            .arg(format!("{}/chat/completions", sse.url))
            .arg(&body_file)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .context("cannot start the bare reader")?;
        ensure!(out.status.success(), "the bare reader failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let (cpu, chunks) = text
            .trim()
            .split_once(' ')
            .context("the bare reader printed no figures")?;
        let chunks: usize = chunks.parse()?;
        ensure!(chunks == CHUNKS, "the bare reader read {chunks} chunks");
        bare_ms.push(per_thousand(cpu.parse()?));
    }
    let (pod_ms, bare_ms) = (median(&pod_ms), median(&bare_ms));
    Ok(vec![Row::at_most(
        "7. streaming cost, CPU per 1,000 chunks, one client attached",
        format!("{bare_ms:.1} ms bare reader (reqwest + SSE + JSON)"),
        format!("{pod_ms:.1} ms pod serve"),
        pod_ms / bare_ms,
        "≤ 1.5×",
        1.5,
    )])
}

/// CPU milliseconds per 1,000 chunks.
fn per_thousand(ns: u64) -> f64 {
    ns as f64 / 1e6 / CHUNKS as f64 * 1000.0
}

/// Nanoseconds the process `pid` has run on a CPU, all its threads.
fn cpu_ns(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = task?.path().join("schedstat");
        // A thread may end between the listing and the read.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        total += text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .context("unreadable schedstat")?;
    }
    Ok(total)
}

/// The chunk format the loopback server writes, typed as the pod's
/// provider parses it.
#[derive(serde::Deserialize)]
struct Chunk {
    choices: Vec<Choice>,
}

#[derive(serde::Deserialize)]
struct Choice {
    delta: Option<Delta>,
}

#[derive(serde::Deserialize)]
struct Delta {
    content: Option<String>,
}

/// `bench bare-read URL BODY_FILE`: posts the body, reads the event stream
/// to `[DONE]` parsing each event's JSON, and prints its own CPU time in
/// ns and the number of chunks read.
pub fn bare_read() -> ExitCode {
    let run = || -> anyhow::Result<()> {
        let mut args = std::env::args().skip(2);
        let url = args.next().context("no URL")?;
        let body = std::fs::read(args.next().context("no body file")?)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let client = reqwest::Client::new();
        let (cpu, chunks) = runtime.block_on(async {
            let before = cpu_ns(std::process::id())?;
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            let mut events = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
            let (mut chunks, mut text) = (0, 0);
            while let Some(event) = events.next().await {
                let event = event?;
                if event.data == "[DONE]" {
                    break;
                }
                let chunk: Chunk = serde_json::from_str(&event.data)?;
                let delta = chunk.choices.into_iter().next().and_then(|c| c.delta);
                text += delta.and_then(|d| d.content).map_or(0, |t| t.len());
                chunks += 1;
            }
            ensure!(text > 0, "the stream carried no text");
            anyhow::Ok((cpu_ns(std::process::id())? - before, chunks - 1))
        })?;
        println!("{cpu} {chunks}");
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bare-read: {e:#}");
            ExitCode::FAILURE
        }
    }
}
