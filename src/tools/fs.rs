//! File tools: `read_file`, `list_dir`, `write_file`, `edit_file`.
//!
//! Every file is opened through [`Workspace::open`] (confined, non-blocking,
//! regular files only), and no read is unbounded: `read_file` keeps at most
//! [`MAX_LINE_BYTES`] of any line, reads past at most [`MAX_SKIP_BYTES`] of
//! over-long lines, and stops at the output cap, `edit_file`
//! refuses files over [`MAX_EDIT_BYTES`], and long reads stop when the call
//! is cancelled.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{statat, AtFlags, Dir, FileType};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cap::floor_char_boundary;
use super::registry::{with_args, Args, Run, Runner, ToolDef};
use super::{open, open_refusal, ToolLimits, ToolOutcome};
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;
use crate::workspace::{Access, OpenError, Workspace};

pub const READ_FILE: &str = builtin::READ_FILE.name;
pub const LIST_DIR: &str = builtin::LIST_DIR.name;
pub const WRITE_FILE: &str = builtin::WRITE_FILE.name;
pub const EDIT_FILE: &str = builtin::EDIT_FILE.name;

pub const READ_FILE_TOOL: ToolDef = ToolDef {
    facts: builtin::READ_FILE,
    spec: |_| read_file_spec(),
    args: Args::of::<ReadFileArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(READ_FILE, arguments, |args| {
            read_file(ws, args, limits, cancel)
        })
    }),
};

pub const LIST_DIR_TOOL: ToolDef = ToolDef {
    facts: builtin::LIST_DIR,
    spec: |_| list_dir_spec(),
    args: Args::of::<ListDirArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(LIST_DIR, arguments, |args| {
            list_dir(ws, args, limits, cancel)
        })
    }),
};

pub const WRITE_FILE_TOOL: ToolDef = ToolDef {
    facts: builtin::WRITE_FILE,
    spec: |_| write_file_spec(),
    args: Args::of::<WriteFileArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(WRITE_FILE, arguments, |args| {
            write_file(ws, args, limits, cancel)
        })
    }),
};

pub const EDIT_FILE_TOOL: ToolDef = ToolDef {
    facts: builtin::EDIT_FILE,
    spec: |_| edit_file_spec(),
    args: Args::of::<EditFileArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(EDIT_FILE, arguments, |args| {
            edit_file(ws, args, limits, cancel)
        })
    }),
};

/// Lines `read_file` returns when the model gives no `limit`.
const DEFAULT_READ_LINES: usize = 2000;
/// Longer lines (minified code, data) are shortened so one line cannot
/// crowd out the rest of the range.
const MAX_LINE_BYTES: usize = 2000;
/// Entries `list_dir` shows before summarising the rest.
const MAX_DIR_ENTRIES: usize = 1000;
/// How much of a file is sniffed for NUL bytes to call it binary.
const SNIFF_BYTES: usize = 8192;
/// Largest file `edit_file` reads and rewrites: it holds the file twice in
/// memory, and a file this big is data, not source.
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// Bytes of over-long lines one `read_file` call reads past their kept part
/// to reach the lines after them. A longer line ends the call, so a read
/// costs about what it shows, however long a line is.
const MAX_SKIP_BYTES: usize = 1024 * 1024;
/// Bytes read between two looks at the cancel token.
const CANCEL_CHECK_BYTES: usize = 1024 * 1024;

/// Whether `bytes` (the start of a file) look binary: a NUL byte in the
/// first few KiB, the same heuristic git and grep use.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

fn io_error(action: &str, path: &str, e: &std::io::Error) -> ToolOutcome {
    let reason = match e.kind() {
        ErrorKind::NotFound => "no such file or directory".to_owned(),
        ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => e.to_string(),
    };
    ToolOutcome::error(format!("cannot {action} {path}: {reason}"))
}

/// A line as [`BoundedLines`] read it: its first bytes, how many bytes of it
/// were read, and whether that was all of it.
struct Line<'a> {
    kept: &'a [u8],
    len: usize,
    whole: bool,
}

impl Line<'_> {
    /// The line for the model: a line longer than [`MAX_LINE_BYTES`] is cut
    /// on a char boundary and says how long it was, or, when it was not
    /// read to its end, that it is longer than what was read.
    fn clipped(&self) -> String {
        let text = String::from_utf8_lossy(self.kept);
        let text = text.trim_end_matches('\r');
        if self.len <= MAX_LINE_BYTES && self.whole {
            return text.to_owned();
        }
        let end = floor_char_boundary(text, MAX_LINE_BYTES);
        if self.whole {
            format!("{}… [line cut, {} bytes long]", &text[..end], self.len)
        } else {
            format!(
                "{}… [line cut; longer than {} bytes, not read to its end]",
                &text[..end],
                self.len
            )
        }
    }
}

