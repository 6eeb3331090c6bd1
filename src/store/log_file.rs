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

    /// Creates a new, empty log under a hidden name beside `path`
    /// (`.<file name>.tmp`, which no listing reads), without syncing the
    /// directory: a name nobody looks up need not survive a crash.
    /// [`LogFile::publish`] moves it to `path`. A child pod's log is made
    /// this way while its parent commits `agent_started`, so that the two
    /// syncs overlap and yet no child log can outlive a crash unless the
    /// entry naming it was committed first.
    pub fn create_staged(path: &Path) -> Result<LogFile, LogError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let staged = path.with_file_name(format!(".{name}.tmp"));
        let io = |source| LogError::Io {
            path: staged.clone(),
            source,
        };
        let file = crate::private::file_options()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&staged)
            .map_err(io)?;
        lock(&file, &staged)?;
        let identity = identity(&file.metadata().map_err(io)?);
        Ok(LogFile {
            path: staged,
            file,
            len: 0,
            identity,
        })
    }

    /// Gives a staged log its real name `path`, which must not exist. The
    /// name is durable once the caller syncs the directory.
    pub fn publish(&mut self, path: &Path) -> std::io::Result<()> {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &self.path,
            rustix::fs::CWD,
            path,
            rustix::fs::RenameFlags::NOREPLACE,
        )?;
        self.path = path.to_owned();
        Ok(())
    }

    /// Removes a staged log that was never published.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
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
    let read = parse_lines(data);
    let count = read.len();
    let mut lines = Vec::with_capacity(count);
    let mut entries = Vec::with_capacity(count);
    for (index, line) in read.into_iter().enumerate() {
        let expected_seq = entries.len() as u64;
        match line
            .parsed
            .and_then(|parsed| check_line(parsed, expected_seq))
        {
            Ok(entry) if line.complete => {
                lines.push(canonical(line.raw, expected_seq, &entry));
                entries.push(entry);
            }
            result => {
                let reason = match result {
                    Ok(_) => "the last line has no newline (torn write)".to_owned(),
                    Err(reason) => reason,
                };
                let line_no = index + 1;
                if line_no < count {
                    return Err(LogError::Corrupt {
                        path: path.to_owned(),
                        line: line_no,
                        reason,
                    });
                }
                let truncated_tail = Some(format!(
                    "{}:{line_no}: cut off a torn last line ({reason}); it was never acknowledged",
                    path.display()
                ));
                return Ok((
                    Recovered {
                        lines,
                        entries,
                        truncated_tail,
                    },
                    line.start as u64,
                ));
            }
        }
    }
    Ok((
        Recovered {
            lines,
            entries,
            truncated_tail: None,
        },
        data.len() as u64,
    ))
}

/// One line of the file as read, before it is checked against its place.
struct ReadLine {
    /// Offset of its first byte in the file.
    start: usize,
    /// Its bytes, without the newline.
    raw: Bytes,
    /// Whether a newline ended it (only a torn last line lacks one).
    complete: bool,
    parsed: Result<LogLine, String>,
}

/// A log at least this large is parsed on several threads. Parsing is most
/// of what a pod does to start on a long session, and lines parse
/// independently; below this a thread costs more than it saves.
const PARALLEL_FROM: usize = 4 << 20;

/// Splits `data` into lines and parses each, in file order. A large log is
/// cut at newlines into one piece per available CPU, parsed in parallel;
/// checking each line's seq against its place is left to the caller, which
/// sees the lines in order.
fn parse_lines(data: &Bytes) -> Vec<ReadLine> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    parse_in_pieces(data, (data.len() / PARALLEL_FROM).clamp(1, cpus))
}

fn parse_in_pieces(data: &Bytes, pieces: usize) -> Vec<ReadLine> {
    let mut bounds = vec![0];
    for i in 1..pieces {
        let from = (data.len() * i / pieces).max(bounds[bounds.len() - 1]);
        if let Some(newline) = memchr::memchr(b'\n', &data[from..]) {
            bounds.push(from + newline + 1);
        }
    }
    bounds.push(data.len());
    bounds.dedup();
    let ranges: Vec<_> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    std::thread::scope(|scope| {
        // Each piece but the first gets a thread; the first is parsed here.
        // A thread that cannot be created leaves its piece to this one.
        let spawned: Vec<_> = ranges[1..]
            .iter()
            .map(|&(from, to)| {
                std::thread::Builder::new()
                    .name("pod-log-parse".into())
                    .spawn_scoped(scope, move || parse_piece(data, from, to))
                    .map_err(|_| (from, to))
            })
            .collect();
        let mut lines = ranges
            .first()
            .map_or_else(Vec::new, |&(from, to)| parse_piece(data, from, to));
        for piece in spawned {
            lines.extend(match piece {
                Ok(thread) => thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err((from, to)) => parse_piece(data, from, to),
            });
        }
        lines
    })
}

/// Parses the lines of `data[from..to]`, which starts at a line's start.
fn parse_piece(data: &Bytes, from: usize, to: usize) -> Vec<ReadLine> {
    let mut lines = Vec::new();
    let mut start = from;
    while start < to {
        let (end, complete) = match memchr::memchr(b'\n', &data[start..to]) {
            Some(i) => (start + i, true),
            None => (to, false),
        };
        let raw = data.slice(start..end);
        let parsed =
            serde_json::from_slice::<LogLine>(&raw).map_err(|e| format!("not a log line: {e}"));
        lines.push(ReadLine {
            start,
            raw,
            complete,
            parsed,
        });
        start = end + 1;
    }
    lines
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

/// Checks a parsed line against its place in the file.
fn check_line(line: LogLine, expected_seq: u64) -> Result<LogEntry, String> {
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
    fn lines_parse_alike_in_any_number_of_pieces() {
        let mut data = Vec::new();
        for seq in 0..40 {
            let entry = if seq == 0 {
                start(Uuid::new_v4())
            } else {
                input(&"x".repeat(seq as usize * 7))
            };
            data.extend_from_slice(&line(seq, &entry));
            data.push(b'\n');
            if seq == 17 {
                data.extend_from_slice(b"{garbage}\n\n");
            }
        }
        data.extend_from_slice(b"{\"seq\":40,\"en");
        let data = Bytes::from(data);
        let summary = |lines: Vec<ReadLine>| -> Vec<(usize, Bytes, bool, bool)> {
            lines
                .into_iter()
                .map(|l| (l.start, l.raw, l.complete, l.parsed.is_ok()))
                .collect()
        };
        let whole = summary(parse_in_pieces(&data, 1));
        assert_eq!(whole.len(), 43);
        assert!(!whole[18].3 && whole[19].1.is_empty() && !whole[42].2);
        for pieces in 2..=9 {
            assert_eq!(
                summary(parse_in_pieces(&data, pieces)),
                whole,
                "{pieces} pieces"
            );
        }
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
