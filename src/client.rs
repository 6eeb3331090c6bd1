//! A protocol client: connect to a pod — over its Unix socket, or over the
//! network (`--url`, a WebSocket) — read events, send methods.
//!
//! Used by every front end in this crate (`pod send`, `status`, `stop`, the
//! TUI). It is deliberately thin: the protocol is the API, and both
//! transports carry the same frames (one line ↔ one text message).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest as _, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

use crate::protocol::answer::{Answer, Missing};
use crate::protocol::{ErrorCode, Event, Method, Request};

/// Where a pod is reached.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// Its Unix socket.
    Socket(PathBuf),
    /// `--url`: its WebSocket.
    Remote(Remote),
}

/// A pod over the network, with the device token to show it.
#[derive(Clone)]
pub struct Remote {
    /// `ws://…/v1/ws` or `wss://…/v1/ws`.
    pub url: String,
    pub token: String,
    /// `--ca-cert`: a certificate authority to trust besides the system's.
    pub ca_cert: Option<PathBuf>,
}

impl fmt::Debug for Remote {
    // Never the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("ca_cert", &self.ca_cert)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Where a child pod of the pod here listens: beside its parent's
    /// socket (`<dir>/<child name>.sock`, protocol.md "Child pods"). Over
    /// the network a child has no door of its own: `None`.
    pub fn child(&self, name: &str) -> Option<Endpoint> {
        match self {
            Endpoint::Socket(socket) => Some(Endpoint::Socket(
                socket.with_file_name(format!("{name}.sock")),
            )),
            Endpoint::Remote(_) => None,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Socket(path) => write!(f, "{}", path.display()),
            Endpoint::Remote(remote) => f.write_str(&remote.url),
        }
    }
}

/// `--url`'s value as the WebSocket URL to open: `http(s)` becomes
/// `ws(s)`, and `/v1/ws` is the path when it has none.
pub fn websocket_url(url: &str) -> Result<String, String> {
    let mut parsed =
        reqwest::Url::parse(url.trim()).map_err(|e| format!("--url {url:?} is not a URL ({e})"))?;
    let scheme = match parsed.scheme() {
        "ws" | "http" => "ws",
        "wss" | "https" => "wss",
        other => {
            return Err(format!(
                "--url {url:?}: the scheme {other}:// is not one of ws, wss, http, https"
            ))
        }
    };
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("--url {url:?} names no host"));
    }
    parsed
        .set_scheme(scheme)
        .map_err(|()| format!("--url {url:?}: cannot use it as a WebSocket URL"))?;
    if matches!(parsed.path(), "" | "/") {
        parsed.set_path("/v1/ws");
    }
    parsed.set_fragment(None);
    Ok(parsed.to_string())
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no pod is listening on {}", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the process listening on {} runs as uid {server_uid}, not as you (uid {my_uid}); \
         refusing to talk to it. Someone else may have put it there: check that socket and its \
         directory",
        path.display()
    )]
    ForeignServer {
        path: PathBuf,
        server_uid: u32,
        my_uid: u32,
    },
    #[error("no pod answers at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The pod refused the connection before the upgrade (401, 403, …).
    #[error("the pod at {url} refused the connection ({status}): {reason}")]
    Refused {
        url: String,
        status: u16,
        reason: String,
    },
    /// The TLS handshake refused the pod's certificate.
    #[error("the pod at {url} presented a TLS certificate this client refuses: {reason}")]
    Certificate { url: String, reason: String },
    #[error("--ca-cert {}: {reason}", path.display())]
    CaCert { path: PathBuf, reason: String },
    #[error("connection to the pod failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the pod sent a frame that is not a valid event: {0}")]
    BadEvent(String),
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The reading half: yields events in the pod's order.
pub struct EventStream {
    frames: Frames,
}

enum Frames {
    Socket(FramedRead<OwnedReadHalf, LinesCodec>),
    Remote(SplitStream<Ws>),
}

/// The writing half: sends methods.
pub struct RequestSink {
    frames: Sink,
}

enum Sink {
    Socket(FramedWrite<OwnedWriteHalf, LinesCodec>),
    Remote(SplitSink<Ws, Message>),
}

/// Connects to the pod at `endpoint`.
pub async fn connect(endpoint: &Endpoint) -> Result<(EventStream, RequestSink), ClientError> {
    match endpoint {
        Endpoint::Socket(path) => connect_socket(path).await,
        Endpoint::Remote(remote) => connect_remote(remote).await,
    }
}

