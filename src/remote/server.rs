//! The HTTP routes: `/v1/health`, `/v1/pair`, `/v1/ws`, `/v1/blobs` and the
//! web client's files. Every refusal happens before any upgrade, in the
//! contract's order: `Host` (421), `Origin` (403), then the token (401, or
//! 429 for a locked-out address), then a bad `/v1/ws?tail=` (400), then a
//! `/v1/ws?agent=` that names no running pod of this process (404), then
//! `--max-remote-clients` (503).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::DefaultHeaders;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use anyhow::Context as _;

use super::checks::Checks;
use super::peer;
use crate::pod::{Access, Feed, RemoteClient};
use crate::protocol::AccessLevel;
use crate::store::device_tokens::{Granted, Tokens};

/// The same on every response (the contract's exact policy).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: \
                   data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
                   form-action 'none'";

/// How long a client has to send its request headers.
const HEADERS_WITHIN: Duration = Duration::from_secs(10);

/// The subprotocol a browser names to carry its token.
const SUBPROTOCOL: &str = "pod.v1";
const TOKEN_SUBPROTOCOL: &str = "pod.token.";

pub struct State {
    pub tokens: Arc<Tokens>,
    pub checks: Arc<Checks>,
    /// Each running pod's clients go through its door: the top pod's
    /// (named `pod`) without `?agent=`, a child's with it.
    pub doors: crate::pod::Doors,
    pub pod: String,
    /// Authenticated WebSocket connections now, and how many of them may
    /// only read.
    pub active: Arc<AtomicUsize>,
    pub active_read: Arc<AtomicUsize>,
    pub max_clients: usize,
    pub max_frame_bytes: usize,
    /// The image store `POST/GET /v1/blobs` serve (`None`: it could not
    /// be opened).
    pub blobs: Option<crate::blobs::Blobs>,
}

/// A place among `--max-remote-clients`, given back when dropped: the
/// counters it holds a place in.
pub struct Slot(Vec<Arc<AtomicUsize>>);

impl Slot {
    /// A place for a connection that may act (`read` false) or only read.
    /// Read-only connections share what [`read_only_share`] leaves them,
    /// so whoever holds a read-only token (or a tool that holds any) cannot
    /// take every place and lock the owner out with `503`.
    fn take(state: &State, read: bool) -> Option<Slot> {
        let mut counters = vec![(state.active.clone(), state.max_clients)];
        if read {
            counters.push((
                state.active_read.clone(),
                read_only_share(state.max_clients),
            ));
        }
        let mut slot = Slot(Vec::new());
        for (counter, max) in counters {
            let taken = counter
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                    (n < max).then_some(n + 1)
                })
                .is_ok();
            if !taken {
                // Dropping `slot` gives back what it took.
                return None;
            }
            slot.0.push(counter);
        }
        Some(slot)
    }
}

