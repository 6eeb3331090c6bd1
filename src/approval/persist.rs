//! `scope: "always"`: an allow rule appended to the config file, so every
//! later session of this user (and, for path rules, of this workspace)
//! starts with it.
//!
//! The file is the user's: it is edited with a format-preserving parser
//! (`toml_edit`), so its comments, order and layout stay as they were, and
//! the rule goes in as a TOML string (never spliced in as text, so no rule
//! can close the string and add settings). Writers are serialised by an
//! exclusive lock on a lock file beside the file (the file itself is
//! replaced on every write, so it cannot carry the lock), the new text is
//! written to a temp file, synced and renamed over the file — readers see
//! the old file or the new one, never half of one — and a symlinked config
//! (dotfiles kept in a repository) is edited where it points, keeping the
//! link.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Table, Value};

/// How many symlinks are followed before giving up (as the kernel does).
const MAX_LINKS: usize = 40;

/// Appends `rule` to `[permissions] allow` of the config file at `config`
/// — `write:`/`read:` rules to `[workspaces."<workspace>".permissions]
/// allow`, since a path means one project. A rule already there is not
/// added twice. `Err` says why the file was left as it was.
pub fn append_allow(config: &Path, workspace: &Path, rule: &str) -> Result<(), String> {
    let target = follow_links(config);
    let dir = match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{} does not name a file", target.display()))?
        .to_owned();
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_path = dir.join(format!(".{name}.lock"));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| format!("cannot open the lock file {}: {e}", lock_path.display()))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let (text, mode) = match fs::read_to_string(&target) {
        Ok(text) => {
            let mode = fs::metadata(&target).map(|m| m.permissions().mode() & 0o7777);
            (text, mode.unwrap_or(0o600))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), 0o600),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e| format!("it is not valid TOML, so it was left alone: {e}"))?;
    let workspace_key = workspace
        .to_str()
        .ok_or_else(|| format!("the workspace path {} is not UTF-8", workspace.display()))?;
    let is_path_rule = rule.starts_with("write:") || rule.starts_with("read:");
    let mut table = doc.as_table_mut();
    if is_path_rule {
        table = child(table, "workspaces", true)?;
        table = child(table, workspace_key, true)?;
    }
    let permissions = child(table, "permissions", false)?;
    if !add_to_list(permissions, rule)? {
        return Ok(());
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_synced(&tmp, doc.to_string().as_bytes(), mode)
        .and_then(|()| fs::rename(&tmp, &target))
        .and_then(|()| fs::File::open(&dir)?.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(format!("cannot write it: {e}"));
    }
    Ok(())
}

/// The file `path` finally names, following symlinks (a dangling one too:
/// the file is created where it points).
fn follow_links(path: &Path) -> PathBuf {
    let mut current = path.to_owned();
    for _ in 0..MAX_LINKS {
        let Ok(target) = fs::read_link(&current) else {
            break;
        };
        current = match current.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        };
    }
    current
}

/// The table `key` of `parent`, created when missing (`implicit`: without
/// a header of its own, as `[workspaces."/p".permissions]` needs none for
/// `[workspaces]`).
fn child<'a>(parent: &'a mut Table, key: &str, implicit: bool) -> Result<&'a mut Table, String> {
    if !parent.contains_key(key) {
        let mut table = Table::new();
        table.set_implicit(implicit);
        parent.insert(key, Item::Table(table));
    }
    parent
        .get_mut(key)
        .and_then(Item::as_table_mut)
        .ok_or_else(|| format!("`{key}` in it is not a table of its own, so it was left alone"))
}

