//! Where a pod's files live, per `cli.md`'s table.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::args::Global;
use crate::client::{Endpoint, Remote};

#[derive(Debug, Clone)]
pub struct Paths {
    /// The pod's name: `--name`, else [`derived_name`] of the workspace.
    pub name: String,
    /// `--name` (or `POD_NAME`) was given: hints must repeat it.
    pub name_given: bool,
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
    /// `--data-dir` (or `POD_DATA_DIR`) names another directory than the
    /// default: hints to commands that read it must repeat it.
    pub data_dir_given: bool,
    /// `--token-file`, repeated with `--url` in hints.
    pub token_file: Option<PathBuf>,
}

/// Subcommands that read the data directory themselves (the others reach
/// the pod through its socket or `--url`, wherever its files are).
const READS_DATA_DIR: [&str; 3] = ["log", "sessions", "list"];

impl Paths {
    pub fn resolve(global: &Global) -> anyhow::Result<Paths> {
        let data_dir = match &global.data_dir {
            Some(dir) => dir.clone(),
            None => dirs::data_dir()
                .context("cannot find a data directory: set --data-dir, POD_DATA_DIR or HOME")?
                .join("pod"),
        };
        // Never a directory the sandbox lets tools write (`/tmp`): a tool
        // could otherwise put a socket of its own where clients look.
        let socket_dir = match dirs::runtime_dir() {
            Some(dir) => dir.join("pod"),
            None => dirs::state_dir()
                .context(
                    "cannot find a socket directory: set XDG_RUNTIME_DIR or HOME, or give --socket",
                )?
                .join("pod")
                .join("run"),
        };
        let workspace = match &global.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        // The real path names the project, however it was reached; a
        // directory that does not exist is left as given, for the pod to
        // refuse with its own message.
        let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
        let name = match &global.name {
            Some(name) => name.clone(),
            None => derived_name(&workspace),
        };
        // A relative `--socket` (`p.sock`) is made absolute here, once: the
        // pod records its socket for `pod list`, which other directories
        // read, and a bare file name has no directory to create.
        let socket = match &global.socket {
            Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            None => socket_dir.join(format!("{name}.sock")),
        };
        let endpoint = match &global.url {
            Some(url) => Endpoint::Remote(remote(url, global)?),
            None => Endpoint::Socket(socket.clone()),
        };
        let default_data_dir = dirs::data_dir().map(|d| d.join("pod"));
        Ok(Paths {
            data_dir_given: default_data_dir.as_ref() != Some(&data_dir),
            token_file: global.token_file.clone(),
            name_given: global.name.is_some(),
            name,
            data_dir,
            endpoint,
            socket_in_default_dir: global.socket.is_none(),
            socket,
            socket_dir,
            workspace,
        })
    }

    /// The command line of a hint, `pod FLAGS REST`, with the flags that
    /// chose this pod (`--url`, `--socket`, `--name`, and `--data-dir` for a
    /// command that reads it) when they are not the defaults: a hint run as
    /// printed must reach the pod the user was talking to, not the
    /// workspace's default one (a child's `pod approve` would otherwise go
    /// to its parent's workspace pod, or to none). `rest` is the subcommand
    /// and its arguments; empty for plain `pod`.
    pub fn command(&self, rest: &str) -> String {
        let name = self.name_given.then_some(self.name.as_str());
        self.command_for(name, rest)
    }

    /// [`Paths::command`] for the pod named `name` (a child, a private
    /// pod), reached the way this one is.
    pub fn command_for(&self, name: Option<&str>, rest: &str) -> String {
        let mut flags: Vec<(&str, String)> = Vec::new();
        let sub = rest.split_whitespace().next().unwrap_or_default();
        if self.data_dir_given && READS_DATA_DIR.contains(&sub) {
            flags.push(("--data-dir", self.data_dir.display().to_string()));
        }
        match &self.endpoint {
            Endpoint::Remote(remote) => {
                flags.push(("--url", remote.url.clone()));
                if let Some(file) = &self.token_file {
                    flags.push(("--token-file", file.display().to_string()));
                }
            }
            Endpoint::Socket(socket) if !self.socket_in_default_dir => {
                flags.push(("--socket", socket.display().to_string()));
            }
            Endpoint::Socket(_) => {}
        }
        if let Some(name) = name {
            flags.push(("--name", name.to_owned()));
        }
        let mut line = String::from("pod");
        for (flag, value) in flags {
            line.push_str(&format!(" {flag} {}", shell_word(&value)));
        }
        if !rest.is_empty() {
            line.push(' ');
            line.push_str(rest);
        }
        line
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

/// `word` as a shell reads it back: as is when it holds only characters no
/// shell treats specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:@+,%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The pod name of a workspace (`cli.md`, "Where things live"): its last
/// component made safe for a file name, then 6 hex digits of the SHA-256 of
/// the whole path, so that two projects called `app` get two pods.
pub fn derived_name(workspace: &Path) -> String {
    use sha2::Digest as _;
    let bytes = workspace.as_os_str().as_bytes();
    let last = workspace
        .file_name()
        .map(|n| n.as_bytes())
        .unwrap_or_default();
    let mut base = String::new();
    for chunk in last.utf8_chunks() {
        for c in chunk.valid().chars() {
            let fine = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            base.push(if fine { c } else { '_' });
        }
        base.extend(std::iter::repeat_n('_', chunk.invalid().len()));
    }
    base.truncate(40);
    if base.is_empty() || base.starts_with(['-', '.']) {
        base.insert(0, '_');
    }
    let digest = sha2::Sha256::digest(bytes);
    let hex: String = digest[..3].iter().map(|b| format!("{b:02x}")).collect();
    format!("{base}-{hex}")
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn a_workspace_names_its_pod_by_its_last_component_and_a_hash() {
        let name = derived_name(Path::new("/home/me/calc"));
        let (base, hash) = name.rsplit_once('-').unwrap();
        assert_eq!(base, "calc");
        assert_eq!(hash.len(), 6);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
        assert_ne!(
            name,
            derived_name(Path::new("/srv/calc")),
            "same base, other path"
        );
        let sha = |p: &str| {
            use sha2::Digest as _;
            let d = sha2::Sha256::digest(p.as_bytes());
            format!("{:02x}{:02x}{:02x}", d[0], d[1], d[2])
        };
        assert_eq!(name, format!("calc-{}", sha("/home/me/calc")));
        assert_eq!(derived_name(Path::new("/")), format!("_-{}", sha("/")));
        assert_eq!(
            derived_name(Path::new("/w/my project ü")),
            format!("my_project__-{}", sha("/w/my project ü"))
        );
        assert!(derived_name(Path::new("/w/.hidden")).starts_with("_.hidden-"));
        assert!(derived_name(Path::new("/w/-x")).starts_with("_-x-"));
        let long = "a".repeat(60);
        assert!(
            derived_name(&Path::new("/w").join(&long)).starts_with(&format!("{}-", "a".repeat(40)))
        );
        let odd = Path::new("/w").join(OsStr::from_bytes(b"a\xff\xfeb"));
        assert!(
            derived_name(&odd).starts_with("a__b-"),
            "one _ per byte that is not UTF-8"
        );
    }
}