/// Nothing is sent to a server run by another user: whoever can create the
/// socket first could otherwise read what the user types.
async fn connect_socket(socket: &Path) -> Result<(EventStream, RequestSink), ClientError> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    let server_uid = stream.peer_cred()?.uid();
    let my_uid = rustix::process::geteuid().as_raw();
    if server_uid != my_uid {
        return Err(ClientError::ForeignServer {
            path: socket.to_owned(),
            server_uid,
            my_uid,
        });
    }
    Ok(split(stream))
}

/// A client over a stream already connected to a pod: one end of the
/// socket pair a pod this process hosts hands out (`EmbeddedPod::connect`,
/// `pod/embedded.rs`: the client side names no server code).
pub fn over(stream: std::os::unix::net::UnixStream) -> std::io::Result<(EventStream, RequestSink)> {
    stream.set_nonblocking(true)?;
    Ok(split(UnixStream::from_std(stream)?))
}

fn split(stream: UnixStream) -> (EventStream, RequestSink) {
    let (read, write) = stream.into_split();
    (
        EventStream {
            frames: Frames::Socket(FramedRead::new(read, LinesCodec::new())),
        },
        RequestSink {
            frames: Sink::Socket(FramedWrite::new(write, LinesCodec::new())),
        },
    )
}

/// The token goes in `Authorization: Bearer`, never in the URL.
async fn connect_remote(remote: &Remote) -> Result<(EventStream, RequestSink), ClientError> {
    let unreachable = |reason: String| ClientError::Unreachable {
        url: remote.url.clone(),
        reason,
    };
    let mut request = remote
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| unreachable(e.to_string()))?;
    let bearer = format!("Bearer {}", remote.token);
    let bearer = bearer
        .parse()
        .map_err(|_| unreachable("the device token holds characters no header may".into()))?;
    request.headers_mut().insert("authorization", bearer);
    let connector = tokio_tungstenite::Connector::Rustls(tls_config(remote.ca_cert.as_deref())?);
    // A snapshot is one message: as long as the session it holds.
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let connected = tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(config),
        true,
        Some(connector),
    )
    .await;
    let (ws, _) = connected.map_err(|e| match e {
        tungstenite::Error::Http(response) => {
            let body = response.body().as_deref().unwrap_or_default();
            let reason = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("message")?.as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
            ClientError::Refused {
                url: remote.url.clone(),
                status: response.status().as_u16(),
                reason,
            }
        }
        e => match certificate_refusal(&e) {
            Some(reason) => ClientError::Certificate {
                url: remote.url.clone(),
                reason,
            },
            None => unreachable(e.to_string()),
        },
    })?;
    let (sink, stream) = ws.split();
    Ok((
        EventStream {
            frames: Frames::Remote(stream),
        },
        RequestSink {
            frames: Sink::Remote(sink),
        },
    ))
}

/// What to do about a certificate the handshake refused, in words: the
/// TLS library's own (`Other(OtherError(CaUsedAsEndEntity))`) say what is
/// wrong only to someone who knows it.
fn certificate_refusal(error: &tungstenite::Error) -> Option<String> {
    let tungstenite::Error::Io(io) = error else {
        return None;
    };
    let rustls::Error::InvalidCertificate(why) = io.get_ref()?.downcast_ref::<rustls::Error>()?
    else {
        return None;
    };
    use rustls::CertificateError as E;
    let text = match why {
        E::UnknownIssuer => "it is not signed by an authority this machine trusts; give this \
             client the pod's certificate (or its authority's) with --ca-cert FILE"
            .to_owned(),
        E::NotValidForName | E::NotValidForNameContext { .. } => "it does not name the host \
             in the URL; use a name it lists (its subjectAltName), or make one that lists this \
             one"
        .to_owned(),
        E::Expired | E::ExpiredContext { .. } => "it has expired; make a new one".to_owned(),
        other if format!("{other:?}").contains("CaUsedAsEndEntity") => "it is an authority's \
             certificate (basicConstraints CA:TRUE), which TLS refuses from a server; make it \
             with `-addext basicConstraints=critical,CA:FALSE` (docs/remote.md)"
            .to_owned(),
        other => format!("{other:?}"),
    };
    Some(text)
}

