//! One session's log file: exclusive lock, crash recovery, durable appends.
//!
//! The file is `{"seq":N,"entry":{...}}\n` lines. Three rules keep it sound:
//! - **One writer.** The file is `flock`ed exclusively for as long as it is
//!   open; a second process gets a clear error instead of interleaving lines.
//! - **Nothing torn survives.** A failed or partial append is cut back to the
//!   last complete line before the error is reported, so the next append never
//!   glues onto half a line. On open, a torn last line (a crash mid-write) is
//!   cut off with a warning.
//! - **Corruption is loud.** A bad line in the middle stops startup with the
//!   file and line number; nothing is silently dropped.
//! - **Only into the file others will read.** Before each append the path is
//!   checked to still name the open file, at the length this writer left it;
//!   a log deleted, replaced or truncated behind the pod's back fails the
//!   append instead of taking entries nobody could ever read back.
//!
//! Logs are created `0600`: they hold everything said to the model.

use std::fs::{File, Permissions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use uuid::Uuid;

use crate::protocol::{LogEntry, LogLine};

/// An open, locked session log.
pub struct LogFile {
    path: PathBuf,
    file: File,
    /// Length of the file up to its last durable, complete line.
    len: u64,
    /// Device and inode of the open file, to tell whether `path` still names it.
    identity: (u64, u64),
}

/// What was in the file when it was opened.
pub struct Recovered {
    /// Each line's bytes without the newline, as written.
    pub lines: Vec<Bytes>,
    /// The same lines, parsed.
    pub entries: Vec<LogEntry>,
    /// Set when a torn last line was cut off.
    pub truncated_tail: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} is locked by another process (is another `pod serve` using this data dir?)",
        path.display()
    )]
    Locked { path: PathBuf },
    #[error(
        "{}:{line}: corrupt session log line: {reason}. The pod will not start on a damaged \
         log; move the file aside or repair that line",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

impl LogFile {
    /// The log file of `session_id` under `sessions_dir`.
    pub fn path_for(sessions_dir: &Path, session_id: Uuid) -> PathBuf {
        sessions_dir.join(format!("{session_id}.jsonl"))
    }

    /// Creates a new, empty log. Fails if the file exists.
    pub fn create(path: &Path) -> Result<LogFile, LogError> {
        let io = |source| LogError::Io {
            path: path.to_owned(),
            source,
        };
        let file = crate::private::file_options()
            .read(true)
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(io)?;
        lock(&file, path)?;
        if let Some(dir) = path.parent() {
            sync_dir(dir).map_err(io)?;
        }
        let identity = identity(&file.metadata().map_err(io)?);
        Ok(LogFile {
            path: path.to_owned(),
            file,
            len: 0,
            identity,
        })
    }