/// How many of `max` places read-only connections may hold together: all
/// but a quarter (rounded up) kept for full tokens, once there are two
/// places or more.
fn read_only_share(max: usize) -> usize {
    match max {
        0 | 1 => max,
        _ => max - max.div_ceil(4),
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        for counter in &self.0 {
            counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Loads `--tls-cert` / `--tls-key` (PEM); also answers the certificate's
/// DNS names, which the `Host` check accepts.
pub fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<(rustls::ServerConfig, Vec<String>)> {
    let read = |path: &Path| {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let cert_pem = read(cert)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not a PEM certificate", cert.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        cert.display()
    );
    let key_pem = read(key)?;
    let key_der = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .with_context(|| format!("{} is not a PEM private key", key.display()))?
        .with_context(|| format!("{} holds no PEM private key", key.display()))?;
    let names = webpki::EndEntityCert::try_from(&certs[0])
        .map(|c| c.valid_dns_names().map(str::to_owned).collect())
        .unwrap_or_default();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .with_context(|| {
            format!(
                "{} and {} do not make a usable certificate and key",
                cert.display(),
                key.display()
            )
        })?;
    Ok((config, names))
}

/// The socket the server accepts on.
pub enum Listener {
    Tcp(std::net::TcpListener),
    /// `--listen unix:PATH`.
    Unix(std::os::unix::net::UnixListener),
}

/// The process that connected to the Unix-socket door, as the kernel
/// recorded it (`SO_PEERCRED`) when the connection was made; `None` when it
/// does not say. Kept with the connection ([`HttpRequest::conn_data`]).
struct UnixPeer(Option<u32>);

/// Records the peer of a connection to the Unix-socket door; nothing for
/// TCP, whose peer is looked up by address ([`peer::held_by_a_tool`]).
fn remember_unix_peer(io: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    if let Some(stream) = io.downcast_ref::<tokio::net::UnixStream>() {
        let pid = stream
            .peer_cred()
            .ok()
            .and_then(|cred| cred.pid())
            .and_then(|pid| u32::try_from(pid).ok());
        data.insert(UnixPeer(pid));
    }
}

/// Serves on `listener` from now on (on the running actix system).
pub fn start(
    listener: Listener,
    tls: Option<rustls::ServerConfig>,
    state: State,
) -> anyhow::Result<()> {
    let state = web::Data::new(state);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(
                DefaultHeaders::new()
                    .add((header::CONTENT_SECURITY_POLICY, CSP))
                    .add((header::REFERRER_POLICY, "no-referrer"))
                    .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff")),
            )
            .route("/v1/health", web::get().to(health))
            .route("/v1/pair", web::post().to(pair))
            .route("/v1/ws", web::get().to(websocket))
            .route("/v1/blobs", web::post().to(put_blob))
            .route("/v1/blobs/{id}", web::get().to(get_blob))
            .default_service(web::to(asset))
    })
    // One worker thread: the pumps are light, and the machine's cores
    // belong to the pod's own threads.
    .workers(1)
    // Each pod frame is one small message the client waits for (a delta);
    // with Nagle's algorithm on, a message written while the last one is
    // unacknowledged waits for the client's delayed ACK (up to 40 ms on
    // Linux). The dispatcher already writes what is queued in one go.
    .tcp_nodelay(true)
    .disable_signals()
    .shutdown_timeout(1)
    .client_request_timeout(HEADERS_WITHIN)
    .client_disconnect_timeout(Duration::from_secs(1))
    .on_connect(remember_unix_peer);
    let server = match (listener, tls) {
        (Listener::Tcp(listener), Some(config)) => server.listen_rustls_0_23(listener, config)?,
        (Listener::Tcp(listener), None) => server.listen(listener)?,
        (Listener::Unix(listener), None) => server.listen_uds(listener)?,
        (Listener::Unix(_), Some(_)) => {
            anyhow::bail!("--listen unix:PATH serves no TLS (the proxy terminates it)")
        }
    };
    actix_rt::spawn(server.run());
    Ok(())
}

/// `{"type":"error","code":…,"message":…}` with `status`.
fn refusal(status: StatusCode, code: &str, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({
        "type": "error",
        "code": code,
        "message": message,
    }))
}

fn header(req: &HttpRequest, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn client_ip(req: &HttpRequest) -> IpAddr {
    req.peer_addr()
        .map(|a| peer::unmapped(a.ip()))
        .unwrap_or(IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED))
}

/// Whether the request's client socket is held by a tool (a pod or a
/// pod's descendant), or is on this machine and held by no process that
/// can be found: such a client may only read, whatever its token.
/// Asked of every client, whatever its address; on the Unix-socket door,
/// of the process that connected, as on the pod's own socket.
async fn held_by_a_tool(req: &HttpRequest) -> bool {
    if let Some(UnixPeer(pid)) = req.conn_data::<UnixPeer>() {
        let Some(pid) = *pid else {
            return true;
        };
        return web::block(move || crate::pod::descendants::is_tool_process(pid))
            .await
            .unwrap_or(true);
    }
    let Some(from) = req.peer_addr() else {
        return true;
    };
    let ours: SocketAddr = req.app_config().local_addr();
    web::block(move || peer::held_by_a_tool(from, ours))
        .await
        .unwrap_or(true)
}