/// The system's roots (as webpki ships them) and `--ca-cert`'s; a
/// certificate given with `--ca-cert` is also pinned ([`Pinned`]).
fn tls_config(ca_cert: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let mut pinned = Vec::new();
    if let Some(path) = ca_cert {
        let bad = |reason: String| ClientError::CaCert {
            path: path.to_owned(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("not PEM ({e})")))?;
        if certs.is_empty() {
            return Err(bad("holds no PEM certificate".into()));
        }
        for cert in certs {
            roots.add(cert.clone()).map_err(|e| bad(e.to_string()))?;
            pinned.push(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let io = |e: String| ClientError::Io(std::io::Error::other(e));
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| io(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| io(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { webpki, pinned }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The usual checks (a chain to a trusted authority, the name, the
/// dates), and besides them: a server that presents, as its own
/// certificate, exactly one the user gave with `--ca-cert` (compared byte
/// for byte) is trusted. The user handed over that very certificate, so it
/// says whom to trust better than any chain — which is how the most common
/// self-signed certificate (`openssl req -x509 …`, marked CA:TRUE, so
/// refused from a server by the usual checks) becomes usable. The
/// handshake's signature is checked as always, so only the holder of the
/// certificate's key gets through.
#[derive(Debug)]
struct Pinned {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// One frame of the pod's. A `response` or a `snapshot` — the frames that
/// carry a whole session, 10 MB at 10,000 entries — is read straight into
/// its struct: read as `Event`, an internally tagged enum, serde would
/// first buffer the whole frame (every string, every map) to find its
/// `type`, then build the struct from that copy. The pod writes `type`
/// first; anything else, or a frame the short way cannot read, goes the
/// general way, which says what is wrong.
pub(crate) fn parse_event(line: &str) -> serde_json::Result<Event> {
    if line.starts_with(r#"{"type":"response","#) {
        if let Ok(response) = serde_json::from_str(line) {
            return Ok(Event::Response(response));
        }
    } else if line.starts_with(r#"{"type":"snapshot","#) {
        if let Ok(snapshot) = serde_json::from_str(line) {
            return Ok(Event::Snapshot(Box::new(snapshot)));
        }
    }
    serde_json::from_str(line)
}

impl EventStream {
    /// The next event, or `None` when the pod closed the connection.
    pub async fn next(&mut self) -> Option<Result<Event, ClientError>> {
        Some(self.next_frame().await?.map(|(_, event)| event))
    }

    /// The next event with the frame it was parsed from.
    pub async fn next_frame(&mut self) -> Option<Result<(String, Event), ClientError>> {
        let line = match &mut self.frames {
            Frames::Socket(frames) => match frames.next().await? {
                Ok(line) => line,
                Err(e) => return Some(Err(ClientError::BadEvent(e.to_string()))),
            },
            Frames::Remote(frames) => loop {
                match frames.next().await? {
                    Ok(Message::Text(text)) => break text.as_str().to_owned(),
                    Ok(Message::Close(_)) => return None,
                    // Pings are answered by the library; nothing else is sent.
                    Ok(_) => continue,
                    Err(e) => return Some(Err(ClientError::Io(std::io::Error::other(e)))),
                }
            },
        };
        Some(match parse_event(&line) {
            Ok(event) => Ok((line, event)),
            Err(e) => Err(ClientError::BadEvent(format!("{e}: {line:.200}"))),
        })
    }

    /// Waits until the pod says `shutdown` or the connection ends, skipping
    /// every other frame: what a client that asked the pod to stop waits
    /// for once [`call`] has its answer.
    pub async fn until_shutdown(&mut self) {
        while let Some(event) = self.next().await {
            if let Ok(Event::Shutdown { .. }) = event {
                return;
            }
        }
    }
}

impl RequestSink {
    pub async fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let frame = request.to_frame();
        let frame = frame.trim_end_matches('\n');
        let sent = match &mut self.frames {
            Sink::Socket(frames) => frames.send(frame).await.map_err(|e| e.to_string()),
            Sink::Remote(frames) => frames
                .send(Message::text(frame))
                .await
                .map_err(|e| e.to_string()),
        };
        sent.map_err(|e| ClientError::Io(std::io::Error::other(e)))
    }
}

/// Why [`call`] has no answer: the pod refused the method, or the
/// connection ended or failed before it answered.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The pod answered with an `error` frame carrying this call's `request_id`.
    #[error("{message}")]
    Refused { code: ErrorCode, message: String },
    /// The pod said `shutdown` before it answered: it is closing, an answer
    /// not sent by then may never come, and waiting on would only wait for
    /// the socket to close.
    #[error("the pod shut down ({reason})")]
    ShutDown { reason: String },
    /// The connection closed before the answer came.
    #[error("the pod closed the connection before it answered")]
    Closed,
    /// The `response` is not the asked method's answer (a field it must
    /// have is missing).
    #[error(transparent)]
    Unexpected(#[from] Missing),
    /// Sending the method or reading a frame failed.
    #[error(transparent)]
    Connection(#[from] ClientError),
}

/// Sends `method` with a fresh `request_id` and waits for the pod's answer
/// to it: the `response`, read as the answer `A` the caller asked for
/// ([`crate::protocol::answer`]: `Rules` for `list_rules`, `Ack` for
/// `pause`, …), or the `error` that names that `request_id`.
///
/// One rule for every client that asks, so that none decides it anew:
///
/// - Every other frame (the snapshot, entries, deltas, `status`, other
///   clients' answers, errors for no request or another one) is skipped;
///   [`call_seeing`] hands them to the caller instead.
/// - `shutdown` ends the wait with [`Refusal::ShutDown`], also for the
///   `shutdown` method itself when its `response` did not come first: the
///   pod is closing, and an answer it has not sent by then may never come
///   (`pod stop` takes `shutdown` as done; other commands say it).
/// - A closed connection ends it with [`Refusal::Closed`], a failed one
///   with [`Refusal::Connection`].
/// - There is no timeout of its own: the pod answers every method it
///   reads, one client's in order, so an answer that does not come means
///   the connection is gone, which the rules above report. A caller that
///   must bound the wait wraps the call in `tokio::time::timeout`; dropping
///   the call is safe (no frame is half read), and its late answer, under
///   a `request_id` nobody else uses, is skipped by the next call.
///
/// A `run`'s answer says only that the run was taken (`queued`); its turn
/// is followed through its frames, which is not a call's job (`pod send`,
/// `pod exec`).
pub async fn call<A: Answer>(
    events: &mut EventStream,
    sink: &mut RequestSink,
    method: Method,
) -> Result<A, Refusal> {
    call_seeing(events, sink, method, |_, _| {}).await
}

/// [`call`], handing every frame that is not the answer to `other` (with
/// the line it was parsed from) instead of skipping it: for a client that
/// asks in the middle of following the conversation.
pub async fn call_seeing<A: Answer>(
    events: &mut EventStream,
    sink: &mut RequestSink,
    method: Method,
    mut other: impl FnMut(String, Event),
) -> Result<A, Refusal> {
    let id = format!("call-{}", uuid::Uuid::new_v4().simple());
    sink.send(&Request::with_id(method, id.clone())).await?;
    while let Some(frame) = events.next_frame().await {
        let (line, event) = frame?;
        match event {
            Event::Response(response) if response.request_id.as_deref() == Some(&id) => {
                return Ok(A::read(response)?);
            }
            Event::Error {
                code,
                message,
                request_id: Some(answered),
            } if answered == id => return Err(Refusal::Refused { code, message }),
            Event::Shutdown { reason } => return Err(Refusal::ShutDown { reason }),
            event => other(line, event),
        }
    }
    Err(Refusal::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::answer::Rules;
    use serde_json::json;

    #[test]
    fn a_response_or_snapshot_read_the_short_way_is_the_event_read_the_long_way() {
        let id = uuid::Uuid::new_v4();
        let entries = json!([
            {"seq": 0, "entry": {"kind": "session_start", "session_id": id,
                                 "created_at": "2026-12-07T00:00:00Z"}},
            {"seq": 1, "entry": {"kind": "user_input", "at": "", "segments": [
                {"type": "text", "text": "hi \"there\"\n✓"},
                {"type": "file_ref", "path": "a.rs"}]}},
            {"seq": 2, "entry": {"kind": "assistant_items", "items": [
                {"type": "tool_call", "call_id": "c", "name": "bash",
                 "arguments": {"command": "ls", "n": [1, 2.5, null]}}]}},
            {"seq": 3, "entry": {"kind": "some_later_kind", "x": 1}},
        ]);
        let frames = [
            json!({"type": "response", "request_id": "acp-2", "session_id": id,
                   "entries": entries}),
            json!({"type": "response", "queued": 2}),
            json!({"type": "response", "request_id": "r", "completions": ["src/"]}),
            json!({"type": "snapshot", "protocol_version": 1,
                "greeting": {"pod": "default", "version": "0.1.0", "session_id": id,
                             "provider": "offline", "model": "offline", "workspace": "/w",
                             "pid": 7},
                "status": {"state": "idle", "queued": 0, "pending_approvals": [],
                           "approval": "ask", "model": "offline", "context_tokens": 0},
                "session_id": id, "entries": entries, "in_flight": null}),
            // Not what it claims to be: the long way, and its error.
            json!({"type": "response", "queued": "many"}),
            json!({"type": "snapshot", "entries": 3}),
            json!({"type": "text_delta", "text": "x"}),
        ];
        for (n, frame) in frames.into_iter().enumerate() {
            let line = frame.to_string();
            let short = parse_event(&line).map_err(|e| e.to_string());
            let long = serde_json::from_str::<Event>(&line).map_err(|e| e.to_string());
            assert_eq!(short, long, "{line}");
            assert_eq!(short.is_ok(), n < 4 || n == 6, "{line}: {short:?}");
        }
    }

    #[test]
    fn urls_become_websocket_urls_with_the_default_path() {
        assert_eq!(websocket_url("http://h:1").unwrap(), "ws://h:1/v1/ws");
        assert_eq!(websocket_url("https://h/").unwrap(), "wss://h/v1/ws");
        assert_eq!(websocket_url("wss://h:2/v1/ws").unwrap(), "wss://h:2/v1/ws");
        assert_eq!(websocket_url("https://h/#pair=x").unwrap(), "wss://h/v1/ws");
        assert!(websocket_url("ftp://h").is_err());
        assert!(websocket_url("h:1").is_err());
    }

    /// A pod on the far end of a socket pair: reads the call's request,
    /// then writes `frames`, each with `{id}` replaced by the request's
    /// `request_id`, and closes.
    async fn pod_answering(frames: &'static [&'static str]) -> Result<Rules, Refusal> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (mut events, mut sink) = over(ours).unwrap();
        let pod = std::thread::spawn(move || {
            use std::io::{BufRead, Write};
            let mut reader = std::io::BufReader::new(&theirs);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let request: serde_json::Value = serde_json::from_str(&line).unwrap();
            let id = request["request_id"].as_str().unwrap().to_owned();
            let mut writer = &theirs;
            for frame in frames {
                writeln!(writer, "{}", frame.replace("{id}", &id)).unwrap();
            }
        });
        let answer = call(&mut events, &mut sink, Method::ListRules).await;
        pod.join().unwrap();
        answer
    }

    #[tokio::test]
    async fn a_call_skips_other_frames_and_returns_its_own_answer() {
        let answer = pod_answering(&[
            r#"{"type":"text_delta","text":"x"}"#,
            r#"{"type":"response","request_id":"other","rules":[]}"#,
            r#"{"type":"error","code":"lagged","message":"not ours"}"#,
            r#"{"type":"error","code":"busy","message":"not ours","request_id":"other"}"#,
            r#"{"type":"response","request_id":"{id}","rules":[]}"#,
        ])
        .await
        .unwrap();
        assert_eq!(answer.rules, Vec::new());
    }

    #[tokio::test]
    async fn a_call_ends_with_the_error_for_it_with_shutdown_or_with_the_connection() {
        let refused = pod_answering(&[
            r#"{"type":"error","code":"forbidden","message":"read only","request_id":"{id}"}"#,
        ])
        .await;
        assert!(
            matches!(&refused, Err(Refusal::Refused { code: ErrorCode::Forbidden, message }) if message == "read only"),
            "{refused:?}"
        );
        let shut = pod_answering(&[r#"{"type":"shutdown","reason":"requested"}"#]).await;
        assert!(
            matches!(&shut, Err(Refusal::ShutDown { reason }) if reason == "requested"),
            "{shut:?}"
        );
        let closed = pod_answering(&[r#"{"type":"status","state":"idle","queued":0}"#]).await;
        assert!(matches!(closed, Err(Refusal::Closed)), "{closed:?}");
        let other = pod_answering(&[r#"{"type":"response","request_id":"{id}","ok":true}"#]).await;
        assert!(
            matches!(other, Err(Refusal::Unexpected(Missing("rules")))),
            "{other:?}"
        );
        let bad = pod_answering(&["not json"]).await;
        assert!(
            matches!(bad, Err(Refusal::Connection(ClientError::BadEvent(_)))),
            "{bad:?}"
        );
    }
}
