//! Search tools: `glob` (find files by name) and `grep` (find lines by
//! regex). Both walk with the `ignore` crate, so they skip what `.gitignore`
//! and `.ignore` skip, and hidden entries, as ripgrep does; both stop early
//! when the call is cancelled.
//!
//! Symlinks are never followed while walking: a symlinked directory pointing
//! out of the workspace is not descended into, and `grep` reads no file
//! through a symlink. `glob` lists a symlink only if it resolves inside.
//! The walk itself goes by path, so every file `grep` reads is opened again
//! through [`Workspace::open`], and every name `glob` lists is checked to be
//! still reachable without a symlink: a directory swapped for a link to
//! `/etc` mid-walk yields neither contents nor names. A directory whose
//! `.gitignore` is a FIFO is not walked: the crate would block opening it.

use std::io::Read;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder};
use regex::RegexBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cap::floor_char_boundary;
use super::registry::{with_args, Args, Run, Runner, ToolDef};
use super::{looks_binary, resolve, ToolLimits, ToolOutcome};
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;
use crate::workspace::{ignore_files_are_plain, Access, Workspace};

pub const GLOB: &str = builtin::GLOB.name;
pub const GREP: &str = builtin::GREP.name;

pub const GLOB_TOOL: ToolDef = ToolDef {
    facts: builtin::GLOB,
    spec: |_| glob_spec(),
    args: Args::of::<GlobArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(GLOB, arguments, |args| glob(ws, args, limits, cancel))
    }),
};

pub const GREP_TOOL: ToolDef = ToolDef {
    facts: builtin::GREP,
    spec: |_| grep_spec(),
    args: Args::of::<GrepArgs>(),
    runner: Runner::Toolbox,
    run: Run::Blocking(|ws, arguments, limits, cancel| {
        with_args(GREP, arguments, |args| grep(ws, args, limits, cancel))
    }),
};

const MAX_GLOB_RESULTS: usize = 1000;
const DEFAULT_GREP_RESULTS: usize = 200;
const MAX_GREP_RESULTS: usize = 2000;
/// Files larger than this are skipped by grep: they are logs or data, and
/// reading them whole would stall the call.
const MAX_GREP_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Matching lines are shortened to this many bytes in grep output.
const MAX_GREP_LINE_BYTES: usize = 300;

/// The walk of `base`, or a refusal when an ignore file on the way is not
/// a file (see [`ignore_files_are_plain`]); directories below with such a
/// file are skipped.
fn walker(ws: &Workspace, base: &Path) -> Result<ignore::Walk, ToolOutcome> {
    ws.check_walk(base)
        .map_err(|e| ToolOutcome::error(format!("refusing to search: {e}")))?;
    Ok(WalkBuilder::new(base)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| {
            !e.file_type().is_some_and(|t| t.is_dir()) || ignore_files_are_plain(e.path()).is_ok()
        })
        .build())
}

/// The workspace-relative form of a walked path, as the model should write it.
fn relative(ws: &Workspace, path: &Path) -> String {
    path.strip_prefix(ws.root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A glob without `/` matches file names at any depth (`*.rs`); one with `/`
/// matches the path relative to the search directory (`src/**/*.rs`).
fn compile_glob(pattern: &str) -> Result<(GlobMatcher, bool), ToolOutcome> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| (g.compile_matcher(), pattern.contains('/')))
        .map_err(|e| ToolOutcome::error(format!("invalid glob {pattern:?}: {e}")))
}

fn glob_matches(matcher: &(GlobMatcher, bool), base: &Path, entry: &DirEntry) -> bool {
    let (glob, by_path) = matcher;
    if *by_path {
        entry
            .path()
            .strip_prefix(base)
            .is_ok_and(|rel| glob.is_match(rel))
    } else {
        glob.is_match(entry.file_name())
    }
}

