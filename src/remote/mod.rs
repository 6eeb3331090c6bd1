//! `pod serve --listen`: the protocol over an authenticated WebSocket, and
//! the web client's page.
//!
//! The HTTP side (actix-web, rustls) checks `Host`, `Origin` and the device
//! token before any upgrade ([`checks`], [`tokens`]); each accepted
//! WebSocket becomes an ordinary pod connection whose frames its response
//! body takes from the connection's feed ([`bridge`]), so the pod's one
//! `Connection` type, outbox and ordering argument serve remote clients
//! unchanged. Without `--listen` none of this runs and no port is opened.

pub mod bridge;
mod checks;
mod inbound;
pub mod peer;
mod server;
pub mod tokens;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::pod::Doors;
use crate::protocol::ListenInfo;
pub use tokens::Tokens;

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

/// Where the pod listens, for the greeting and for pairing links.
#[derive(Debug, Clone)]
pub struct Listening {
    pub address: SocketAddr,
    pub tls: bool,
    /// The host a pairing link names unless told otherwise: the
    /// certificate's first DNS name, else this machine's name when
    /// listening on a wildcard address, else the listen address.
    pub link_host: String,
}

impl Listening {
    pub fn info(&self) -> ListenInfo {
        ListenInfo {
            address: self.address.to_string(),
            tls: self.tls,
        }
    }

    /// The web client's URL with a one-time pairing code in its fragment.
    pub fn pairing_url(&self, host: Option<&str>, code: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let host = host.unwrap_or(&self.link_host);
        let host = match host.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => format!("[{v6}]"),
            Err(_) => host.to_owned(),
        };
        format!("{scheme}://{host}:{}/#pair={code}", self.address.port())
    }
}

/// Refuses plaintext on an address that is not loopback, unless
/// `--allow-plaintext` says the network is already encrypted (a VPN).
pub fn check_plaintext(listen: &str, tls: bool, allow_plaintext: bool) -> Result<(), String> {
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
             --tls-cert and --tls-key, listen on 127.0.0.1 and forward the port over SSH, or \
             add --allow-plaintext if the network is already encrypted (a VPN); see \
             docs/remote.md"
        )),
    }
}

/// Binds `--listen` and starts the HTTP server on the running actix system;
/// each authenticated WebSocket is handed to the pod through `accept`.
pub fn start(
    config: RemoteConfig,
    tokens: Arc<Tokens>,
    doors: Doors,
    pod: String,
    max_frame_bytes: usize,
    blobs: Option<crate::blobs::Blobs>,
) -> anyhow::Result<Listening> {
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
        address,
        tls: tls.is_some(),
        link_host,
    };
    server::start(
        listener,
        tls,
        server::State {
            tokens,
            checks: Arc::new(checks),
            doors,
            pod,
            active: Arc::default(),
            active_read: Arc::default(),
            max_clients: config.max_remote_clients,
            max_frame_bytes,
            blobs,
        },
    )?;
    Ok(listening)
}