/// Adds `rule` to the table's `allow` array; false when it is there already.
fn add_to_list(table: &mut Table, rule: &str) -> Result<bool, String> {
    if !table.contains_key("allow") {
        table.insert("allow", Item::Value(Value::Array(Array::new())));
    }
    let list = table
        .get_mut("allow")
        .and_then(Item::as_array_mut)
        .ok_or_else(|| "its `allow` is not a list, so it was left alone".to_owned())?;
    if list.iter().any(|v| v.as_str() == Some(rule)) {
        return Ok(false);
    }
    // A list written one rule a line gets the new rule on a line of its
    // own, with the last one's indent; a comment after the last rule stays
    // on that rule's line.
    let indent = list
        .iter()
        .last()
        .and_then(|last| last.decor().prefix())
        .and_then(|p| p.as_str())
        .filter(|p| p.contains('\n'))
        .map(|p| p[p.rfind('\n').unwrap_or(0)..].to_owned());
    match indent {
        Some(indent) => {
            let mut value = Value::from(rule);
            let trailing = list.trailing().as_str().unwrap_or("").to_owned();
            let kept = trailing.rfind('\n').map_or("", |end| &trailing[..end]);
            value.decor_mut().set_prefix(format!("{kept}{indent}"));
            if trailing.contains('\n') {
                list.set_trailing("\n");
            }
            list.push_formatted(value);
        }
        None => list.push(rule),
    }
    Ok(true)
}

fn write_synced(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMENTED: &str = "# my pod settings\napproval = \"ask\" # ask first\n\n[permissions]\n# reviewed rules\nallow = [\n    \"bash:ls *\", # listing\n]\ndeny = [\"bash:rm *\"]\n";

    #[test]
    fn a_rule_is_appended_keeping_comments_and_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, COMMENTED).unwrap();
        append_allow(&path, Path::new("/w"), "bash:git status *").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# my pod settings\napproval = \"ask\" # ask first\n"),
            "{text}"
        );
        assert!(text.contains("# reviewed rules\n"), "{text}");
        assert!(
            text.contains("    \"bash:ls *\", # listing\n    \"bash:git status *\",\n]"),
            "{text}"
        );
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(
            parsed["permissions"]["allow"],
            toml::Value::Array(vec!["bash:ls *".into(), "bash:git status *".into()])
        );
        // Twice is once.
        append_allow(&path, Path::new("/w"), "bash:git status *").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn path_rules_go_under_the_workspace_and_a_missing_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod").join("config.toml");
        append_allow(
            &path,
            Path::new("/home/me/my \"proj\""),
            "write:src/main.rs",
        )
        .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(
            parsed["workspaces"]["/home/me/my \"proj\""]["permissions"]["allow"],
            toml::Value::Array(vec!["write:src/main.rs".into()]),
            "{text}"
        );
        assert!(!parsed.contains_key("permissions"), "{text}");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_rule_that_looks_like_toml_stays_a_string() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let sneaky = "bash:x\"]\napproval = \"auto\"\n#";
        append_allow(&path, Path::new("/w"), sneaky).unwrap();
        let parsed: toml::Table = fs::read_to_string(&path).unwrap().parse().unwrap();
        assert!(!parsed.contains_key("approval"));
        assert_eq!(parsed["permissions"]["allow"][0].as_str(), Some(sneaky));
    }

    #[test]
    fn a_symlinked_config_is_edited_where_it_points() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles").join("pod.toml");
        fs::create_dir_all(real.parent().unwrap()).unwrap();
        fs::write(&real, "# kept\n").unwrap();
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink("dotfiles/pod.toml", &link).unwrap();
        append_allow(&link, Path::new("/w"), "bash:cargo test *").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let text = fs::read_to_string(&real).unwrap();
        assert!(
            text.contains("# kept\n") && text.contains("bash:cargo test *"),
            "{text}"
        );
    }

    #[test]
    fn a_file_it_cannot_edit_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        for text in [
            "not = [toml",
            "permissions = 3\n",
            "[permissions]\nallow = \"x\"\n",
        ] {
            fs::write(&path, text).unwrap();
            assert!(
                append_allow(&path, Path::new("/w"), "bash:ls *").is_err(),
                "{text}"
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
        }
    }

    #[test]
    fn concurrent_writers_lose_no_rule() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    append_allow(&path, Path::new("/w"), &format!("bash:tool{i} *")).unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let parsed: toml::Table = fs::read_to_string(&path).unwrap().parse().unwrap();
        assert_eq!(parsed["permissions"]["allow"].as_array().unwrap().len(), 8);
    }
}
