//! Where a pod's files live, per `cli.md`'s table.

use std::path::PathBuf;

use anyhow::Context as _;

use super::args::Global;

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
        let socket = match &global.socket {
            Some(path) => path.clone(),
            None => socket_dir.join(format!("{}.sock", global.name)),
        };
        let workspace = match &global.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        Ok(Paths {
            data_dir,
            socket_in_default_dir: global.socket.is_none(),
            socket,
            socket_dir,
            workspace,
        })
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
