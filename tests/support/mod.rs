//! A real HTTP server on 127.0.0.1 for provider tests: it records every
//! request and answers each with the next scripted reply, written byte for
//! byte as given (SSE in chunks with pauses, or a status and a body).

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use pod::provider::{ModelError, ModelEvent, ModelStream};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// How the server answers one request. The connection is closed after each
/// reply, so an SSE body simply ends where its bytes end.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream`, each piece written after its pause.
    Sse(Vec<(Duration, Vec<u8>)>),
    /// A status and a body, `application/json` unless a `content-type`
    /// header is given.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

impl Reply {
    pub fn sse(body: &str) -> Self {
        Reply::Sse(vec![(Duration::ZERO, body.as_bytes().to_vec())])
    }

    /// The body cut into pieces of `size` bytes (mid-line, mid-UTF-8 even),
    /// each sent after `pause`: exercises the client's buffering.
    pub fn sse_chunked(body: &str, size: usize, pause: Duration) -> Self {
        Reply::Sse(
            body.as_bytes()
                .chunks(size)
                .map(|c| (pause, c.to_vec()))
                .collect(),
        )
    }

    pub fn status(status: u16, body: &str) -> Self {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    pub fn with_header(self, name: &str, value: &str) -> Self {
        match self {
            Reply::Status {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.to_owned(), value.to_owned()));
                Reply::Status {
                    status,
                    headers,
                    body,
                }
            }
            sse => sse,
        }
    }
}

pub struct Server {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A model server for tests that drive a pod from plain threads: on a
/// runtime of its own that lives as long as the test.
pub fn model_server(replies: Vec<Reply>) -> (tokio::runtime::Runtime, Server) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::start(replies));
    (rt, server)
}

impl Server {
    /// Serves `replies` in order; requests beyond them get a 599 so a test
    /// that makes too many requests fails loudly.
    pub async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies
                    .next()
                    .unwrap_or_else(|| Reply::status(599, "no reply scripted"));
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move { serve(socket, reply, recorded).await });
            }
        });
        Server { url, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut socket: TcpStream, reply: Reply, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    recorded.lock().unwrap().push(request);
    match reply {
        Reply::Sse(pieces) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        cache-control: no-cache\r\nconnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for (pause, piece) in pieces {
                tokio::time::sleep(pause).await;
                if socket.write_all(&piece).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
            }
        }
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Status\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            // JSON unless the reply names its own type.
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                head.push_str("content-type: application/json\r\n");
            }
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        }
    }
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8(body).ok()?,
    })
}

/// A URL on which nothing listens: connecting is refused at once.
pub async fn refused_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

/// Every event of a stream, and the error that ended it, if any (asserting
/// that nothing follows an error).
pub async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "events after an error");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

/// The `Retry` announcements of a stream as `(attempt, delay_ms, error)`,
/// and the other events (the reply), apart.
/// Checks retries against `(attempt, backoff_ms, error)`: a wait is its
/// backoff with jitter, between half of it and all of it (in whole ms).
pub fn assert_retries(retries: &[(u32, u64, String)], expected: &[(u32, u64, &str)]) {
    assert_eq!(retries.len(), expected.len(), "{retries:?}");
    for ((attempt, delay, error), (want_attempt, backoff, want_error)) in
        retries.iter().zip(expected)
    {
        assert_eq!((*attempt, error.as_str()), (*want_attempt, *want_error));
        assert!(
            (backoff / 2..=*backoff).contains(delay),
            "retry {attempt} waited {delay} ms, not within its backoff {backoff} ms with jitter"
        );
    }
}

pub fn split_retries(events: Vec<ModelEvent>) -> (Vec<(u32, u64, String)>, Vec<ModelEvent>) {
    let mut retries = Vec::new();
    let mut reply = Vec::new();
    for event in events {
        match event {
            ModelEvent::Retry {
                attempt,
                delay_ms,
                error,
                ..
            } => retries.push((attempt, delay_ms, error)),
            other => reply.push(other),
        }
    }
    (retries, reply)
}

/// Concatenated SSE frames `data: {json}\n\n`, as OpenAI writes them.
pub fn data_frames(datas: &[&str]) -> String {
    datas.iter().map(|d| format!("data: {d}\n\n")).collect()
}

/// Concatenated SSE frames `event: {type}\ndata: {json}\n\n`, as Anthropic
/// writes them; the event name is read from the data's `type`.
pub fn typed_frames(datas: &[&str]) -> String {
    datas
        .iter()
        .map(|d| {
            let kind = serde_json::from_str::<Value>(d).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned();
            format!("event: {kind}\ndata: {d}\n\n")
        })
        .collect()
}
