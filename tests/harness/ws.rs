//! A plain blocking WebSocket client of `/v1/ws`, for the remote tests: the
//! same handshake a browser makes, and the refusal's status and JSON body
//! when the pod answers before the upgrade.

use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

pub type Ws = tungstenite::WebSocket<TcpStream>;

/// Opens `/v1/ws` plus `query` (`""` or `?tail=…`) with these extra
/// headers; the HTTP status and body when refused.
pub fn open(port: u16, query: &str, headers: &[(&str, &str)]) -> Result<Ws, (u16, Value)> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    handshake(
        &format!("ws://127.0.0.1:{port}/v1/ws{query}"),
        headers,
        stream,
    )
}

/// Opens `url` (`ws://HOST/v1/ws…`, whose host becomes the `Host` header)
/// over the Unix socket at `path` — the `--listen unix:PATH` door, as a
/// reverse proxy on the pod's machine reaches it — with these extra
/// headers; the HTTP status and body when refused.
pub fn open_unix(
    path: &std::path::Path,
    url: &str,
    headers: &[(&str, &str)],
) -> Result<tungstenite::WebSocket<std::os::unix::net::UnixStream>, (u16, Value)> {
    let stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    handshake(url, headers, stream)
}

/// The WebSocket handshake for `url` with these extra headers over a
/// connected `stream`; the HTTP status and body when the door refuses.
fn handshake<S: std::io::Read + std::io::Write>(
    url: &str,
    headers: &[(&str, &str)],
    stream: S,
) -> Result<tungstenite::WebSocket<S>, (u16, Value)> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        let name: tungstenite::http::HeaderName = name.parse().unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    match tungstenite::client(request, stream) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
            let body = response.body().clone().unwrap_or_default();
            Err((
                response.status().as_u16(),
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        }
        Err(e) => panic!("handshake failed: {e}"),
    }
}