/// The `Host` and `Origin` checks, which come before everything else.
fn misdirected(req: &HttpRequest, state: &State) -> Option<HttpResponse> {
    let host = header(req, header::HOST);
    if !state.checks.host_ok(host) {
        return Some(refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "unknown_host",
            "this server does not answer to that Host (start the pod with --allow-host NAME \
             to accept it)",
        ));
    }
    let origin = match req.headers().get(header::ORIGIN) {
        None => None,
        Some(value) => match value.to_str() {
            Ok(origin) => Some(origin),
            Err(_) => Some("null"),
        },
    };
    if !state.checks.origin_ok(origin, host.unwrap_or_default()) {
        return Some(refusal(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            "requests from pages of another origin are refused (start the pod with \
             --allow-origin ORIGIN to accept one)",
        ));
    }
    None
}

/// The token a request carries: `Authorization: Bearer`, or the
/// `pod.token.` subprotocol a browser's WebSocket can send.
fn presented(req: &HttpRequest) -> Option<String> {
    if let Some(bearer) = header(req, header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
    {
        return Some(bearer.to_owned());
    }
    req.headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|p| p.trim().strip_prefix(TOKEN_SUBPROTOCOL).map(str::to_owned))
}

/// A valid token's grant; `None` is answered with [`no_token`].
fn authenticate(req: &HttpRequest, state: &State) -> Option<Granted> {
    presented(req).and_then(|t| state.tokens.check(&t))
}

fn no_token(req: &HttpRequest, state: &State) -> HttpResponse {
    failed_check(
        req,
        state,
        "no valid device token (make one with `pod token create`)",
    )
}

/// The refusal of a failed check: 429 while the address is locked out
/// (never for a valid token), else 401, counted toward the lockout.
fn failed_check(req: &HttpRequest, state: &State, message: &str) -> HttpResponse {
    let ip = client_ip(req);
    if state.checks.locked(ip) {
        return HttpResponse::TooManyRequests()
            .insert_header((header::RETRY_AFTER, "60"))
            .json(serde_json::json!({
                "type": "error",
                "code": "locked_out",
                "message": "too many failed token checks from this address; try again in a minute",
            }));
    }
    state.checks.failed(ip);
    let mut response = refusal(StatusCode::UNAUTHORIZED, "unauthorized", message);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

async fn health(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    if let Some(refused) = misdirected(&req, &state) {
        return refused;
    }
    HttpResponse::Ok().json(serde_json::json!({"ok": true}))
}

#[derive(serde::Deserialize)]
struct PairRequest {
    code: String,
}

/// Exchanges a pairing code for a device token.
async fn pair(req: HttpRequest, body: web::Bytes, state: web::Data<State>) -> HttpResponse {
    if let Some(refused) = misdirected(&req, &state) {
        return refused;
    }
    let code = serde_json::from_slice::<PairRequest>(&body).map(|r| r.code);
    let Ok(code) = code else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_params",
            "send {\"code\": \"…\"}, the code after #pair= in the link `pod url` printed",
        );
    };
    // A valid code is never refused for the address's lockout (as a valid
    // token is not): it carries as many random bits as a token.
    let tokens = state.tokens.clone();
    let user_agent = header(&req, header::USER_AGENT).map(str::to_owned);
    match web::block(move || tokens.redeem_pairing(&code, user_agent.as_deref())).await {
        Ok(Ok(Some(issued))) => HttpResponse::Ok().json(serde_json::json!({
            "token": issued.token,
            "scope": issued.info.scope,
        })),
        Ok(Ok(None)) => failed_check(
            &req,
            &state,
            "that pairing code is unknown, used or expired; ask for a new link with `pod url`",
        ),
        Ok(Err(e)) => refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storage_error",
            &format!("cannot store the device token: {e}"),
        ),
        Err(_) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the pod is stopping",
        ),
    }
}

/// The refusal of a blob method, as the contract words it over HTTP.
fn blob_refusal(error: &crate::blobs::BlobError) -> HttpResponse {
    let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let code = serde_json::to_value(error.code())
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    refusal(status, &code, &error.to_string())
}

/// The checks every blob request passes first: `Host`, `Origin`, the
/// token; then the store itself.
fn blob_access(
    req: &HttpRequest,
    state: &State,
) -> Result<(Granted, crate::blobs::Blobs), Box<HttpResponse>> {
    if let Some(refused) = misdirected(req, state) {
        return Err(Box::new(refused));
    }
    let Some(granted) = authenticate(req, state) else {
        return Err(Box::new(no_token(req, state)));
    };
    let Some(blobs) = state.blobs.clone() else {
        return Err(Box::new(refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storage_error",
            "the image store could not be opened when the pod started (see its log)",
        )));
    };
    Ok((granted, blobs))
}

