//! Project instructions: the workspace's `AGENTS.md` (else `CLAUDE.md`),
//! given to the model as a `hook_injected_items` entry (source
//! `project_instructions`) so the log shows exactly what the model was told.
//!
//! The entry is committed right after a turn's `user_input` when the session
//! has none yet or the file's text differs from the session's latest one (a
//! deleted file commits a short note saying so), and after compaction as the
//! new session's third entry. Reading the file is blocking I/O, so it runs
//! on the blocking pool, never on the thread that fans frames out.

use std::io::Read;

use crate::context::Conversation;
use crate::protocol::{InjectedItem, LogEntry};
use crate::workspace::Workspace;

pub const SOURCE: &str = "project_instructions";

/// The files read, in order of preference.
const FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Longest instructions file inlined; the rest is cut with a note, since
/// the text is re-sent on every model call.
const MAX_BYTES: u64 = 64 * 1024;

/// What the workspace says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instructions {
    File { name: &'static str, text: String },
    None,
}

impl Instructions {
    /// The entry's text: the file's name on its first line, then the file.
    fn entry_text(name: &str, text: &str) -> String {
        format!("{name}\n{text}")
    }

    /// The entry that gives these instructions, or `None` without a file.
    pub fn into_entry(self) -> Option<LogEntry> {
        match self {
            Instructions::File { name, text } => Some(entry(Self::entry_text(name, &text))),
            Instructions::None => None,
        }
    }

    /// The entry to commit after a turn's `user_input`, if the session's
    /// latest instructions are not these.
    pub fn update_for(self, conversation: &Conversation) -> Option<LogEntry> {
        let latest = conversation.latest_injected(SOURCE);
        match (self, latest) {
            (Instructions::File { name, text }, latest) => {
                let wanted = Self::entry_text(name, &text);
                (latest != Some(wanted.as_str())).then(|| entry(wanted))
            }
            (Instructions::None, Some(latest)) if !latest.ends_with(DELETED) => {
                let name = latest.lines().next().unwrap_or("AGENTS.md");
                Some(entry(format!("{name}\n{DELETED}")))
            }
            (Instructions::None, _) => None,
        }
    }
}

/// The note committed when the instructions file goes away.
const DELETED: &str = "[the file was deleted: its earlier instructions no longer apply]";

fn entry(text: String) -> LogEntry {
    LogEntry::HookInjectedItems {
        items: vec![InjectedItem {
            source: SOURCE.into(),
            text,
        }],
    }
}

/// Reads the workspace's instructions file on the blocking pool.
pub async fn current(workspace: &Workspace) -> Instructions {
    let workspace = workspace.clone();
    tokio::task::spawn_blocking(move || read(&workspace))
        .await
        .unwrap_or(Instructions::None)
}

fn read(workspace: &Workspace) -> Instructions {
    for name in FILES {
        let Ok(path) = workspace.resolve(name) else {
            continue;
        };
        // Only a regular file: a FIFO named AGENTS.md must not block us.
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        let mut bytes = Vec::new();
        let read =
            std::fs::File::open(&path).and_then(|f| f.take(MAX_BYTES + 1).read_to_end(&mut bytes));
        if let Err(e) = read {
            tracing::warn!("cannot read {}: {e}", path.display());
            continue;
        }
        let cut = bytes.len() as u64 > MAX_BYTES;
        bytes.truncate(MAX_BYTES as usize);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if cut {
            text.push_str(&format!("\n[cut: {name} is longer than {MAX_BYTES} bytes]"));
        }
        return Instructions::File { name, text };
    }
    Instructions::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn conversation(entries: Vec<LogEntry>) -> Conversation {
        Conversation::new(Uuid::new_v4(), entries)
    }

    #[test]
    fn committed_once_then_only_when_the_text_changes_or_the_file_goes() {
        let file = |text: &str| Instructions::File {
            name: "AGENTS.md",
            text: text.into(),
        };
        let mut c = conversation(Vec::new());
        let first = file("use tabs").update_for(&c).expect("first time");
        c.push(first);
        assert_eq!(file("use tabs").update_for(&c), None);
        let changed = file("use spaces").update_for(&c).expect("changed");
        c.push(changed);
        let gone = Instructions::None.update_for(&c).expect("deleted");
        c.push(gone);
        assert_eq!(Instructions::None.update_for(&c), None);
        assert!(file("use spaces").update_for(&c).is_some());
    }

    #[test]
    fn agents_md_is_preferred_to_claude_md() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert_eq!(read(&ws), Instructions::None);
        std::fs::write(dir.path().join("CLAUDE.md"), "claude").unwrap();
        assert!(matches!(
            read(&ws),
            Instructions::File {
                name: "CLAUDE.md",
                ..
            }
        ));
        std::fs::write(dir.path().join("AGENTS.md"), "agents").unwrap();
        assert_eq!(
            read(&ws),
            Instructions::File {
                name: "AGENTS.md",
                text: "agents".into()
            }
        );
    }
}
