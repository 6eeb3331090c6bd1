//! An OpenAI-compatible chat completions server on loopback that streams
//! `tokens` text chunks, each carrying the time it was written (`T<µs> `),
//! so a client of the pod can tell how long a delta took to reach it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::util::now_us;

/// How the server answers the next request.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Pause between reading the request and the first chunk (the model
    /// "thinking").
    pub think: Duration,
    pub tokens: usize,
    /// Time between chunks; `None` writes them as fast as the socket takes
    /// them.
    pub interval: Option<Duration>,
}

pub struct SseServer {
    /// The base URL the pod's `--base-url` takes (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    plan: Arc<Mutex<Plan>>,
    /// The body of the last request served, so a baseline client can send
    /// exactly what the pod sent.
    last_body: Arc<Mutex<Vec<u8>>>,
}

impl SseServer {
    pub fn start(plan: Plan) -> anyhow::Result<SseServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let plan = Arc::new(Mutex::new(plan));
        let last_body = Arc::new(Mutex::new(Vec::new()));
        let current = Arc::clone(&plan);
        let recorded = Arc::clone(&last_body);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let plan = *current.lock().unwrap_or_else(|e| e.into_inner());
                let recorded = Arc::clone(&recorded);
                std::thread::spawn(move || {
                    let _ = serve(stream, plan, &recorded);
                });
            }
        });
        Ok(SseServer {
            url,
            plan,
            last_body,
        })
    }

    /// The `pod serve` arguments that point a pod at this server.
    /// `pod serve` flags for a pod that talks to this server, with a context
    /// window no measurement's session comes near, so that compaction never
    /// interrupts one.
    pub fn pod_args(&self) -> Vec<&str> {
        vec![
            "--provider",
            "openai",
            "--base-url",
            &self.url,
            "--model",
            "bench",
            "--context-window",
            "1000000000",
        ]
    }

    /// `host:port`, for a client that speaks HTTP itself.
    pub fn address(&self) -> &str {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
    }

    /// The body of the last request the server read.
    pub fn last_body(&self) -> Vec<u8> {
        self.last_body
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_plan(&self, plan: Plan) {
        *self.plan.lock().unwrap_or_else(|e| e.into_inner()) = plan;
    }
}

/// Reads one request (head and body), then streams the reply and closes.
pub fn serve(stream: TcpStream, plan: Plan, last_body: &Mutex<Vec<u8>>) -> std::io::Result<()> {
    let Some(body) = read_request(&stream)? else {
        return Ok(());
    };
    *last_body.lock().unwrap_or_else(|e| e.into_inner()) = body;
    reply(stream, plan)
}

/// Reads one HTTP request's head and returns its body; `None` when the
/// client closed first.
pub fn read_request(stream: &TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Some(body))
}

fn reply(mut stream: TcpStream, plan: Plan) -> std::io::Result<()> {
    std::thread::sleep(plan.think);
    let mut out = Vec::with_capacity(64 << 10);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
          connection: close\r\n\r\n",
    );
    let start = Instant::now();
    for i in 0..plan.tokens {
        if let Some(interval) = plan.interval {
            let due = start + interval * i as u32;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        chunk(&mut out, now_us());
        // Unpaced, chunks are written in batches, as a fast server's would
        // coalesce in its socket buffer anyway.
        if plan.interval.is_some() || out.len() > 16 << 10 || i + 1 == plan.tokens {
            stream.write_all(&out)?;
            out.clear();
        }
    }
    out.extend_from_slice(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\
          \"usage\":null}\n\ndata: [DONE]\n\n",
    );
    stream.write_all(&out)?;
    stream.shutdown(std::net::Shutdown::Write)
}

fn chunk(out: &mut Vec<u8>, stamp: u64) {
    out.extend_from_slice(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"T");
    out.extend_from_slice(stamp.to_string().as_bytes());
    out.extend_from_slice(b" \"},\"finish_reason\":null}]}\n\n");
}

/// The stamps of a `text_delta` frame (`{"type":"text_delta","text":"T<µs>
/// T<µs> "}`): one per chunk the server sent, since the pod merges the
/// deltas it sends together into one frame. Parsed by hand, as fast as
/// the clients can, so that the clients measure the pod rather than
/// themselves.
pub fn stamps_of(frame: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut rest = frame
        .strip_prefix(b"{\"type\":\"text_delta\",\"text\":\"")
        .unwrap_or_default();
    std::iter::from_fn(move || {
        let digits = rest.strip_prefix(b"T")?;
        let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        let stamp = digits[..len]
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        rest = digits[len..].strip_prefix(b" ")?;
        Some(stamp)
    })
}

/// Where `needle` first occurs. SIMD search: a client looks for
/// `turn_end` in every entry, and at the end of a 5,000-chunk burst that
/// entry is a 90 KB line per client — searched byte by byte, 256 of them
/// took the clients' thread longer than the pod took to send them.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}
