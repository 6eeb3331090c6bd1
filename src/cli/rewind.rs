//! `pod undo`, `pod rewind`, `pod diff` and `pod blame`: clients of the
//! `rewind`, `get_diff` and `get_file` methods. What they need of the log
//! (turns, their messages and checkpoints) comes from the snapshot every
//! connection opens with.

use std::process::ExitCode;

use base64::Engine as _;

use super::connect::{connect, exit, snapshot};
use super::Paths;
use crate::client::{self, EventStream, Refusal, RequestSink};
use crate::protocol::answer::{self, Answer};
use crate::protocol::{
    CheckpointReason, ErrorCode, LogEntry, Method, Response, Segment, SegmentView,
};

/// A refused request: its code and message.
struct Refused(ErrorCode, String);

/// [`client::call`]: the pod's refusal is for the command to say; a
/// connection that ended or failed first ends the command.
async fn call<A: Answer>(
    events: &mut EventStream,
    sink: &mut RequestSink,
    method: Method,
) -> anyhow::Result<Result<A, Refused>> {
    match client::call(events, sink, method).await {
        Ok(response) => Ok(Ok(response)),
        Err(Refusal::Refused { code, message }) => Ok(Err(Refused(code, message))),
        Err(other) => Err(other.into()),
    }
}

/// One turn of the session, as the log shows it.
#[derive(Debug, Clone)]
struct Turn {
    turn_id: Option<String>,
    seq: u64,
    at: String,
    text: String,
    start: Option<String>,
    end: Option<String>,
}