/// Reads a file line by line in bounded memory and bounded reading: of each
/// line only the first `keep` bytes are held and at most `scan` bytes are
/// read, whatever its length (a 2 GiB file of one "line" costs a buffer and
/// the bytes asked for, not 2 GiB), and the cancel token is checked as it
/// goes.
struct BoundedLines<'c, R> {
    reader: R,
    line: Vec<u8>,
    since_check: usize,
    cancel: &'c CancellationToken,
}

impl<'c, R: BufRead> BoundedLines<'c, R> {
    fn new(reader: R, cancel: &'c CancellationToken) -> Self {
        Self {
            reader,
            line: Vec::new(),
            since_check: 0,
            cancel,
        }
    }

    /// The next line without its `\n`, keeping at most `keep` bytes of it
    /// and reading at most `scan` bytes of it; `None` at the end. A line
    /// longer than `scan` comes back with `whole: false`, and the reader
    /// stays inside it: the caller stops there. Cancellation is an
    /// `Interrupted` error.
    fn next(&mut self, keep: usize, scan: usize) -> std::io::Result<Option<Line<'_>>> {
        self.line.clear();
        let mut len = 0usize;
        let mut any = false;
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(any.then_some(Line {
                    kept: &self.line,
                    len,
                    whole: true,
                }));
            }
            any = true;
            // One byte past `scan`, so a line ending right at it is whole.
            let window = &buf[..buf.len().min((scan - len).saturating_add(1))];
            let newline = memchr::memchr(b'\n', window);
            let chunk = &window[..newline.unwrap_or(window.len().min(scan - len))];
            let room = keep.saturating_sub(self.line.len());
            self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            len += chunk.len();
            let cut = newline.is_none() && window.len() > chunk.len();
            let used = newline.map_or(chunk.len(), |i| i + 1);
            self.reader.consume(used);
            self.since_check += used;
            if self.since_check >= CANCEL_CHECK_BYTES {
                self.since_check = 0;
                if self.cancel.is_cancelled() {
                    return Err(ErrorKind::Interrupted.into());
                }
            }
            if newline.is_some() || cut {
                return Ok(Some(Line {
                    kept: &self.line,
                    len,
                    whole: !cut,
                }));
            }
        }
    }
}

