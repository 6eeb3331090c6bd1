//! The session listing (`list_sessions`, `pod sessions`) and the index that
//! keeps it cheap.
//!
//! The logs stay the truth; the index (`<data-dir>/sessions.index.json`) only
//! remembers, per log, what reading it gave and how far it read: its
//! entries, title, `created_at`, `compacted_from` and `forked_from`, whether
//! a rewind made it, and the byte length of the complete lines read. Logs only ever grow by whole
//! lines, so a listing stats every log and:
//! - uses the remembered fields when the length is unchanged (and so is the
//!   modification time);
//! - reads only the bytes after the remembered length when the log grew,
//!   after checking that they start with the line it expects next;
//! - reads the log in full when it is new, shorter, or anything else is off.
//!
//! `updated_at` is the log's modification time (the time of its last
//! append), taken from that stat, never from the index. Whenever something
//! was read, the index is rewritten (a temporary file renamed over it): it is
//! a cache, so a lost or damaged index is only rebuilt, and two pods listing
//! at once at worst each redo the other's work.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::protocol::{ForkPoint, LogEntry, LogLine, SegmentView, SessionInfo};

/// The longest title, in characters.
pub const TITLE_CHARS: usize = 80;

/// Bumped when [`Meta`] changes meaning; an index of another version is
/// rebuilt.
const VERSION: u32 = 3;

/// The index of the sessions in `sessions_dir` (`<data-dir>/sessions`).
pub fn path(sessions_dir: &Path) -> PathBuf {
    sessions_dir.with_file_name("sessions.index.json")
}

/// Every session of `sessions_dir`, newest activity first; `current` is
/// marked. A log without a complete `session_start` line (a crash right
/// after creating it) is not a session yet and is left out.
pub fn list(sessions_dir: &Path, current: Option<Uuid>) -> std::io::Result<Vec<SessionInfo>> {
    let index_path = path(sessions_dir);
    let mut index = load(&index_path);
    let mut changed = false;
    let mut found = Vec::new();
    let dir = match std::fs::read_dir(sessions_dir) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    for entry in dir {
        let entry = entry?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|stem| Uuid::parse_str(stem).ok())
        else {
            continue;
        };
        let Ok(stat) = entry.metadata() else {
            // Removed between the listing and the stat.
            continue;
        };
        let modified = stat.modified().unwrap_or(UNIX_EPOCH);
        let known = index.sessions.remove(&id);
        let meta = match known {
            Some(meta) if meta.len == stat.len() && meta.mtime == nanos(modified) => Some(meta),
            known => {
                changed = true;
                match refresh(&entry.path(), known) {
                    Ok(meta) => meta,
                    Err(e) => {
                        tracing::warn!(
                            "cannot read {} for the session list: {e}",
                            name.to_string_lossy()
                        );
                        None
                    }
                }
            }
        };
        if let Some(meta) = meta {
            found.push((id, modified, meta));
        }
    }
    // What is left in the index has no log any more.
    changed |= !index.sessions.is_empty();
    let mut sessions: Vec<(SystemTime, SessionInfo)> = found
        .iter()
        .map(|(id, modified, meta)| (*modified, meta.info(*id, *modified, current == Some(*id))))
        .collect();
    if changed {
        index.sessions = found.into_iter().map(|(id, _, meta)| (id, meta)).collect();
        if let Err(e) = save(&index_path, &index) {
            tracing::warn!(
                "cannot update the session index {}: {e}",
                index_path.display()
            );
        }
    }
    sessions.sort_by(|(a, x), (b, y)| b.cmp(a).then_with(|| x.session_id.cmp(&y.session_id)));
    Ok(sessions.into_iter().map(|(_, info)| info).collect())
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u32,
    sessions: HashMap<Uuid, Meta>,
}

/// What reading one log gave, and how far it read.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Meta {
    /// Bytes of complete lines read.
    len: u64,
    /// The log's modification time (ns since the epoch) when it was read.
    mtime: u128,
    entries: u64,
    created_at: String,
    /// Until one is found, every new line is looked at for it.
    title: Option<String>,
    compacted_from: Option<Uuid>,
    forked_from: Option<ForkPoint>,
    #[serde(default)]
    workspace: Option<String>,
    /// Until found, every new line of a forked log is looked at for the
    /// `rewind` entry that made it.
    rewound: bool,
}