/// The turns of a session's entries, in order.
fn turns(entries: &[crate::protocol::LogLine]) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::new();
    for line in entries {
        match &line.entry {
            LogEntry::UserInput {
                segments,
                at,
                turn_id,
                ..
            } => out.push(Turn {
                turn_id: turn_id.clone(),
                seq: line.seq,
                at: at.clone(),
                text: message_text(segments),
                start: None,
                end: None,
            }),
            LogEntry::Checkpoint {
                checkpoint: Some(id),
                reason,
                ..
            } => {
                if let Some(turn) = out.last_mut() {
                    match reason {
                        CheckpointReason::TurnStart => turn.start = Some(id.clone()),
                        CheckpointReason::TurnEnd => turn.end = Some(id.clone()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn message_text(segments: &[Segment]) -> String {
    segments
        .iter()
        .filter_map(|s| match s.view() {
            SegmentView::Text { text } | SegmentView::Paste { text, .. } => Some(text.to_owned()),
            SegmentView::FileRef { path } => Some(format!("@{path}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The turn a CLI argument names: a turn id, or a unique prefix of at least
/// 4 hex digits after its `t-`.
fn find_turn<'a>(turns: &'a [Turn], query: &str) -> Result<&'a Turn, String> {
    let hex = query.strip_prefix("t-").unwrap_or(query);
    if hex.len() < 4 {
        return Err(format!(
            "{query:?}: give a turn id or at least 4 of its hex digits"
        ));
    }
    let matching: Vec<&Turn> = turns
        .iter()
        .filter(|t| {
            t.turn_id
                .as_deref()
                .and_then(|id| id.strip_prefix("t-"))
                .is_some_and(|id| id.starts_with(hex))
        })
        .collect();
    match matching.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no turn of this session matches {query:?}")),
        _ => Err(format!(
            "{query:?} matches more than one turn; give more digits"
        )),
    }
}

/// Runs `body` against the pod, or says none listens.
fn with_pod<F>(paths: &Paths, body: F) -> anyhow::Result<ExitCode>
where
    F: AsyncFnOnce(
        &mut EventStream,
        &mut RequestSink,
        crate::protocol::Snapshot,
    ) -> anyhow::Result<ExitCode>,
{
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        let snap = snapshot(&mut events, &paths.endpoint).await?;
        body(&mut events, &mut sink, snap).await
    })
}

fn code_name(code: ErrorCode) -> String {
    serde_json::to_string(&code)
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned()
}

fn failed(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("pod: {message}");
    ExitCode::from(exit::FAILED)
}

/// Options every rewinding command takes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Forcing {
    pub force: bool,
    pub kill_jobs: bool,
}

/// `pod undo`: rewind files and conversation to before the last message.
/// All or nothing: when a file the turn changed was also changed by hand
/// (a conflict) and `--force` is not given, nothing is undone — rewinding
/// the conversation alone would leave the files of a turn the model no
/// longer remembers, and move `pod undo --force` to the message before.
pub fn undo(paths: &Paths, forcing: Forcing) -> anyhow::Result<ExitCode> {
    with_pod(paths, async |events, sink, snap| {
        let all = turns(&snap.entries);
        let Some(last) = all.last().map(|t| t.seq) else {
            return Ok(failed("nothing to undo: this session has no message yet"));
        };
        let last_turn = all.last().and_then(|t| t.turn_id.clone());
        let method = rewind_method(Some(last), None, true, true, forcing, true);
        let response = match call::<Response>(events, sink, method).await? {
            Ok(r) => r,
            Err(Refused(code, message)) => {
                return Ok(failed(format!("{message} ({})", code_name(code))))
            }
        };
        let conflicts = response.conflicts.as_deref().unwrap_or_default();
        if conflicts.is_empty() {
            print!("{}", rewind_report(&response, None));
            return Ok(ExitCode::SUCCESS);
        }
        // Stopped only when a daemon wrote one of the turn's files after
        // the pod had checked them, making that conflict.
        print!("{}", stopped_line(&response));
        let mut said = String::from(
            "pod: nothing undone: the last turn changed these files and they were changed \
             outside a turn since:\n",
        );
        for path in conflicts {
            said.push_str(&format!("  {path}\n"));
        }
        said.push_str(
            "The files and the conversation are as they were. `pod undo --force` undoes the \
             same turn, putting those files back as they were before it: the changes made \
             outside the turn are lost, so copy a file aside to keep your version.",
        );
        // `pod diff` alone shows only what the turn changed; from the
        // turn's start to the files as they are now shows both.
        if let Some(id) = last_turn {
            said.push_str(&format!(
                " `pod diff --since {id}` shows what the turn and the later changes did \
                 together, against the files as they are now."
            ));
        }
        eprintln!("{}", crate::safe_text::lines(&said));
        Ok(ExitCode::from(exit::FAILED))
    })
}

/// What `pod rewind` is to do.
pub struct RewindWhat {
    pub seq: Option<u64>,
    pub checkpoint: Option<String>,
    pub files_only: bool,
    pub conversation_only: bool,
    pub forcing: Forcing,
}

/// `pod rewind SEQ [--files-only | --conversation-only]`, `pod rewind
/// --checkpoint ID`.
pub fn rewind(paths: &Paths, what: RewindWhat) -> anyhow::Result<ExitCode> {
    with_pod(paths, async |events, sink, snap| {
        let files = !what.conversation_only;
        let conversation = what.checkpoint.is_none() && !what.files_only;
        let checkpoint = match what.checkpoint.as_deref() {
            Some(query) => match checkpoint_by_prefix(&snap.entries, query) {
                Ok(id) => Some(id),
                Err(why) => return Ok(failed(why)),
            },
            None => None,
        };
        rewind_with(
            events,
            sink,
            what.seq,
            checkpoint,
            files,
            conversation,
            what.forcing,
        )
        .await
    })
}

/// The checkpoint `query` names: a whole id, or a unique prefix of at
/// least 4 characters of one the current session's entries name (as `pod
/// log` shows them, cut short). Anything else goes to the pod as it is,
/// which knows the ancestors' checkpoints too.
fn checkpoint_by_prefix(
    entries: &[crate::protocol::LogLine],
    query: &str,
) -> Result<String, String> {
    if query.chars().count() < 4 {
        return Ok(query.to_owned());
    }
    let mut found: Vec<&str> = Vec::new();
    for line in entries {
        let ids = match &line.entry {
            LogEntry::Checkpoint { checkpoint, .. } => [checkpoint.as_deref(), None],
            LogEntry::Rewind {
                checkpoint,
                checkpoint_before,
                ..
            } => [checkpoint.as_deref(), checkpoint_before.as_deref()],
            _ => continue,
        };
        for id in ids.into_iter().flatten() {
            if id.starts_with(query) && !found.contains(&id) {
                found.push(id);
            }
        }
    }
    match found.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Ok(query.to_owned()),
        _ => Err(format!(
            "checkpoint {query:?} is the start of {} checkpoints' ids; give more characters",
            found.len()
        )),
    }
}

fn rewind_method(
    before_seq: Option<u64>,
    checkpoint: Option<String>,
    files: bool,
    conversation: bool,
    forcing: Forcing,
    abort_on_conflict: bool,
) -> Method {
    let by_checkpoint = checkpoint.is_some();
    Method::Rewind {
        before_seq,
        session_id: None,
        checkpoint,
        files: Some(files),
        conversation: (!by_checkpoint).then_some(conversation),
        force: Some(forcing.force),
        kill_jobs: Some(forcing.kill_jobs),
        abort_on_conflict: abort_on_conflict.then_some(true),
    }
}

async fn rewind_with(
    events: &mut EventStream,
    sink: &mut RequestSink,
    before_seq: Option<u64>,
    checkpoint: Option<String>,
    files: bool,
    conversation: bool,
    forcing: Forcing,
) -> anyhow::Result<ExitCode> {
    let method = rewind_method(before_seq, checkpoint, files, conversation, forcing, false);
    let response = match call::<Response>(events, sink, method).await? {
        Ok(r) => r,
        Err(Refused(code, message)) => {
            return Ok(failed(format!("{message} ({})", code_name(code))))
        }
    };
    // A conversation rewound is in a new session, where `SEQ --force`
    // names another message: only a files-only rewind can be forced again.
    let hint = (!conversation || before_seq.is_none()).then_some("--force restores it");
    print!("{}", rewind_report(&response, hint));
    Ok(ExitCode::SUCCESS)
}

/// The line saying which processes a tool left running the rewind
/// stopped; empty when it stopped none.
fn stopped_line(r: &Response) -> String {
    let Some(pids) = r.processes_stopped.as_deref().filter(|p| !p.is_empty()) else {
        return String::new();
    };
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    format!(
        "stopped {} process{} a tool left running (pid {}), so that none writes over the \
         restored files\n",
        pids.len(),
        if pids.len() == 1 { "" } else { "es" },
        pids.join(", ")
    )
}

/// What a rewind did, as `pod undo`/`pod rewind` print it; `conflict_hint`
/// follows each conflict, when a command can still restore it.
fn rewind_report(r: &Response, conflict_hint: Option<&str>) -> String {
    let mut out = stopped_line(r);
    let restored = r.files_restored.as_deref().unwrap_or_default();
    if restored.is_empty() {
        out.push_str("no file restored\n");
    }
    for f in restored {
        let action = serde_json::to_string(&f.action).unwrap_or_default();
        out.push_str(&format!("{:<8} {}\n", action.trim_matches('"'), f.path));
    }
    for c in r.conflicts.as_deref().unwrap_or_default() {
        let hint = conflict_hint.map(|h| format!(", {h}")).unwrap_or_default();
        out.push_str(&format!(
            "conflict {c} (also changed outside a turn; left as it is{hint})\n"
        ));
    }
    for n in r.not_restored.as_deref().unwrap_or_default() {
        out.push_str(&format!("not restored {}: {}\n", n.path, n.reason));
    }
    if let Some(id) = r.session_id {
        out.push_str(&format!("session {id}\n"));
    }
    out
}

/// `pod diff [TURN]`, `pod diff --since TURN`.
pub fn diff(
    paths: &Paths,
    turn: Option<String>,
    since: Option<String>,
) -> anyhow::Result<ExitCode> {
    with_pod(paths, async |events, sink, snap| {
        let turns = turns(&snap.entries);
        let (from, to) = if let Some(query) = since {
            let turn = match find_turn(&turns, &query) {
                Ok(t) => t,
                Err(e) => return Ok(failed(e)),
            };
            let start = turns
                .iter()
                .skip_while(|t| t.seq < turn.seq)
                .find_map(|t| t.start.clone());
            match start {
                Some(start) => (start, None),
                None => {
                    eprintln!("pod: no turn since then changed files");
                    return Ok(ExitCode::SUCCESS);
                }
            }
        } else {
            let turn = match &turn {
                Some(query) => match find_turn(&turns, query) {
                    Ok(t) => Some(t),
                    Err(e) => return Ok(failed(e)),
                },
                None => turns.iter().rev().find(|t| t.start.is_some()),
            };
            match turn.and_then(|t| t.start.clone().map(|s| (s, t.end.clone()))) {
                Some(pair) => pair,
                None => {
                    eprintln!("pod: no turn of this session changed files");
                    return Ok(ExitCode::SUCCESS);
                }
            }
        };
        let method = Method::GetDiff {
            from,
            to,
            path: None,
            binary: false,
        };
        match call::<answer::Diff>(events, sink, method).await? {
            Ok(r) => {
                let diff = r.diff;
                if diff.is_empty() {
                    // Said, so that an empty output is not taken for a
                    // failure to show one.
                    eprintln!("pod: no file differs: the files are as they were then");
                }
                print!("{diff}");
                if r.truncated {
                    eprintln!("pod: the diff was cut at 4 MiB");
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(Refused(code, message)) => Ok(failed(format!("{message} ({})", code_name(code)))),
        }
    })
}

/// Who wrote a line: a turn (its index in the turns), or no turn.
type Attr = Option<usize>;

/// `pod blame FILE`.
pub fn blame(paths: &Paths, file: std::path::PathBuf) -> anyhow::Result<ExitCode> {
    with_pod(paths, async |events, sink, snap| {
        let workspace = std::path::PathBuf::from(&snap.greeting.workspace);
        let absolute = if file.is_absolute() {
            file.clone()
        } else {
            std::env::current_dir()?.join(&file)
        };
        let absolute = absolute.canonicalize().unwrap_or(absolute);
        let Ok(rel) = absolute.strip_prefix(&workspace) else {
            return Ok(failed(format!(
                "{} is not inside the pod's workspace {}",
                file.display(),
                workspace.display()
            )));
        };
        let rel = rel.to_string_lossy().into_owned();
        let now = match std::fs::read(&absolute) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => return Ok(failed(format!("cannot read {}: {e}", file.display()))),
        };
        let turns = turns(&snap.entries);
        // The file at each checkpoint, with who wrote each line.
        let mut state: Option<(String, Vec<Attr>)> = None;
        let mut seen: std::collections::HashMap<String, (String, Vec<Attr>)> = Default::default();
        let mut current_turn: Option<usize> = None;
        for line in &snap.entries {
            match &line.entry {
                LogEntry::UserInput { .. } => {
                    current_turn = turns.iter().position(|t| t.seq == line.seq);
                }
                LogEntry::Checkpoint {
                    checkpoint: Some(id),
                    reason,
                    ..
                } => {
                    let content = match call::<answer::File>(
                        events,
                        sink,
                        Method::GetFile {
                            checkpoint: id.clone(),
                            path: rel.clone(),
                        },
                    )
                    .await?
                    {
                        Ok(r) => base64::engine::general_purpose::STANDARD
                            .decode(r.content)
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                            .unwrap_or_default(),
                        Err(_) => String::new(),
                    };
                    let by = match reason {
                        CheckpointReason::TurnEnd => current_turn,
                        _ => None,
                    };
                    let next = advance(state.take(), &content, by);
                    seen.insert(id.clone(), next.clone());
                    state = Some(next);
                }
                LogEntry::Rewind {
                    checkpoint: Some(target),
                    files_restored,
                    ..
                } if files_restored.iter().any(|f| f.path == rel) => {
                    if let Some(restored) = seen.get(target) {
                        state = Some(restored.clone());
                    }
                }
                _ => {}
            }
        }
        let (_, attrs) = advance(state, &now, None);
        // The contract's format is for scripts, the file's bytes as they
        // are; a person reading on a terminal gets columns that line up,
        // line numbers, and no control character of the file let through.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            let table = blame_table(&now, &attrs, &turns);
            print!("{}", crate::safe_text::lines(&table));
        } else {
            print!("{}", blame_lines(&now, &attrs, &turns));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The file's lines as `new` has them, each attributed: kept lines keep
/// their writer, inserted ones get `by`.
fn advance(old: Option<(String, Vec<Attr>)>, new: &str, by: Attr) -> (String, Vec<Attr>) {
    let (old_text, old_attrs) = old.unwrap_or_default();
    let diff = similar::TextDiff::from_lines(old_text.as_str(), new);
    let mut attrs = Vec::new();
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Equal => {
                let i = change.old_index().unwrap_or(0);
                attrs.push(old_attrs.get(i).copied().flatten());
            }
            similar::ChangeTag::Insert => attrs.push(by),
            similar::ChangeTag::Delete => {}
        }
    }
    (new.to_owned(), attrs)
}

/// Who wrote each line of `text`: the turn's `<8 hex> <YYYY-MM-DD> <first
/// five words>`, or `None` for a line no turn wrote.
fn writers<'a>(text: &'a str, attrs: &[Attr], turns: &[Turn]) -> Vec<(Option<String>, &'a str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let who = attrs
                .get(i)
                .copied()
                .flatten()
                .and_then(|t| turns.get(t))
                .map(|t| {
                    let id = t.turn_id.as_deref().unwrap_or("t-????????");
                    let hex: String = id.trim_start_matches("t-").chars().take(8).collect();
                    let date: String = t.at.chars().take(10).collect();
                    let words: Vec<&str> = t.text.split_whitespace().take(5).collect();
                    format!("{hex} {date} {}", words.join(" "))
                });
            (who, line)
        })
        .collect()
}

/// `<8 hex> <YYYY-MM-DD> <first five words>│<line>`, or `-│<line>`: the
/// contract's format, for scripts.
fn blame_lines(text: &str, attrs: &[Attr], turns: &[Turn]) -> String {
    writers(text, attrs, turns)
        .into_iter()
        .map(|(who, line)| format!("{}\u{2502}{line}\n", who.as_deref().unwrap_or("-")))
        .collect()
}

/// For a person: the line number, then who wrote it padded to the widest
/// writer, so every `│` and every line of the file line up.
fn blame_table(text: &str, attrs: &[Attr], turns: &[Turn]) -> String {
    use unicode_width::UnicodeWidthStr as _;
    let rows = writers(text, attrs, turns);
    let number_width = rows.len().max(1).to_string().len();
    let who_width = rows
        .iter()
        .map(|(who, _)| who.as_deref().unwrap_or("-").width())
        .max()
        .unwrap_or(1);
    rows.into_iter()
        .enumerate()
        .map(|(i, (who, line))| {
            let who = who.as_deref().unwrap_or("-");
            let pad = " ".repeat(who_width - who.width());
            format!("{:>number_width$} {who}{pad} \u{2502}{line}\n", i + 1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blame_keeps_the_writer_of_kept_lines() {
        let first = advance(None, "a\nb\n", None);
        let second = advance(Some(first), "a\nB\nc\n", Some(0));
        assert_eq!(second.1, [None, Some(0), Some(0)]);
        let turns = [Turn {
            turn_id: Some("t-0123456789ab".into()),
            seq: 1,
            at: "2026-12-01T10:00:00.000Z".into(),
            text: "please fix the   parser now and then".into(),
            start: None,
            end: None,
        }];
        assert_eq!(
            blame_lines(&second.0, &second.1, &turns),
            "-\u{2502}a\n01234567 2026-12-01 please fix the parser now\u{2502}B\n\
             01234567 2026-12-01 please fix the parser now\u{2502}c\n"
        );
        // On a terminal: numbered, and `-` padded to the writers' width.
        let pad = " ".repeat("01234567 2026-12-01 please fix the parser now".len() - 1);
        assert_eq!(
            blame_table(&second.0, &second.1, &turns),
            format!(
                "1 -{pad} \u{2502}a\n2 01234567 2026-12-01 please fix the parser now \u{2502}B\n\
                 3 01234567 2026-12-01 please fix the parser now \u{2502}c\n"
            )
        );
    }
}
