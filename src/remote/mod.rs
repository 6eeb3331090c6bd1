//! `pod serve --listen`: the protocol over an authenticated WebSocket, and
//! the web client's page.
//!
//! The HTTP side (actix-web, rustls) checks `Host`, `Origin` and the device
//! token before any upgrade ([`checks`], the store's device tokens); each accepted
//! WebSocket becomes an ordinary pod connection whose frames its response
//! body takes from the connection's feed ([`bridge`]), so the pod's one
//! `Connection` type, outbox and ordering argument serve remote clients
//! unchanged. Without `--listen` none of this runs and no port is opened.

pub mod bridge;
mod checks;
mod inbound;
pub mod peer;
mod server;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

pub use crate::pod::listening::{unix_path, Door, Listening};
use crate::pod::ListenerParts;

/// `pod serve`'s network flags.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// `--listen ADDR`.
    pub listen: String,
    /// `--tls-cert`, `--tls-key` (PEM).
    pub tls: Option<(PathBuf, PathBuf)>,
    pub allow_hosts: Vec<String>,
    pub allow_origins: Vec<String>,
    pub max_remote_clients: usize,
}

/// Refuses plaintext on an address that is not loopback, unless
/// `--allow-plaintext` says the network is already encrypted (a VPN); and
/// for `unix:PATH`, TLS (the proxy terminates it) and a path where the
/// pod's tools may write (`tool_writable`: the workspace and the temp
/// directories), where a tool could put a socket of its own in the door's
/// place and receive what the proxy forwards, tokens included.
pub fn check_listen(
    listen: &str,
    tls: bool,
    allow_plaintext: bool,
    tool_writable: &[PathBuf],
) -> Result<(), String> {
    if let Some(path) = unix_path(listen) {
        if path.as_os_str().is_empty() {
            return Err(format!(
                "--listen {listen}: name the socket's path after `unix:` (e.g. \
                 unix:$XDG_RUNTIME_DIR/pod/web.sock)"
            ));
        }
        if tls {
            return Err(format!(
                "--listen {listen} serves a reverse proxy on this machine, which terminates \
                 TLS itself: leave out --tls-cert and --tls-key"
            ));
        }
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir).map_err(|e| {
            format!(
                "--listen {listen}: cannot use the directory {}: {e}",
                dir.display()
            )
        })?;
        if let Some(writable) = tool_writable.iter().find(|w| dir.starts_with(w)) {
            return Err(format!(
                "--listen {listen} is under {}, where the pod's tools may write: one could put \
                 a socket of its own in the door's place and receive what the proxy forwards, \
                 device tokens included. Put it where only you write, e.g. \
                 unix:$XDG_RUNTIME_DIR/pod/web.sock",
                writable.display()
            ));
        }
        return Ok(());
    }
    if tls || allow_plaintext {
        return Ok(());
    }
    let addresses: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen}: not an address to listen on ({e})"))?
        .collect();
    match addresses.iter().find(|a| !a.ip().is_loopback()) {
        None => Ok(()),
        Some(address) => Err(format!(
            "--listen {listen} ({address}) is reachable from other machines, and without TLS \
             anyone on the network could read the conversation and the device tokens. Give \
             --tls-cert and --tls-key, listen on 127.0.0.1 and forward the port over SSH, \
             listen on unix:PATH behind a reverse proxy, or add --allow-plaintext if the \
             network is already encrypted (a VPN); see docs/remote.md"
        )),
    }
}

/// Binds `--listen` and starts the HTTP server on the running actix system;
/// each authenticated WebSocket is handed to the pod it names through its
/// door in `doors` (the top pod `pod`, or a child by `?agent=`).
pub fn start(config: RemoteConfig, parts: ListenerParts) -> anyhow::Result<Listening> {
    if let Some(path) = unix_path(&config.listen) {
        let listener = bind_unix(path)?;
        // No address to name: a proxy forwards the browser's `Host`, which
        // must be a loopback name, this machine's or an `--allow-host`.
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let checks = checks::Checks::new(
            loopback,
            false,
            config.allow_hosts.clone(),
            config.allow_origins.clone(),
        );
        let listening = Listening {
            door: Door::Unix(path.to_path_buf()),
            tls: false,
            link_host: config
                .allow_origins
                .first()
                .map(|o| o.trim_end_matches('/').to_owned())
                .unwrap_or_default(),
        };
        server::start(
            server::Listener::Unix(listener),
            None,
            state(&config, parts, checks),
        )?;
        return Ok(listening);
    }
    let listener = std::net::TcpListener::bind(config.listen.as_str())
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    listener.set_nonblocking(true)?;
    let address = listener.local_addr()?;
    let (tls, cert_names) = match &config.tls {
        Some((cert, key)) => {
            let (tls, names) = server::tls_config(cert, key)?;
            (Some(tls), names)
        }
        None => (None, Vec::new()),
    };
    let link_host = match cert_names.first() {
        Some(name) => name.clone(),
        None if address.ip().is_unspecified() => checks::machine_names()
            .into_iter()
            .next()
            .unwrap_or_else(|| "localhost".into()),
        None => address.ip().to_string(),
    };
    let mut names = cert_names;
    names.extend(config.allow_hosts.iter().cloned());
    let checks = checks::Checks::new(address, tls.is_some(), names, config.allow_origins.clone());
    let listening = Listening {
        door: Door::Tcp(address),
        tls: tls.is_some(),
        link_host,
    };
    server::start(
        server::Listener::Tcp(listener),
        tls,
        state(&config, parts, checks),
    )?;
    Ok(listening)
}

/// The server's state, whichever door it listens on.
fn state(config: &RemoteConfig, parts: ListenerParts, checks: checks::Checks) -> server::State {
    server::State {
        tokens: parts.tokens,
        checks: Arc::new(checks),
        doors: parts.doors,
        pod: parts.pod,
        active: Arc::default(),
        active_read: Arc::default(),
        max_clients: config.max_remote_clients,
        max_frame_bytes: parts.max_frame_bytes,
        blobs: parts.blobs,
    }
}

/// Binds the Unix socket of `--listen unix:PATH`, mode 0600 (only this
/// user, and so the proxy only when it runs as this user). A socket left by
/// a pod that died is replaced; a live one, or any other file, is not.
fn bind_unix(path: &Path) -> anyhow::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    use std::os::unix::net::{UnixListener, UnixStream};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        anyhow::ensure!(
            meta.file_type().is_socket(),
            "--listen unix:{}: that path is a file, not a socket; choose another path",
            path.display()
        );
        anyhow::ensure!(
            UnixStream::connect(path).is_err(),
            "--listen unix:{}: another process listens there (another pod?); stop it or \
             choose another path",
            path.display()
        );
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot listen on unix:{}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot restrict unix:{}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pairing_link_behind_a_unix_socket_is_the_proxys() {
        let door = |origin: &str| Listening {
            door: Door::Unix(PathBuf::from("/run/user/1000/pod/web.sock")),
            tls: false,
            link_host: origin.into(),
        };
        assert_eq!(
            door("https://pod.example.org").pairing_url(None, "c0de"),
            Ok("https://pod.example.org/#pair=c0de".into())
        );
        assert_eq!(
            door("").pairing_url(Some("devbox"), "c0de"),
            Ok("https://devbox/#pair=c0de".into())
        );
        let refused = door("").pairing_url(None, "c0de").unwrap_err();
        assert!(refused.contains("pod url --host NAME"), "{refused}");
        assert_eq!(door("").info().address, "unix:/run/user/1000/pod/web.sock");
    }
}
