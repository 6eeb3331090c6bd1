//! Where the pod listens on the network (`--listen`), as plain data: the
//! greeting's `listen`, `pod serve`'s line and the pairing links come from
//! it. The pod owns the type and the network server (the `remote` module) fills
//! it in once bound, so the pod never names the server: `remote` sits above
//! `pod` in the layer table (`tests/module_graph.rs`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::protocol::ListenInfo;

/// Where `--listen` serves.
#[derive(Debug, Clone)]
pub enum Door {
    /// A TCP address, as bound.
    Tcp(SocketAddr),
    /// `unix:PATH`: a Unix socket (mode 0600) for a reverse proxy on this
    /// machine — a door the pod's tools cannot reach while the sandbox
    /// refuses them Unix sockets, where a proxy's TCP port is one they can.
    Unix(PathBuf),
}

/// The prefix of `--listen` that names a Unix socket.
const UNIX_PREFIX: &str = "unix:";

/// The socket path of `--listen unix:PATH`, `None` for a TCP address.
pub fn unix_path(listen: &str) -> Option<&Path> {
    listen.strip_prefix(UNIX_PREFIX).map(Path::new)
}

/// Where the pod listens, for the greeting and for pairing links.
#[derive(Debug, Clone)]
pub struct Listening {
    pub door: Door,
    pub tls: bool,
    /// Where a pairing link points unless told otherwise. Over TCP, the
    /// host: the certificate's first DNS name, else this machine's name
    /// when listening on a wildcard address, else the listen address.
    /// Behind a Unix socket, the proxy's origin: the first
    /// `--allow-origin`, if any.
    pub link_host: String,
}

impl Listening {
    pub fn info(&self) -> ListenInfo {
        ListenInfo {
            address: match &self.door {
                Door::Tcp(address) => address.to_string(),
                Door::Unix(path) => format!("{UNIX_PREFIX}{}", path.display()),
            },
            tls: self.tls,
        }
    }

    /// What `pod serve` prints once it listens.
    pub fn describe(&self) -> String {
        match &self.door {
            Door::Tcp(address) => {
                let scheme = if self.tls { "https" } else { "http" };
                format!("{scheme}://{address} (WebSocket /v1/ws)")
            }
            Door::Unix(path) => format!(
                "{UNIX_PREFIX}{} (WebSocket /v1/ws), for a reverse proxy on this machine",
                path.display()
            ),
        }
    }

    /// The web client's URL with a one-time pairing code in its fragment.
    /// Behind a Unix socket the link is the proxy's: `https://HOST/` for
    /// `host`, else the proxy's origin; with neither, why there is none.
    pub fn pairing_url(&self, host: Option<&str>, code: &str) -> Result<String, String> {
        let bracketed = |host: &str| match host.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => format!("[{v6}]"),
            Err(_) => host.to_owned(),
        };
        match &self.door {
            Door::Tcp(address) => {
                let scheme = if self.tls { "https" } else { "http" };
                let host = bracketed(host.unwrap_or(&self.link_host));
                Ok(format!("{scheme}://{host}:{}/#pair={code}", address.port()))
            }
            Door::Unix(_) => match (host, self.link_host.as_str()) {
                (Some(host), _) => Ok(format!("https://{}/#pair={code}", bracketed(host))),
                (None, "") => Err("this pod listens on a Unix socket for a reverse proxy, so                                    it does not know the address a browser uses: give it as                                    `pod url --host NAME`, or start the pod with                                    --allow-origin https://NAME"
                    .into()),
                (None, origin) => Ok(format!("{origin}/#pair={code}")),
            },
        }
    }
}
