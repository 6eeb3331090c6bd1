//! File tools: `read_file`, `list_dir`, `write_file`, `edit_file`.

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind};
use std::path::Path;

use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cap::floor_char_boundary;
use super::{resolve, ToolOutcome};
use crate::provider::ToolSpec;
use crate::workspace::Workspace;

pub const READ_FILE: &str = "read_file";
pub const LIST_DIR: &str = "list_dir";
pub const WRITE_FILE: &str = "write_file";
pub const EDIT_FILE: &str = "edit_file";

/// Lines `read_file` returns when the model gives no `limit`.
const DEFAULT_READ_LINES: usize = 2000;
/// Longer lines (minified code, data) are shortened so one line cannot
/// crowd out the rest of the range.
const MAX_LINE_BYTES: usize = 2000;
/// Entries `list_dir` shows before summarising the rest.
const MAX_DIR_ENTRIES: usize = 1000;
/// How much of a file is sniffed for NUL bytes to call it binary.
const SNIFF_BYTES: usize = 8192;

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

/// Shortens `line` to [`MAX_LINE_BYTES`] on a char boundary.
fn clip_line(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_owned();
    }
    let end = floor_char_boundary(line, MAX_LINE_BYTES);
    format!("{}… [line cut, {} bytes long]", &line[..end], line.len())
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

#[derive(Debug, Deserialize)]
pub struct ReadFileArgs {
    path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

pub fn read_file(ws: &Workspace, args: ReadFileArgs, _: &CancellationToken) -> ToolOutcome {
    let real = match resolve(ws, &args.path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    if real.is_dir() {
        return ToolOutcome::error(format!(
            "{} is a directory; use list_dir to see its entries",
            args.path
        ));
    }
    let file = match fs::File::open(&real) {
        Ok(f) => f,
        Err(e) => return io_error("read", &args.path, &e),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    match reader.fill_buf() {
        Ok(start) if looks_binary(start) => {
            return ToolOutcome::error(format!("{} is a binary file; not shown", args.path))
        }
        Ok(_) => {}
        Err(e) => return io_error("read", &args.path, &e),
    }
    let first = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return io_error("read", &args.path, &e),
        }
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
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        out.push_str(&format!("{number:>6}\t{}\n", clip_line(text)));
        shown += 1;
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

#[derive(Debug, Deserialize)]
pub struct ListDirArgs {
    path: Option<String>,
}

pub fn list_dir(ws: &Workspace, args: ListDirArgs, _: &CancellationToken) -> ToolOutcome {
    let path = args.path.unwrap_or_else(|| ".".into());
    let real = match resolve(ws, &path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let entries = match fs::read_dir(&real) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotADirectory => {
            return ToolOutcome::error(format!("{path} is a file, not a directory"))
        }
        Err(e) => return io_error("list", &path, &e),
    };
    let mut lines: Vec<String> = entries
        .flatten()
        .map(|entry| describe_entry(&entry.path(), &entry.file_name().to_string_lossy()))
        .collect();
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

fn describe_entry(path: &Path, name: &str) -> String {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match fs::read_link(path) {
            Ok(target) => format!("{name} -> {}", target.display()),
            Err(_) => format!("{name} -> ?"),
        },
        Ok(m) if m.is_dir() => format!("{name}/"),
        Ok(m) => format!("{name} ({} bytes)", m.len()),
        Err(_) => name.to_owned(),
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

#[derive(Debug, Deserialize)]
pub struct WriteFileArgs {
    path: String,
    content: String,
}

pub fn write_file(ws: &Workspace, args: WriteFileArgs, _: &CancellationToken) -> ToolOutcome {
    let real = match resolve(ws, &args.path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    if real.is_dir() {
        return ToolOutcome::error(format!("{} is a directory", args.path));
    }
    let existed = real.exists();
    if let Some(parent) = real.parent() {
        if let Err(e) = fs::create_dir_all(parent) {
            return io_error("create the directories for", &args.path, &e);
        }
    }
    if let Err(e) = fs::write(&real, &args.content) {
        return io_error("write", &args.path, &e);
    }
    ToolOutcome::ok(format!(
        "{} {} ({} bytes, {} lines)",
        if existed { "overwrote" } else { "created" },
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

#[derive(Debug, Deserialize)]
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

pub fn edit_file(ws: &Workspace, args: EditFileArgs, _: &CancellationToken) -> ToolOutcome {
    let real = match resolve(ws, &args.path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    if args.old_string.is_empty() {
        return ToolOutcome::error("old_string is empty; to create a file use write_file");
    }
    let bytes = match fs::read(&real) {
        Ok(b) => b,
        Err(e) => return io_error("read", &args.path, &e),
    };
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
    if let Err(e) = fs::write(&real, &edited) {
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
    fn clip_line_respects_char_boundaries() {
        let long = "日".repeat(1000);
        let clipped = clip_line(&long);
        assert!(clipped.contains("line cut, 3000 bytes long"));
        assert_eq!(clip_line("short"), "short");
    }

    #[test]
    fn binary_sniffing() {
        assert!(looks_binary(b"ab\0cd"));
        assert!(!looks_binary("plain é text".as_bytes()));
    }
}