/// `POST /v1/blobs`: stores the body as an image of its `Content-Type`
/// and answers as `put_blob` does. A `Content-Length` over the limit is
/// refused before the body is read; a body that grows past it while
/// being read, as soon as it does.
async fn put_blob(
    req: HttpRequest,
    mut body: web::Payload,
    state: web::Data<State>,
) -> HttpResponse {
    use futures::StreamExt as _;
    let (granted, blobs) = match blob_access(&req, &state) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    if granted.scope == AccessLevel::Read {
        return refusal(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this device token may only read; storing an image needs a full token",
        );
    }
    if held_by_a_tool(&req).await {
        return refusal(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this client is a pod or a process a pod started (or its process cannot be \
             found), which may only read, whatever its token",
        );
    }
    let media_type = header(&req, header::CONTENT_TYPE)
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    if !crate::blobs::ACCEPTED_TYPES.contains(&media_type.as_str()) {
        return blob_refusal(&crate::blobs::BlobError::UnsupportedType(media_type));
    }
    let declared = header(&req, header::CONTENT_LENGTH).and_then(|n| n.parse::<u64>().ok());
    if let Some(size) = declared {
        if let Err(e) = blobs.check_size(size) {
            return blob_refusal(&e);
        }
    }
    let mut bytes = web::BytesMut::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            return refusal(
                StatusCode::BAD_REQUEST,
                "invalid_params",
                "the request body broke off before its end",
            );
        };
        bytes.extend_from_slice(&chunk);
        if let Err(e) = blobs.check_size(bytes.len() as u64) {
            return blob_refusal(&e);
        }
    }
    match web::block(move || blobs.put(&media_type, &bytes)).await {
        Ok(Ok(info)) => HttpResponse::Ok().json(serde_json::json!({
            "type": "response",
            "blob": info.digest.id(),
            "size": info.size,
            "media_type": info.media_type,
        })),
        Ok(Err(e)) => blob_refusal(&e),
        Err(_) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the pod is stopping",
        ),
    }
}

/// `GET /v1/blobs/<id>`: the image's bytes with their `Content-Type`; any
/// token may read.
async fn get_blob(
    req: HttpRequest,
    id: web::Path<String>,
    state: web::Data<State>,
) -> HttpResponse {
    let (_, blobs) = match blob_access(&req, &state) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let id = id.into_inner();
    match web::block(move || blobs.get(&id)).await {
        Ok(Ok((info, bytes))) => HttpResponse::Ok()
            .content_type(info.media_type)
            .insert_header((
                header::CACHE_CONTROL,
                "private, max-age=31536000, immutable",
            ))
            .body(bytes),
        Ok(Err(e)) => blob_refusal(&e),
        Err(_) => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the pod is stopping",
        ),
    }
}

/// The web client's files: no data, no token.
async fn asset(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    if let Some(refused) = misdirected(&req, &state) {
        return refused;
    }
    if !matches!(req.method().as_str(), "GET" | "HEAD") {
        return refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "only GET",
        );
    }
    match crate::web::asset(req.path()) {
        // `no-cache` with a validator: a reload costs a 304, and a new
        // binary's page is never shown stale.
        Some(asset) if header(&req, header::IF_NONE_MATCH) == Some(asset.etag().as_str()) => {
            HttpResponse::NotModified()
                .insert_header((header::CACHE_CONTROL, "no-cache"))
                .insert_header((header::ETAG, asset.etag()))
                .finish()
        }
        Some(asset) => HttpResponse::Ok()
            .content_type(asset.content_type)
            .insert_header((header::CACHE_CONTROL, "no-cache"))
            .insert_header((header::ETAG, asset.etag()))
            .body(asset.body),
        // Every browser asks for it unbidden: a 404 would be a red line in
        // each console for nothing; "no icon" is the true answer.
        None if req.path() == "/favicon.ico" => HttpResponse::NoContent()
            .insert_header((header::CACHE_CONTROL, "max-age=86400"))
            .finish(),
        None => refusal(StatusCode::NOT_FOUND, "not_found", "no such page"),
    }
}