impl Meta {
    fn info(&self, session_id: Uuid, modified: SystemTime, current: bool) -> SessionInfo {
        SessionInfo {
            session_id,
            created_at: self.created_at.clone(),
            updated_at: humantime::format_rfc3339_millis(modified).to_string(),
            entries: self.entries,
            title: self.title.clone(),
            compacted_from: self.compacted_from,
            forked_from: self.forked_from.clone(),
            current,
            workspace: self.workspace.clone(),
            rewound: self.rewound,
        }
    }
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn load(path: &Path) -> Index {
    let Ok(data) = std::fs::read(path) else {
        return Index::default();
    };
    match serde_json::from_slice::<Index>(&data) {
        Ok(index) if index.version == VERSION => index,
        _ => Index::default(),
    }
}

fn save(path: &Path, index: &Index) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "json.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let data = serde_json::to_vec(&Index {
        version: VERSION,
        sessions: index.sessions.clone(),
    })?;
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Reads what is new in the log at `path`: the bytes after `known.len` when
/// they continue what was read, else the whole log. `None` when the log has
/// no complete `session_start` yet.
fn refresh(path: &Path, known: Option<Meta>) -> std::io::Result<Option<Meta>> {
    let mut file = File::open(path)?;
    if let Some(known) = known {
        if let Some(meta) = read_more(&mut file, known)? {
            return Ok(Some(meta));
        }
        file.seek(SeekFrom::Start(0))?;
    }
    let mut data = Vec::new();
    file.read_to_end(&mut data)?;
    let mtime = nanos(file.metadata()?.modified().unwrap_or(UNIX_EPOCH));
    let Some(first_end) = data.iter().position(|&b| b == b'\n') else {
        return Ok(None);
    };
    let Ok(LogLine {
        seq: 0,
        entry:
            LogEntry::SessionStart {
                created_at,
                compacted_from,
                forked_from,
                workspace,
                ..
            },
    }) = serde_json::from_slice::<LogLine>(&data[..first_end])
    else {
        return Err(std::io::Error::other(
            "its first line is not a session_start",
        ));
    };
    let mut meta = Meta {
        len: 0,
        mtime,
        entries: 0,
        created_at,
        title: None,
        compacted_from,
        forked_from,
        workspace,
        rewound: false,
    };
    meta.scan(&data);
    Ok(Some(meta))
}

/// The log grew: reads only the new bytes, if they continue the lines read
/// (the first new line has the next seq). `None` when they do not.
fn read_more(file: &mut File, mut known: Meta) -> std::io::Result<Option<Meta>> {
    let len = file.metadata()?.len();
    if len < known.len {
        return Ok(None);
    }
    file.seek(SeekFrom::Start(known.len))?;
    let mut data = Vec::new();
    file.read_to_end(&mut data)?;
    let mtime = nanos(file.metadata()?.modified().unwrap_or(UNIX_EPOCH));
    if data.is_empty() {
        // Same length, another modification time: rewritten in place.
        return Ok(None);
    }
    if let Some(end) = data.iter().position(|&b| b == b'\n') {
        match serde_json::from_slice::<SeqOnly>(&data[..end]) {
            Ok(line) if line.seq == known.entries => {}
            _ => return Ok(None),
        }
    }
    known.mtime = mtime;
    known.scan(&data);
    Ok(Some(known))
}

/// Just the `seq` of a line, to check where a read continues.
#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

impl Meta {
    /// Counts the complete lines of `data` (the bytes following what was
    /// read before) and looks in them for the title if there is none yet,
    /// and for the rewind that made a forked log if none was seen.
    fn scan(&mut self, data: &[u8]) {
        let mut start = 0;
        while let Some(end) = data[start..].iter().position(|&b| b == b'\n') {
            let line = &data[start..start + end];
            if self.title.is_none() {
                self.title = title_of(line);
            }
            if let (false, Some(fork)) = (self.rewound, &self.forked_from) {
                self.rewound = made_by_rewind(line, fork);
            }
            self.entries += 1;
            start += end + 1;
        }
        self.len += start as u64;
    }
}