pub fn read_file_spec() -> ToolSpec {
    ToolSpec {
        name: READ_FILE.into(),
        description: format!(
            "Read a text file in the workspace. Returns its lines numbered like `cat -n` \
             (number, tab, text). Reads {DEFAULT_READ_LINES} lines from the start unless \
             `offset`/`limit` select a range; when more remains, the output ends with the \
             offset to continue from. Binary files are refused. Paths are relative to the \
             workspace root."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based. Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": format!("How many lines to return. Default {DEFAULT_READ_LINES}.")}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

pub fn read_file(
    ws: &Workspace,
    args: ReadFileArgs,
    limits: &ToolLimits,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let opened = match ws.open(&args.path, Access::Read) {
        Ok(opened) => opened,
        Err(OpenError::IsDirectory) => {
            return ToolOutcome::error(format!(
                "{} is a directory; use list_dir to see its entries",
                args.path
            ))
        }
        Err(e) => return open_refusal(&args.path, "read", e),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, opened.file);
    match reader.fill_buf() {
        Ok(start) if looks_binary(start) => {
            return ToolOutcome::error(format!("{} is a binary file; not shown", args.path))
        }
        Ok(_) => {}
        Err(e) => return io_error("read", &args.path, &e),
    }
    let first = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
    // Stop short of the cap, so the continuation marker is never cut away.
    let budget = limits.output_cap_bytes.saturating_sub(128);
    let mut lines = BoundedLines::new(reader, cancel);
    let mut out = String::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    let mut skip_left = MAX_SKIP_BYTES;
    loop {
        let (keep, scan) = if number + 1 < first {
            (0, usize::MAX)
        } else if shown == limit {
            // Only whether another line starts matters.
            (0, 0)
        } else {
            (MAX_LINE_BYTES + 4, MAX_LINE_BYTES + 4 + skip_left)
        };
        let line = match lines.next(keep, scan) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => return ToolOutcome::error("cancelled"),
            Err(e) => return io_error("read", &args.path, &e),
        };
        number += 1;
        if number < first {
            continue;
        }
        if shown == limit {
            out.push_str(&format!(
                "[... file continues; read on with offset={number}]\n"
            ));
            return ToolOutcome::ok(out);
        }
        let text = format!("{number:>6}\t{}\n", line.clipped());
        if shown > 0 && out.len() + text.len() > budget {
            out.push_str(&format!(
                "[... file continues (output limit reached); read on with offset={number}]\n"
            ));
            return ToolOutcome::ok(out);
        }
        out.push_str(&text);
        shown += 1;
        if !line.whole {
            out.push_str(&format!(
                "[... line {number} was not read to its end; read on with offset={}]\n",
                number + 1
            ));
            return ToolOutcome::ok(out);
        }
        skip_left -= line.len.saturating_sub(MAX_LINE_BYTES + 4);
    }
    if number == 0 {
        return ToolOutcome::ok(format!("({} is empty)", args.path));
    }
    if shown == 0 {
        return ToolOutcome::ok(format!(
            "({} has {number} lines; offset {first} is past the end)",
            args.path
        ));
    }
    ToolOutcome::ok(out)
}

pub fn list_dir_spec() -> ToolSpec {
    ToolSpec {
        name: LIST_DIR.into(),
        description: format!(
            "List the entries of a directory in the workspace, sorted by name: directories \
             end in `/`, files show their size, symlinks their target. Not recursive (use \
             glob for that). At most {MAX_DIR_ENTRIES} entries."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory, relative to the workspace root. Default: the root."}
            },
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    path: Option<String>,
}

pub fn list_dir(
    ws: &Workspace,
    args: ListDirArgs,
    _: &ToolLimits,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let path = args.path.unwrap_or_else(|| ".".into());
    let dir = match ws.open(&path, Access::Directory) {
        Ok(opened) => opened.file,
        Err(OpenError::NotDirectory) => {
            return ToolOutcome::error(format!("{path} is a file, not a directory"))
        }
        Err(e) => return open_refusal(&path, "list", e),
    };
    let entries = match Dir::read_from(dir.as_fd()) {
        Ok(entries) => entries,
        Err(e) => return io_error("list", &path, &e.into()),
    };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        if cancel.is_cancelled() {
            return ToolOutcome::error("cancelled");
        }
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        lines.push(describe_entry(&dir, OsStr::from_bytes(name)));
    }
    if lines.is_empty() {
        return ToolOutcome::ok(format!("({path} is empty)"));
    }
    lines.sort();
    let total = lines.len();
    lines.truncate(MAX_DIR_ENTRIES);
    let mut out = lines.join("\n");
    if total > MAX_DIR_ENTRIES {
        out.push_str(&format!("\n[... {} more entries]", total - MAX_DIR_ENTRIES));
    }
    ToolOutcome::ok(out)
}

/// One `list_dir` line, from `lstat` relative to the open directory (so
/// the entry described is the one listed, wherever the path now leads).
fn describe_entry(dir: &std::fs::File, name: &OsStr) -> String {
    let shown = name.to_string_lossy();
    match statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => match rustix::fs::readlinkat(dir, name, Vec::new()) {
                Ok(target) => format!("{shown} -> {}", target.to_string_lossy()),
                Err(_) => format!("{shown} -> ?"),
            },
            FileType::Directory => format!("{shown}/"),
            _ => format!("{shown} ({} bytes)", st.st_size),
        },
        Err(_) => shown.into_owned(),
    }
}