/// The most entries a tail snapshot may ask for (the contract's bound).
pub const MAX_TAIL: usize = 10_000;

/// What a `/v1/ws` query asks: `?tail=N` and `?agent=NAME`.
struct Asked {
    /// `None` without `tail` (a full snapshot), else N, a whole number
    /// from 1 to [`MAX_TAIL`].
    tail: Option<usize>,
    /// The pod to connect to, when not the top pod: a child's full name.
    agent: Option<String>,
}

/// Reads the query of `/v1/ws`, or says what is wrong with it.
fn asked(query: &str) -> Result<Asked, String> {
    #[derive(serde::Deserialize)]
    struct Query {
        tail: Option<String>,
        agent: Option<String>,
    }
    let query = web::Query::<Query>::from_query(query)
        .map_err(|e| format!("cannot read the query {query:?}: {e}"))?
        .into_inner();
    let tail = match query.tail {
        None => None,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_TAIL).contains(&n) && text.bytes().all(|b| b.is_ascii_digit()) => {
                Some(n)
            }
            _ => {
                return Err(format!(
                    "`tail` must be a whole number of entries from 1 to {MAX_TAIL}, not \
                     {text:?}; leave it out for the whole session"
                ))
            }
        },
    };
    Ok(Asked {
        tail,
        agent: query.agent,
    })
}

/// Upgrades an authenticated request and bridges it to a pod connection.
async fn websocket(req: HttpRequest, body: web::Payload, state: web::Data<State>) -> HttpResponse {
    if let Some(refused) = misdirected(&req, &state) {
        return refused;
    }
    let Some(granted) = authenticate(&req, &state) else {
        return no_token(&req, &state);
    };
    let Some(revoked) = state.tokens.watch(&granted.id) else {
        return failed_check(&req, &state, "that device token was revoked");
    };
    let Asked { tail, agent } = match asked(req.query_string()) {
        Ok(asked) => asked,
        Err(why) => return refusal(StatusCode::BAD_REQUEST, "invalid_params", &why),
    };
    let Some(door) = state.doors.door(agent.as_deref().unwrap_or(&state.pod)) else {
        return refusal(
            StatusCode::NOT_FOUND,
            "unknown_agent",
            &format!(
                "no pod named {:?} runs here: `agent` takes the full name of a running child \
                 of {:?} (its status lists them; `pod agents` on the pod's machine too)",
                agent.unwrap_or_default(),
                state.pod
            ),
        );
    };
    let ip = client_ip(&req);
    let descendant = held_by_a_tool(&req).await;
    let read_token = granted.scope == AccessLevel::Read;
    let Some(slot) = Slot::take(&state, descendant || read_token) else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_clients",
            "the pod has as many remote clients as --max-remote-clients allows (a quarter \
             of them kept for full tokens)",
        );
    };
    let access = Access::remote(ip, descendant, read_token);
    // The handshake's answer; its body is the bridge's, which takes the
    // pod's frames straight from the connection's feed.
    let mut response = match actix_http::ws::handshake(req.head()) {
        Ok(response) => response,
        Err(e) => return actix_http::Response::from(e).into(),
    };
    let pair = std::os::unix::net::UnixStream::pair().and_then(|(ours, theirs)| {
        ours.set_nonblocking(true)?;
        theirs.set_nonblocking(true)?;
        Ok((ours, theirs))
    });
    let Ok((ours, theirs)) = pair else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the pod cannot open a connection now (out of descriptors?)",
        );
    };
    let ours = match tokio::net::UnixStream::from_std(ours) {
        Ok(ours) => ours,
        Err(e) => {
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                &e.to_string(),
            )
        }
    };
    let feed = Feed::new();
    if door
        .send(RemoteClient {
            socket: theirs,
            feed: feed.clone(),
            access,
            tail,
        })
        .is_err()
    {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the pod is stopping",
        );
    }
    let offered_subprotocol = req
        .headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == SUBPROTOCOL);
    if offered_subprotocol {
        response.insert_header((header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL));
    }
    let body = super::bridge::open(feed, body, ours, revoked, slot, state.max_frame_bytes);
    match response.message_body(body) {
        Ok(response) => response.into(),
        Err(e) => HttpResponse::from_error(e),
    }
}
