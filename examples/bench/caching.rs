//! Scenario 14, prompt caching: the 20th model call of a 20-turn session in
//! Anthropic's format, with the pod's cache breakpoints against the same
//! request without them. What a long session costs is its input tokens on
//! every call; with the breakpoints, what an earlier call already sent is
//! read from Anthropic's cache at a tenth of the price.
//!
//! Billed input tokens are estimated from the request's bytes (4 bytes a
//! token, as the pod's own first estimate) at Anthropic's rates: a prefix
//! read from the cache at 0.1×, the part written to it at 1.25×, the rest
//! at 1×. Anthropic caches in the order tools, system, messages (whatever
//! the order of the JSON keys). The prefix counted as cached is the one up
//! to the previous call's last breakpoint, and only if this call's request
//! starts with exactly that content (breakpoint markers aside) — a prefix
//! that changed between calls would be no cache hit, and the row would
//! fail.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context};

use crate::sse::{find, read_request};
use crate::util::{PodProcess, Row};
use crate::Config;

/// The calls the session makes; the row is about the last one.
const CALLS: usize = 20;
/// What the pod writes after a block to mark a cache breakpoint.
const MARKER: &[u8] = b",\"cache_control\":{\"type\":\"ephemeral\"}";
/// Bytes a token, as the pod estimates before a server has told it better.
const BYTES_PER_TOKEN: f64 = 4.0;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let server = Server::start()?;
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let base_url = format!("http://{}", server.address);
    let args = [
        "--provider",
        "anthropic",
        "--base-url",
        &base_url,
        "--model",
        "bench",
        "--context-window",
        "1000000000",
    ];
    let mut pod = PodProcess::spawn_with_env(dir.path(), &args, &[("ANTHROPIC_API_KEY", "bench")])?;
    pod.wait_listening(Instant::now())?;
    let mut client = crate::later::Client::connect(&pod)?;
    for turn in 0..CALLS {
        // About 500 bytes of question, so the conversation grows as a real
        // one does (the answer adds 1.5 KB).
        let text = format!("question {turn}: {}", crate::util::filler(480, turn));
        client.say(&text)?;
    }
    let bodies = server.bodies();
    if bodies.len() < CALLS {
        bail!("the server saw {} calls, not {CALLS}", bodies.len());
    }
    let (previous, last) = (&bodies[CALLS - 2], &bodies[CALLS - 1]);
    let without = canonical(&strip(last), None)?;
    let cached = canonical(&strip(previous), Some(last_marked(previous)?))?;
    let hit = without.starts_with(&cached);
    let through_mark = canonical(&strip(last), Some(last_marked(last)?))?;
    let written = through_mark.len().saturating_sub(cached.len());
    let cached = if hit { cached.len() } else { 0 };
    let rest = without.len() - cached - written;
    let tokens = |bytes: usize| bytes as f64 / BYTES_PER_TOKEN;
    let billed_without = tokens(without.len());
    let billed_with = 0.1 * tokens(cached) + 1.25 * tokens(written) + tokens(rest);
    Ok(vec![Row::at_most(
        "14. prompt caching, 20th call of a 20-turn session (Anthropic): billed input tokens, estimated",
        format!(
            "{billed_without:.0} tokens without breakpoints ({} bytes)",
            strip(last).len()
        ),
        format!(
            "{billed_with:.0} tokens with them ({} bytes; {:.0} read from the cache{})",
            last.len(),
            tokens(cached),
            if hit {
                ""
            } else {
                ", **the prefix changed**"
            }
        ),
        billed_with / billed_without,
        "≤ 0.5",
        0.5,
    )])
}

/// `body` without its breakpoint markers: the request as it would be sent
/// without prompt caching.
fn strip(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = find(rest, MARKER) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at + MARKER.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The request in the order Anthropic caches it — tools, system, then the
/// messages — whatever the order of its JSON keys; with `through`, only
/// the messages up to that one.
fn canonical(body: &[u8], through: Option<usize>) -> anyhow::Result<Vec<u8>> {
    let request: serde_json::Value = serde_json::from_slice(body)?;
    let mut out = Vec::new();
    serde_json::to_writer(&mut out, &request["tools"])?;
    serde_json::to_writer(&mut out, &request["system"])?;
    let messages = request["messages"]
        .as_array()
        .context("a request without messages")?;
    let end = through.map_or(messages.len(), |i| i + 1);
    for message in messages.iter().take(end) {
        serde_json::to_writer(&mut out, message)?;
    }
    Ok(out)
}

/// The index of the last message holding a cache breakpoint.
fn last_marked(body: &[u8]) -> anyhow::Result<usize> {
    let request: serde_json::Value = serde_json::from_slice(body)?;
    request["messages"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .rposition(|m| m.to_string().contains("cache_control"))
        })
        .context("a request with no breakpoint in its messages")
}

/// A Messages API server on loopback that answers every call with 1.5 KB
/// of text and keeps every request body.
struct Server {
    address: String,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Server {
    fn start() -> anyhow::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?.to_string();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || {
                    let _ = answer(stream, &kept);
                });
            }
        });
        Ok(Server { address, bodies })
    }

    fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn answer(mut stream: TcpStream, kept: &Mutex<Vec<Vec<u8>>>) -> std::io::Result<()> {
    let Some(body) = read_request(&stream)? else {
        return Ok(());
    };
    let n = {
        let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.push(body);
        kept.len()
    };
    let text = crate::util::filler(1500, 1000 + n);
    let events = [
        ("message_start", r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"bench","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#.to_owned()),
        ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_owned()),
        ("content_block_delta", serde_json::json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}).to_string()),
        ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#.to_owned()),
        ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":400}}"#.to_owned()),
        ("message_stop", r#"{"type":"message_stop"}"#.to_owned()),
    ];
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    for (event, data) in events {
        out.extend_from_slice(format!("event: {event}\ndata: {data}\n\n").as_bytes());
    }
    stream.write_all(&out)?;
    stream.shutdown(std::net::Shutdown::Write)
}