pub fn glob_spec() -> ToolSpec {
    ToolSpec {
        name: GLOB.into(),
        description: format!(
            "Find files by name. A pattern without `/` matches file names at any depth \
             (`*.rs`, `Cargo.toml`); a pattern with `/` matches paths relative to `path` \
             (`src/**/*.rs`, where `*` stays within one directory and `**` spans any). \
             Skips hidden and .gitignored files. Returns workspace-relative paths, sorted, \
             at most {MAX_GLOB_RESULTS}."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern, e.g. `*.rs` or `src/**/mod.rs`."},
                "path": {"type": "string", "description": "Directory to search, relative to the workspace root. Default: the root."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GlobArgs {
    pattern: String,
    path: Option<String>,
}

pub fn glob(
    ws: &Workspace,
    args: GlobArgs,
    _: &ToolLimits,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let path = args.path.unwrap_or_else(|| ".".into());
    let base = match resolve(ws, &path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let matcher = match compile_glob(&args.pattern) {
        Ok(m) => m,
        Err(e) => return e,
    };
    let mut found = Vec::new();
    let mut total = 0usize;
    let walk = match walker(ws, &base) {
        Ok(walk) => walk,
        Err(refusal) => return refusal,
    };
    for entry in walk.flatten() {
        if cancel.is_cancelled() {
            return ToolOutcome::error("cancelled");
        }
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() || !glob_matches(&matcher, &base, &entry) {
            continue;
        }
        let rel = relative(ws, entry.path());
        let inside = if kind.is_symlink() {
            ws.resolve(&rel).is_ok()
        } else {
            ws.still_inside(entry.path())
        };
        if !inside {
            continue;
        }
        total += 1;
        if found.len() < MAX_GLOB_RESULTS {
            found.push(rel);
        }
    }
    if found.is_empty() {
        return ToolOutcome::ok(format!("no files match {:?} in {path}", args.pattern));
    }
    let mut out = found.join("\n");
    if total > found.len() {
        out.push_str(&format!(
            "\n[... {} more files; narrow the pattern or path]",
            total - found.len()
        ));
    }
    ToolOutcome::ok(out)
}

pub fn grep_spec() -> ToolSpec {
    ToolSpec {
        name: GREP.into(),
        description: format!(
            "Search file contents with a regular expression (Rust regex syntax, matched per \
             line). Output lines are `path:line:text`, paths workspace-relative. Skips \
             hidden, .gitignored and binary files. Stops after `max_results` matches \
             (default {DEFAULT_GREP_RESULTS}, at most {MAX_GREP_RESULTS})."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression, e.g. `fn\\s+main`."},
                "path": {"type": "string", "description": "File or directory to search, relative to the workspace root. Default: the root."},
                "glob": {"type": "string", "description": "Only search files matching this glob (same rules as the glob tool), e.g. `*.rs`."},
                "case_insensitive": {"type": "boolean", "description": "Match case-insensitively. Default false."},
                "max_results": {"type": "integer", "minimum": 1, "description": format!("Stop after this many matching lines. Default {DEFAULT_GREP_RESULTS}.")}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    max_results: Option<usize>,
}

pub fn grep(
    ws: &Workspace,
    args: GrepArgs,
    _: &ToolLimits,
    cancel: &CancellationToken,
) -> ToolOutcome {
    let path = args.path.unwrap_or_else(|| ".".into());
    let base = match resolve(ws, &path) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let regex = match RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive)
        .build()
    {
        Ok(r) => r,
        Err(e) => return ToolOutcome::error(format!("invalid regex {:?}: {e}", args.pattern)),
    };
    let filter = match args.glob.as_deref().map(compile_glob).transpose() {
        Ok(f) => f,
        Err(e) => return e,
    };
    let max = args
        .max_results
        .unwrap_or(DEFAULT_GREP_RESULTS)
        .clamp(1, MAX_GREP_RESULTS);
    let mut out = String::new();
    let mut count = 0usize;
    let walk = match walker(ws, &base) {
        Ok(walk) => walk,
        Err(refusal) => return refusal,
    };
    for entry in walk.flatten() {
        if cancel.is_cancelled() {
            return ToolOutcome::error("cancelled");
        }
        // `is_file` is false for symlinks: none is read through.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if filter
            .as_ref()
            .is_some_and(|f| !glob_matches(f, &base, &entry))
        {
            continue;
        }
        let rel = relative(ws, entry.path());
        let Some(bytes) = read_for_grep(ws, &rel) else {
            continue;
        };
        if looks_binary(&bytes) {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if i % 4096 == 4095 && cancel.is_cancelled() {
                return ToolOutcome::error("cancelled");
            }
            if !regex.is_match(line) {
                continue;
            }
            if count == max {
                out.push_str(&format!(
                    "[stopped after {max} matches; narrow the pattern or path, or raise max_results]\n"
                ));
                return ToolOutcome::ok(out);
            }
            count += 1;
            out.push_str(&format!("{rel}:{}:{}\n", i + 1, shorten(line)));
        }
    }
    if count == 0 {
        return ToolOutcome::ok(format!("no matches for {:?} in {path}", args.pattern));
    }
    ToolOutcome::ok(out)
}

/// A walked file's bytes, opened through the workspace (so the file read
/// is the one inside, a regular file, at most [`MAX_GREP_FILE_BYTES`]);
/// `None` for anything else, which grep skips.
fn read_for_grep(ws: &Workspace, rel: &str) -> Option<Vec<u8>> {
    let opened = ws.open(rel, Access::Read).ok()?;
    if opened.metadata.len() > MAX_GREP_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    opened
        .file
        .take(MAX_GREP_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

fn shorten(line: &str) -> &str {
    &line[..floor_char_boundary(line, MAX_GREP_LINE_BYTES)]
}
