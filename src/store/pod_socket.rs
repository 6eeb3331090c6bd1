//! `<data-dir>/pods/<name>.socket`: the socket path a pod of that name
//! listens on, written when it starts. `pod list` reads these to find pods
//! started with `--socket` elsewhere than the default socket directory.
//!
//! Only a hint: a pod killed with SIGKILL leaves its record behind, so a
//! reader checks that something still listens there.

use std::io::Write;
use std::path::{Path, PathBuf};

const EXTENSION: &str = "socket";

pub fn path(pods_dir: &Path, name: &str) -> PathBuf {
    pods_dir.join(format!("{name}.{EXTENSION}"))
}

/// Records `socket` (made absolute) as the socket of pod `name`, replacing
/// the file atomically so a reader never sees half a path. The caller holds
/// the pod's lock, so no one else writes this record meanwhile; the file is
/// private (`0600`) like everything in the data directory.
pub fn record(pods_dir: &Path, name: &str, socket: &Path) -> std::io::Result<()> {
    let socket = std::path::absolute(socket)?;
    let target = path(pods_dir, name);
    let tmp = target.with_extension("socket.tmp");
    let mut file = crate::private::file_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    file.write_all(socket.as_os_str().as_encoded_bytes())?;
    file.write_all(b"\n")?;
    std::fs::rename(&tmp, &target)
}

/// Every recorded socket, as `(pod name, socket path)`, sorted by name.
pub fn recorded(pods_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(pods_dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == EXTENSION))
        .filter_map(|p| {
            let name = p.file_stem()?.to_str()?.to_owned();
            let text = std::fs::read_to_string(&p).ok()?;
            let socket = text.trim_end_matches('\n');
            (!socket.is_empty()).then(|| (name, PathBuf::from(socket)))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_back_absolute_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), "a", Path::new("/run/a.sock")).unwrap();
        record(dir.path(), "b", Path::new("rel/b.sock")).unwrap();
        record(dir.path(), "a", Path::new("/run/a2.sock")).unwrap();
        std::fs::write(dir.path().join("a.json"), "{}").unwrap();
        let found = recorded(dir.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0], ("a".into(), PathBuf::from("/run/a2.sock")));
        assert!(found[1].1.is_absolute() && found[1].1.ends_with("rel/b.sock"));
    }
}