pub fn write_file_spec() -> ToolSpec {
    ToolSpec {
        name: WRITE_FILE.into(),
        description: "Write a file in the workspace, replacing it if it exists and creating \
                      missing parent directories. Use edit_file to change part of an existing \
                      file."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    path: String,
    content: String,
}

pub fn write_file(
    ws: &Workspace,
    args: WriteFileArgs,
    _: &ToolLimits,
    _: &CancellationToken,
) -> ToolOutcome {
    let opened = match open(ws, &args.path, Access::Write, "write") {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    let mut file = opened.file;
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.write_all(args.content.as_bytes()))
    {
        return io_error("write", &args.path, &e);
    }
    ToolOutcome::ok(format!(
        "{} {} ({} bytes, {} lines)",
        if opened.created {
            "created"
        } else {
            "overwrote"
        },
        args.path,
        args.content.len(),
        args.content.lines().count()
    ))
}

pub fn edit_file_spec() -> ToolSpec {
    ToolSpec {
        name: EDIT_FILE.into(),
        description: "Replace one exact occurrence of `old_string` with `new_string` in a file. \
                      `old_string` must match the file's text exactly (whitespace and \
                      indentation included) and occur exactly once; if it occurs zero or \
                      several times nothing is changed and the error says how many times it \
                      was found — then read the file and include more surrounding lines."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root."},
                "old_string": {"type": "string", "description": "The exact text to replace; must be unique in the file."},
                "new_string": {"type": "string", "description": "The replacement text."}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    path: String,
    old_string: String,
    new_string: String,
}

/// Start offsets of `needle` in `hay`, overlapping ones included: `aa` in
/// `aaa` is ambiguous, and counting it once would hide that.
fn occurrences(hay: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let at = from + i;
        found.push(at);
        from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

pub fn edit_file(
    ws: &Workspace,
    args: EditFileArgs,
    _: &ToolLimits,
    _: &CancellationToken,
) -> ToolOutcome {
    if args.old_string.is_empty() {
        return ToolOutcome::error("old_string is empty; to create a file use write_file");
    }
    let opened = match open(ws, &args.path, Access::Edit, "edit") {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    let size = opened.metadata.len();
    if size > MAX_EDIT_BYTES {
        return ToolOutcome::error(format!(
            "{} is {size} bytes; edit_file edits files of at most {MAX_EDIT_BYTES} bytes \
             (16 MiB). Use bash (sed, a script) for larger files.",
            args.path
        ));
    }
    let mut file = opened.file;
    let mut bytes = Vec::new();
    if let Err(e) = (&mut file).take(MAX_EDIT_BYTES + 1).read_to_end(&mut bytes) {
        return io_error("read", &args.path, &e);
    }
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return ToolOutcome::error(format!(
            "{} grew past {MAX_EDIT_BYTES} bytes while being read; not edited",
            args.path
        ));
    }
    if looks_binary(&bytes) {
        return ToolOutcome::error(format!("{} is a binary file; not edited", args.path));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutcome::error(format!("{} is not valid UTF-8; not edited", args.path));
    };
    let found = occurrences(&text, &args.old_string);
    let at = match found.as_slice() {
        [at] => *at,
        [] => {
            return ToolOutcome::error(format!(
                "old_string was found 0 times in {}; nothing changed. Read the file and copy \
                 the text exactly, including whitespace and indentation.",
                args.path
            ))
        }
        many => {
            return ToolOutcome::error(format!(
                "old_string was found {} times in {}; nothing changed. Include more \
                 surrounding lines so it matches exactly once.",
                many.len(),
                args.path
            ))
        }
    };
    let mut edited = String::with_capacity(text.len() + args.new_string.len());
    edited.push_str(&text[..at]);
    edited.push_str(&args.new_string);
    edited.push_str(&text[at + args.old_string.len()..]);
    let written = file
        .rewind()
        .and_then(|()| file.write_all(edited.as_bytes()))
        .and_then(|()| file.set_len(edited.len() as u64));
    if let Err(e) = written {
        return io_error("write", &args.path, &e);
    }
    let line = text[..at].matches('\n').count() + 1;
    ToolOutcome::ok(format!(
        "edited {}: replaced 1 occurrence at line {line}",
        args.path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_count_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), vec![0, 1]);
        assert_eq!(occurrences("éaéa", "a"), vec![2, 5]);
        assert!(occurrences("abc", "x").is_empty());
    }

    #[test]
    fn long_lines_are_kept_bounded_and_cut_on_char_boundaries() {
        let long = "日".repeat(1000) + "\nshort\n";
        let cancel = CancellationToken::new();
        let mut lines = BoundedLines::new(long.as_bytes(), &cancel);
        let first = lines.next(MAX_LINE_BYTES + 4, usize::MAX).unwrap().unwrap();
        assert_eq!(first.kept.len(), MAX_LINE_BYTES + 4);
        assert!(first.clipped().contains("line cut, 3000 bytes long"));
        assert!(!first.clipped().contains('\u{FFFD}'));
        assert_eq!(lines.next(10, 10).unwrap().unwrap().clipped(), "short");
        assert!(lines.next(10, 10).unwrap().is_none());
    }

    #[test]
    fn a_line_longer_than_its_scan_is_not_read_to_its_end() {
        let text = "x".repeat(5000) + "\nnext\n";
        let cancel = CancellationToken::new();
        let mut reader = BufReader::with_capacity(64, text.as_bytes());
        let mut lines = BoundedLines::new(&mut reader, &cancel);
        let first = lines.next(MAX_LINE_BYTES + 4, 3000).unwrap().unwrap();
        assert!(!first.whole);
        assert_eq!(first.len, 3000);
        assert!(first
            .clipped()
            .ends_with("[line cut; longer than 3000 bytes, not read to its end]"));
        drop(lines);
        assert_eq!(reader.fill_buf().unwrap()[0], b'x', "read past the scan");
    }

    #[test]
    fn a_line_ending_exactly_at_its_scan_is_whole() {
        let text = "abc\nd";
        let cancel = CancellationToken::new();
        let mut lines = BoundedLines::new(BufReader::with_capacity(3, text.as_bytes()), &cancel);
        let first = lines.next(10, 3).unwrap().unwrap();
        assert!(first.whole);
        assert_eq!(first.clipped(), "abc");
        let second = lines.next(10, 3).unwrap().unwrap();
        assert!(second.whole);
        assert_eq!(second.clipped(), "d");
    }

    #[test]
    fn binary_sniffing() {
        assert!(looks_binary(b"ab\0cd"));
        assert!(!looks_binary("plain é text".as_bytes()));
    }
}