/// The title a `user_input` line gives: its text, newlines as spaces, cut
/// to [`TITLE_CHARS`] characters; `None` for other lines and for input
/// without text. The pod writes the entry's `kind` first, so other lines are
/// told apart without parsing them.
fn title_of(line: &[u8]) -> Option<String> {
    const MARK: &[u8] = b"\"kind\":\"user_input\"";
    let head = &line[..line.len().min(64)];
    if !head.windows(MARK.len()).any(|w| w == MARK) {
        return None;
    }
    let LogLine {
        entry: LogEntry::UserInput { segments, .. },
        ..
    } = serde_json::from_slice::<LogLine>(line).ok()?
    else {
        return None;
    };
    let text: String = segments
        .iter()
        .filter_map(|s| match s.view() {
            SegmentView::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    title(&text)
}

/// Whether `line` is the `rewind` entry that made a log forked at `fork`: a
/// rewind of the conversation commits its `rewind` entry, naming the session
/// it rewound, into the session it forks. A `fork` has none, and a `rewind`
/// copied from an earlier session lies at or before the fork point and names
/// another session.
fn made_by_rewind(line: &[u8], fork: &ForkPoint) -> bool {
    const MARK: &[u8] = b"\"kind\":\"rewind\"";
    let head = &line[..line.len().min(64)];
    if !head.windows(MARK.len()).any(|w| w == MARK) {
        return false;
    }
    let Ok(LogLine {
        seq,
        entry:
            LogEntry::Rewind {
                session_id,
                conversation: true,
                ..
            },
    }) = serde_json::from_slice::<LogLine>(line)
    else {
        return false;
    };
    session_id == Some(fork.session_id) && fork.seq.is_none_or(|at| seq > at)
}

/// `text` as a one-line title, or `None` when it is blank: each newline
/// (`\n`, `\r\n` or `\r`) a space, cut to [`TITLE_CHARS`] characters, as the
/// contract says — a title of a long message has exactly that many, even when
/// the cut falls on a space. Only the message's own ends are trimmed (the
/// newline `echo … | pod send --text -` leaves, an indented first line).
pub fn title(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let line = text.replace("\r\n", " ").replace(['\n', '\r'], " ");
    Some(line.chars().take(TITLE_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::store::test_entries::{input, start};

    fn write(path: &Path, entries: &[LogEntry], append: bool) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(path)
            .unwrap();
        let first = if append { read_lines(path) } else { 0 };
        for (i, entry) in entries.iter().enumerate() {
            let line = LogLine {
                seq: (first + i) as u64,
                entry: entry.clone(),
            };
            writeln!(file, "{}", serde_json::to_string(&line).unwrap()).unwrap();
        }
    }

    fn read_lines(path: &Path) -> usize {
        std::fs::read_to_string(path).unwrap().lines().count()
    }

    #[test]
    fn titles_are_one_line_and_cut() {
        assert_eq!(
            title("  fix\nthe\r\nparser\rnow \n"),
            Some("fix the parser now".into())
        );
        assert_eq!(title(" \n "), None);
        let long = "é".repeat(100);
        assert_eq!(title(&long).unwrap().chars().count(), TITLE_CHARS);
        let words = "abc ".repeat(30);
        assert_eq!(
            title(&words).unwrap(),
            words[..TITLE_CHARS],
            "a cut on a space keeps it"
        );
    }

    #[test]
    fn lists_newest_first_and_follows_appends_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let path_a = sessions.join(format!("{a}.jsonl"));
        let path_b = sessions.join(format!("{b}.jsonl"));
        write(&path_a, &[start(a)], false);
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&path_b, &[start(b), input("hello\nthere")], false);
        // Not a session yet: no complete session_start.
        std::fs::write(
            sessions.join(format!("{}.jsonl", Uuid::new_v4())),
            "{\"seq\":0",
        )
        .unwrap();

        let listed = list(&sessions, Some(a)).unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].session_id, b);
        assert_eq!(listed[0].title.as_deref(), Some("hello there"));
        assert_eq!(listed[0].entries, 2);
        assert!(!listed[0].current);
        assert_eq!(listed[1].session_id, a);
        assert_eq!(listed[1].title, None);
        assert!(listed[1].current);
        assert!(path(&sessions).exists(), "the index was written");

        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&path_a, &[input("first words"), input("later")], true);
        let listed = list(&sessions, None).unwrap();
        assert_eq!(listed[0].session_id, a, "the append made it the newest");
        assert_eq!(listed[0].entries, 3);
        assert_eq!(listed[0].title.as_deref(), Some("first words"));
    }

    fn forked(id: Uuid, from: Uuid, seq: u64) -> LogEntry {
        let LogEntry::SessionStart {
            session_id,
            created_at,
            compacted_from,
            provider,
            model,
            workspace,
            parent,
            replay_of,
            ..
        } = start(id)
        else {
            unreachable!()
        };
        LogEntry::SessionStart {
            session_id,
            created_at,
            compacted_from,
            forked_from: Some(ForkPoint {
                session_id: from,
                seq: Some(seq),
            }),
            provider,
            model,
            workspace,
            parent,
            replay_of,
        }
    }

    fn rewind(of: Uuid, conversation: bool) -> LogEntry {
        LogEntry::Rewind {
            before_seq: Some(1),
            session_id: Some(of),
            checkpoint: None,
            checkpoint_before: None,
            files_restored: Vec::new(),
            conflicts: Vec::new(),
            not_restored: Vec::new(),
            conversation,
        }
    }

    /// A session made by a rewind is told from a fork by the `rewind` entry
    /// committed into it; a rewind copied from the session it forked, or
    /// one of the files only, does not count.
    #[test]
    fn a_session_a_rewind_made_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let older = Uuid::new_v4();
        // b: a rewind of a at seq 2 (its copies hold a's own rewind of an
        // older session); c: a fork of a at seq 2, then a files-only rewind.
        let copies = [input("one"), rewind(older, true)];
        let mut log_b = vec![forked(b, a, 2)];
        log_b.extend(copies.iter().cloned());
        write(&sessions.join(format!("{b}.jsonl")), &log_b, false);
        let mut log_c = vec![forked(c, a, 2)];
        log_c.extend(copies.iter().cloned());
        log_c.push(rewind(c, false));
        write(&sessions.join(format!("{c}.jsonl")), &log_c, false);
        let rewound = |id: Uuid| {
            list(&sessions, None)
                .unwrap()
                .into_iter()
                .find(|s| s.session_id == id)
                .unwrap()
                .rewound
        };
        assert!(!rewound(b), "a copied rewind of another session");
        assert!(!rewound(c));
        // The rewind's own entry, appended: read incrementally.
        write(
            &sessions.join(format!("{b}.jsonl")),
            &[rewind(a, true)],
            true,
        );
        assert!(rewound(b));
        assert!(!rewound(c), "a fork stays a fork");
        std::fs::remove_file(path(&sessions)).unwrap();
        assert!(rewound(b), "and from the log read in full");
    }

    #[test]
    fn a_rewritten_log_or_a_damaged_index_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        let a = Uuid::new_v4();
        let path_a = sessions.join(format!("{a}.jsonl"));
        write(&path_a, &[start(a), input("one"), input("two")], false);
        assert_eq!(list(&sessions, None).unwrap()[0].entries, 3);
        // Shorter: a different log under the same name.
        write(&path_a, &[start(a), input("other")], false);
        let listed = list(&sessions, None).unwrap();
        assert_eq!(listed[0].entries, 2);
        assert_eq!(listed[0].title.as_deref(), Some("other"));
        std::fs::write(path(&sessions), "{not json").unwrap();
        assert_eq!(list(&sessions, None).unwrap()[0].entries, 2);
        std::fs::remove_file(&path_a).unwrap();
        assert!(list(&sessions, None).unwrap().is_empty());
    }
}