    /// Opens, locks and recovers an existing log.
    pub fn open(path: &Path) -> Result<(LogFile, Recovered), LogError> {
        let io = |source| LogError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = File::options()
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        lock(&file, path)?;
        let meta = file.metadata().map_err(io)?;
        // A log written by an older pod (or copied in) may be readable by
        // others; it is the pod's own file, so it is made private.
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(Permissions::from_mode(crate::private::FILE_MODE))
                .map_err(io)?;
        }
        let mut data = Vec::new();
        file.read_to_end(&mut data).map_err(io)?;
        let data = Bytes::from(data);
        let (recovered, good_len) = parse(path, &data)?;
        if good_len < data.len() as u64 {
            file.set_len(good_len).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok((
            LogFile {
                path: path.to_owned(),
                file,
                len: good_len,
                identity: identity(&meta),
            },
            recovered,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `line` and a newline, without syncing. On failure the file is
    /// cut back to where it was, so no partial line is left behind. The
    /// newline is added to `line` for the write and removed again, so the
    /// line is written with one syscall and without a copy.
    pub fn write_line(&mut self, line: &mut Vec<u8>) -> std::io::Result<()> {
        self.check_in_place()?;
        line.push(b'\n');
        let result = self.file.write_all(line);
        line.pop();
        match result {
            Ok(()) => {
                self.len += line.len() as u64 + 1;
                Ok(())
            }
            Err(e) => {
                // Best effort: if even this fails the next write fails too,
                // and startup recovery cuts the torn tail.
                let _ = self.file.set_len(self.len);
                Err(e)
            }
        }
    }

    /// Fails unless `path` still names the open file at the length this
    /// writer left it. One `stat` per append: the price of never appending
    /// to a file that was deleted, replaced or cut behind the pod's back.
    fn check_in_place(&self) -> std::io::Result<()> {
        let what = match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "was deleted",
            Err(e) => return Err(e),
            Ok(meta) if identity(&meta) != self.identity => "was replaced by another file",
            Ok(meta) if meta.len() < self.len => "was truncated",
            Ok(meta) if meta.len() > self.len => "was written to by another program",
            Ok(_) => return Ok(()),
        };
        Err(std::io::Error::other(format!(
            "the log {what} while the pod was using it; nothing more is appended to it, so \
             no entry is accepted that could not be read back. Restore the file and restart \
             the pod, or start a new session with `pod serve --new-session`"
        )))
    }

    /// Makes every written line durable (fdatasync).
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// Drops every line written after `len` bytes (used when a sync fails:
    /// the lines it covered were never acknowledged, so they must not
    /// reappear after a restart).
    pub fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)?;
        self.len = len;
        self.file.sync_data()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

fn lock(file: &File, path: &Path) -> Result<(), LogError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(LogError::Locked {
            path: path.to_owned(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(LogError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// fsyncs a directory so that a file created or renamed in it survives a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads only a log's lines, without locking it (for `get_session` and
/// `pod log` on sessions no pod is writing).
pub fn read_lines(path: &Path) -> Result<Recovered, LogError> {
    let data = std::fs::read(path).map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    Ok(parse(path, &Bytes::from(data))?.0)
}

/// Splits and checks the lines; returns them and the length of the good
/// prefix. Only the very last line may be bad (a torn write); it is dropped.
fn parse(path: &Path, data: &Bytes) -> Result<(Recovered, u64), LogError> {
    let mut lines = Vec::new();
    let mut entries = Vec::new();
    let mut truncated_tail = None;
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < data.len() {
        line_no += 1;
        let end = data[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| start + i);
        let (raw, next, complete) = match end {
            Some(end) => (data.slice(start..end), end + 1, true),
            None => (data.slice(start..), data.len(), false),
        };
        let expected_seq = entries.len() as u64;
        match check_line(&raw, expected_seq) {
            Ok(entry) if complete => {
                lines.push(canonical(raw, expected_seq, &entry));
                entries.push(entry);
            }
            result => {
                let reason = match result {
                    Ok(_) => "the last line has no newline (torn write)".to_owned(),
                    Err(reason) => reason,
                };
                if next < data.len() {
                    return Err(LogError::Corrupt {
                        path: path.to_owned(),
                        line: line_no,
                        reason,
                    });
                }
                truncated_tail = Some(format!(
                    "{}:{line_no}: cut off a torn last line ({reason}); it was never acknowledged",
                    path.display()
                ));
                return Ok((
                    Recovered {
                        lines,
                        entries,
                        truncated_tail,
                    },
                    start as u64,
                ));
            }
        }
        start = next;
    }
    Ok((
        Recovered {
            lines,
            entries,
            truncated_tail,
        },
        data.len() as u64,
    ))
}

/// Lines are spliced into frames as they are (see `pod::frames`), which needs
/// them to start with `{"seq":`. A valid line written by another tool in
/// another shape is re-serialised once here instead.
fn canonical(raw: Bytes, seq: u64, entry: &LogEntry) -> Bytes {
    if raw.starts_with(b"{\"seq\":") {
        return raw;
    }
    let line = LogLine {
        seq,
        entry: entry.clone(),
    };
    serde_json::to_vec(&line).map(Bytes::from).unwrap_or(raw)
}

fn check_line(raw: &[u8], expected_seq: u64) -> Result<LogEntry, String> {
    let line: LogLine = serde_json::from_slice(raw).map_err(|e| format!("not a log line: {e}"))?;
    if line.seq != expected_seq {
        return Err(format!(
            "seq {} where {expected_seq} was expected",
            line.seq
        ));
    }
    if line.entry == LogEntry::Unknown {
        return Err("unknown entry kind".into());
    }
    if (expected_seq == 0) != matches!(line.entry, LogEntry::SessionStart { .. }) {
        return Err("a session starts with session_start, and only there".into());
    }
    Ok(line.entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_entries::{input, start};

    fn line(seq: u64, entry: &LogEntry) -> Vec<u8> {
        serde_json::to_vec(&LogLine {
            seq,
            entry: entry.clone(),
        })
        .unwrap()
    }

    #[test]
    fn appends_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut log = LogFile::create(&path).unwrap();
        log.write_line(&mut line(0, &start(Uuid::new_v4())))
            .unwrap();
        log.write_line(&mut line(1, &input("hi"))).unwrap();
        log.sync().unwrap();
        drop(log);
        let (_, rec) = LogFile::open(&path).unwrap();
        assert_eq!(rec.entries.len(), 2);
        assert!(rec.truncated_tail.is_none());
    }

    #[test]
    fn torn_tail_is_cut_and_appends_continue_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut data = line(0, &start(Uuid::new_v4()));
        data.push(b'\n');
        data.extend_from_slice(&line(1, &input("hi"))[..20]);
        std::fs::write(&path, &data).unwrap();
        let (mut log, rec) = LogFile::open(&path).unwrap();
        assert_eq!(rec.entries.len(), 1);
        assert!(rec.truncated_tail.unwrap().contains("s.jsonl:2"));
        log.write_line(&mut line(1, &input("again"))).unwrap();
        drop(log);
        let (_, rec) = LogFile::open(&path).unwrap();
        assert_eq!(rec.entries.len(), 2);
    }

    #[test]
    fn corrupt_middle_line_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut data = line(0, &start(Uuid::new_v4()));
        data.extend_from_slice(b"\n{garbage}\n");
        data.extend_from_slice(&line(2, &input("x")));
        data.push(b'\n');
        std::fs::write(&path, &data).unwrap();
        let err = LogFile::open(&path).err().unwrap().to_string();
        assert!(err.contains("s.jsonl:2"), "{err}");
    }

    #[test]
    fn seq_gaps_are_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut data = line(0, &start(Uuid::new_v4()));
        data.push(b'\n');
        data.extend_from_slice(&line(5, &input("x")));
        data.extend_from_slice(b"\n");
        data.extend_from_slice(&line(6, &input("y")));
        data.push(b'\n');
        std::fs::write(&path, &data).unwrap();
        assert!(matches!(
            LogFile::open(&path),
            Err(LogError::Corrupt { line: 2, .. })
        ));
    }

    #[test]
    fn appends_stop_once_the_file_is_deleted_truncated_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut log = LogFile::create(&path).unwrap();
        log.write_line(&mut line(0, &start(Uuid::new_v4())))
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let err = log.write_line(&mut line(1, &input("x"))).unwrap_err();
        assert!(err.to_string().contains("was deleted"), "{err}");

        let mut log = LogFile::create(&path).unwrap();
        log.write_line(&mut line(0, &start(Uuid::new_v4())))
            .unwrap();
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(3)
            .unwrap();
        let err = log.write_line(&mut line(1, &input("x"))).unwrap_err();
        assert!(err.to_string().contains("was truncated"), "{err}");

        drop(log);
        std::fs::remove_file(&path).unwrap();
        let mut log = LogFile::create(&path).unwrap();
        std::fs::rename(&path, dir.path().join("aside")).unwrap();
        std::fs::write(&path, "").unwrap();
        let err = log
            .write_line(&mut line(0, &start(Uuid::new_v4())))
            .unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
    }

    #[test]
    fn logs_are_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        LogFile::create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_second_opener_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let _first = LogFile::create(&path).unwrap();
        assert!(matches!(LogFile::open(&path), Err(LogError::Locked { .. })));
    }
}
