//! Where a pod's files live, per `cli.md`'s table.

use std::path::PathBuf;

use anyhow::Context as _;

use super::args::Global;
use crate::client::{Endpoint, Remote};

#[derive(Debug, Clone)]
pub struct Paths {
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    /// The directory sockets of all pods live in (for `pod list`).
    pub socket_dir: PathBuf,
    /// `socket` is in `socket_dir` (no `--socket`): a directory whose name
    /// anyone can create first, so it must be the user's own.
    pub socket_in_default_dir: bool,
    pub workspace: PathBuf,
    /// Where client commands reach the pod: its socket, or `--url`.
    pub endpoint: Endpoint,
}

impl Paths {
    pub fn resolve(global: &Global) -> anyhow::Result<Paths> {
        let data_dir = match &global.data_dir {
            Some(dir) => dir.clone(),
            None => dirs::data_dir()
                .context("cannot find a data directory: set --data-dir, POD_DATA_DIR or HOME")?
                .join("pod"),
        };
        let socket_dir = match dirs::runtime_dir() {
            Some(dir) => dir.join("pod"),
            None => PathBuf::from(format!("/tmp/pod-{}", rustix::process::getuid().as_raw())),
        };
        // A relative `--socket` (`p.sock`) is made absolute here, once: the
        // pod records its socket for `pod list`, which other directories
        // read, and a bare file name has no directory to create.
        let socket = match &global.socket {
            Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            None => socket_dir.join(format!("{}.sock", global.name)),
        };
        let workspace = match &global.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let endpoint = match &global.url {
            Some(url) => Endpoint::Remote(remote(url, global)?),
            None => Endpoint::Socket(socket.clone()),
        };
        Ok(Paths {
            data_dir,
            endpoint,
            socket_in_default_dir: global.socket.is_none(),
            socket,
            socket_dir,
            workspace,
        })
    }

    /// Whether client commands go over the network (`--url`).
    pub fn is_remote(&self) -> bool {
        matches!(self.endpoint, Endpoint::Remote(_))
    }

    /// For clients: refuses the default socket directory when it is not the
    /// user's own or others can write to it (someone may have created it to
    /// run a server of their own there). A missing directory is fine: there
    /// is no pod to talk to.
    pub fn check_socket_dir(&self) -> anyhow::Result<()> {
        let dir = &self.socket_dir;
        if !dir.exists() || (!self.socket_in_default_dir && !self.socket.starts_with(dir)) {
            return Ok(());
        }
        crate::private::check_own_dir(dir)
    }
}

/// `--url` with its token: from `--token-file`, else `POD_TOKEN` — never a
/// flag's value, which every process on the machine can read in argv.
fn remote(url: &str, global: &Global) -> anyhow::Result<Remote> {
    let url = crate::client::websocket_url(url).map_err(anyhow::Error::msg)?;
    let token = match &global.token_file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the token file {}", file.display()))?,
        None => std::env::var("POD_TOKEN").map_err(|_| {
            anyhow::anyhow!(
                "--url needs a device token: put it in a file and give --token-file FILE, or set \
                 POD_TOKEN (make one with `pod token create` on the pod's machine)"
            )
        })?,
    };
    let token = token.trim().to_owned();
    anyhow::ensure!(!token.is_empty(), "the device token for --url is empty");
    Ok(Remote {
        url,
        token,
        ca_cert: global.ca_cert.clone(),
    })
}
