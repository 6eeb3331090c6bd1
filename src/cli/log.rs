//! `pod log`: a session log, readably. Reads the files directly, so it works
//! whether or not the pod is running; with `--url`, or a `--socket` a pod
//! listens on, it asks that pod instead (the snapshot for the current
//! session, `get_session` for others): the pod named by the flag may keep
//! its sessions in a data directory other than this command's.

use std::process::ExitCode;

use anyhow::Context as _;
use uuid::Uuid;

use super::args::LogArgs;
use super::Paths;
use crate::protocol::{AssistantItem, LogEntry, SegmentView};
use crate::store::{self, log_file, pointer, LogFile};

/// Why `pod log` found no session for `name`: the usual cause is a pod that
/// keeps its files in another data directory (its `serve` had a
/// `--data-dir` this command was not given), so say which one was read.
fn no_session(name: &str, paths: &Paths, pointer: &std::path::Path) -> String {
    format!(
        "pod {name:?} has no session in the data directory {} (no {}); a pod started with \
         another --data-dir keeps its sessions there: give the same --data-dir (or set \
         POD_DATA_DIR) to read them",
        paths.data_dir.display(),
        pointer.display()
    )
}

pub fn run(name: &str, paths: &Paths, args: LogArgs) -> anyhow::Result<ExitCode> {
    let socket_given = !paths.socket_in_default_dir;
    if paths.is_remote() || (socket_given && !super::connect::nobody_listens(&paths.socket)) {
        return super::runtime()?.block_on(through_pod(paths, args));
    }
    let sessions = paths.data_dir.join("sessions");
    let session = match &args.session {
        Some(query) => store::sessions::resolve(&sessions, query)?,
        None => {
            let ptr = pointer::path(&paths.data_dir.join("pods"), name);
            pointer::read(&ptr)?
                .with_context(|| no_session(name, paths, &ptr))?
                .session_id
        }
    };
    let mut chain = vec![session];
    if args.chain {
        while let Some(earlier) = compacted_from(&sessions, chain[chain.len() - 1])? {
            chain.push(earlier);
        }
        chain.reverse();
    }
    let mut out = std::io::stdout().lock();
    for id in chain {
        let recovered = log_file::read_lines(&LogFile::path_for(&sessions, id))?;
        print_session(&mut out, id, &recovered, args.json)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `pod log --url` or `--socket`: the sessions as the pod serves them.
async fn through_pod(paths: &Paths, args: LogArgs) -> anyhow::Result<ExitCode> {
    use crate::client::Refusal;
    use crate::protocol::{answer::Lines, Method};
    let (mut events, mut sink) = match super::connect::connect(&paths.endpoint).await? {
        Ok(connection) => connection,
        Err(code) => return Ok(code),
    };
    let snapshot = super::connect::snapshot(&mut events, &paths.endpoint).await?;
    let mut chain = Vec::new();
    let mut next = match &args.session {
        Some(query) => Some(query.clone()),
        None => {
            let lines = snapshot.entries;
            chain.push((snapshot.session_id, lines));
            None
        }
    };
    loop {
        if let Some(query) = next.take() {
            let method = Method::GetSession { session_id: query };
            let (id, lines) =
                match super::connect::ask::<Lines>(&mut events, &mut sink, method).await? {
                    Ok(answer) => (answer.session_id, answer.entries),
                    Err(Refusal::Refused { message, .. }) => {
                        eprintln!("pod: {message}");
                        return Ok(ExitCode::from(super::connect::exit::FAILED));
                    }
                    Err(other) => return Err(other.into()),
                };
            chain.push((id, lines));
        }
        let earlier = match chain.last().and_then(|(_, lines)| lines.first()) {
            Some(crate::protocol::LogLine {
                entry: LogEntry::SessionStart { compacted_from, .. },
                ..
            }) if args.chain => *compacted_from,
            _ => None,
        };
        match earlier {
            Some(id) => next = Some(id.to_string()),
            None => break,
        }
    }
    chain.reverse();
    let mut out = std::io::stdout().lock();
    for (id, lines) in chain {
        let recovered = crate::store::Recovered {
            lines: lines
                .iter()
                .map(|line| serde_json::to_vec(line).map(Into::into))
                .collect::<Result<_, _>>()?,
            entries: lines.into_iter().map(|line| line.entry).collect(),
            truncated_tail: None,
        };
        print_session(&mut out, id, &recovered, args.json)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn compacted_from(sessions: &std::path::Path, id: Uuid) -> anyhow::Result<Option<Uuid>> {
    let recovered = log_file::read_lines(&LogFile::path_for(sessions, id))?;
    Ok(match recovered.entries.first() {
        Some(LogEntry::SessionStart { compacted_from, .. }) => *compacted_from,
        _ => None,
    })
}

fn print_session(
    out: &mut impl std::io::Write,
    id: Uuid,
    recovered: &crate::store::Recovered,
    json: bool,
) -> std::io::Result<()> {
    if json {
        for line in &recovered.lines {
            out.write_all(line)?;
            out.write_all(b"\n")?;
        }
        return Ok(());
    }
    writeln!(out, "── session {id}")?;
    for (seq, entry) in recovered.entries.iter().enumerate() {
        write_entry(out, seq, entry)?;
    }
    Ok(())
}

/// An entry's rows, its seq on the first.
fn write_entry(out: &mut impl std::io::Write, seq: usize, entry: &LogEntry) -> std::io::Result<()> {
    for (i, (kind, text)) in describe(entry).into_iter().enumerate() {
        let seq = if i == 0 {
            seq.to_string()
        } else {
            String::new()
        };
        write_row(out, &seq, &kind, &text)?;
    }
    Ok(())
}

/// The width of the kind column: the longest kind `pod log` names itself
/// (`[compact_summary]`). A longer one — a hook's own source — is cut
/// with `…`, so that the text column starts at the same place on every
/// row and the log reads as a table.
const KIND_WIDTH: usize = 17;

/// One entry's row: the seq right-aligned, the kind in its column, the
/// text; the text's further lines indented under its first, so the seq
/// and kind columns stay readable for multi-line messages. Kind and text
/// are both sanitised: either can come from a model, a tool or a hook.
fn write_row(
    out: &mut impl std::io::Write,
    seq: &str,
    kind: &str,
    text: &str,
) -> std::io::Result<()> {
    use unicode_width::UnicodeWidthStr as _;
    let kind = fit(&crate::safe_text::line(kind), KIND_WIDTH);
    let pad = KIND_WIDTH.saturating_sub(kind.width());
    let text = crate::safe_text::lines(text);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let row = format!("{seq:>5}  {kind}{:pad$} {first}", "");
    writeln!(out, "{}", row.trim_end())?;
    for line in lines {
        writeln!(out, "{:indent$}{line}", "", indent = 5 + 2 + KIND_WIDTH + 1)?;
    }
    Ok(())
}

/// `text` cut to `width` columns, ending in `…` when cut.
fn fit(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar as _, UnicodeWidthStr as _};
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `AGENTS.md` (or `CLAUDE.md`) as the model got it: the file's name (the
/// text's first line) and size, then every line, so the log shows exactly
/// which instructions were in force.
fn project_instructions(text: &str) -> String {
    let (file, body) = text.split_once('\n').unwrap_or((text, ""));
    let lines = body.lines().count();
    format!("{} ({lines} lines)\n{body}", file.trim())
        .trim_end()
        .to_owned()
}

/// Each entry as rows of a kind and a text (a few rows when it has several
/// items; a text may have several lines).
fn describe(entry: &LogEntry) -> Vec<(String, String)> {
    let row = |kind: &str, text: String| vec![(kind.to_owned(), text)];
    match entry {
        LogEntry::SessionStart {
            created_at,
            compacted_from,
            ..
        } => match compacted_from {
            Some(from) => row(
                "session start",
                format!("{created_at}, compacted from {from}"),
            ),
            None => row("session start", created_at.to_string()),
        },
        LogEntry::UserInput { segments, .. } => {
            let parts: Vec<String> = segments
                .iter()
                .map(|s| match s.view() {
                    SegmentView::Text { text } => text.to_owned(),
                    SegmentView::Paste { id, text } => format!(
                        "[Clipboard #{id} | {} chars, {} lines]",
                        text.chars().count(),
                        text.lines().count()
                    ),
                    SegmentView::FileRef { path } => format!("@{path}"),
                    SegmentView::KnowledgeRef { slug } => format!("#{slug}"),
                    SegmentView::WorkflowInvoke { slug, args } => format!("/{slug} {args}"),
                    SegmentView::Image { blob, name, .. } => {
                        format!("[image: {} {blob}]", name.unwrap_or("unnamed"))
                    }
                    SegmentView::Unknown { kind } => format!("[unknown input: kind={kind}]"),
                })
                .collect();
            row("user", parts.concat())
        }
        LogEntry::AssistantItems { items } => items
            .iter()
            .map(|item| match item {
                AssistantItem::Text { text } => ("assistant".into(), text.clone()),
                AssistantItem::Reasoning { text } => ("reasoning".into(), text.clone()),
                AssistantItem::ToolCall {
                    name, arguments, ..
                } => ("tool call".into(), format!("{name} {arguments}")),
            })
            .collect(),
        LogEntry::ToolResults { results } => results
            .iter()
            .map(|r| {
                let first = r.output.lines().next().unwrap_or("");
                let lines = r.output.lines().count();
                let mark = if r.is_error {
                    "tool error"
                } else {
                    "tool result"
                };
                // The first line, and how many more there are: a count of
                // one would read as part of the output.
                let text = match lines {
                    0 | 1 => first.to_owned(),
                    2 => format!("{first} (+1 line)"),
                    n => format!("{first} (+{} lines)", n - 1),
                };
                (mark.to_owned(), text)
            })
            .collect(),
        LogEntry::HookInjectedItems { items } => items
            .iter()
            .map(|i| match i.source.as_str() {
                "project_instructions" => ("instructions".into(), project_instructions(&i.text)),
                source => (format!("[{source}]"), i.text.clone()),
            })
            .collect(),
        LogEntry::TurnEnd {
            reason,
            usage,
            error,
            ..
        } => {
            let mut line = reason.as_str().to_owned();
            if let Some(u) = usage {
                line.push_str(&format!(
                    " ({} in / {} out tokens)",
                    u.input_tokens, u.output_tokens
                ));
            }
            if let Some(e) = error {
                let code = serde_json::to_string(&e.code).unwrap_or_default();
                line.push_str(&format!("\n{}: {}", code.trim_matches('"'), e.message));
            }
            row("turn end", line)
        }
        LogEntry::AgentStarted { name, task, .. } => {
            row("agent", format!("{name} started: {task}"))
        }
        LogEntry::AgentTurnEnd {
            name, reason, text, ..
        } => row("agent end", format!("{name}: {}\n{text}", reason.as_str())),
        LogEntry::ApprovalRequest {
            call_id,
            summary,
            reason,
            ..
        } => row("approval?", format!("{summary}  [{call_id}, {reason}]")),
        LogEntry::ApprovalDecision {
            call_id,
            decision,
            scope,
            by,
            rule,
            client,
            remote,
            message,
        } => {
            let mut line = format!(
                "{} {} by {}",
                serde_json::to_string(decision)
                    .unwrap_or_default()
                    .trim_matches('"'),
                call_id,
                serde_json::to_string(by)
                    .unwrap_or_default()
                    .trim_matches('"'),
            );
            if let Some(client) = client {
                line.push_str(&format!(" ({client})"));
            }
            if let Some(remote) = remote {
                line.push_str(&format!(" from {remote}"));
            }
            match scope {
                crate::protocol::Scope::Session => line.push_str(" for the session"),
                crate::protocol::Scope::Always => line.push_str(" always"),
                _ => {}
            }
            if let Some(rule) = rule {
                line.push_str(&format!(" [{rule}]"));
            }
            if let Some(message) = message {
                line.push_str(&format!(": {message}"));
            }
            row("decision", line)
        }
        LogEntry::ModelChange {
            provider, model, ..
        } => row("model", format!("{provider}/{model}")),
        LogEntry::RuleRevoked { rule, client, .. } => match client {
            Some(client) => row("revoked", format!("{rule} ({client})")),
            None => row("revoked", rule.clone()),
        },
        LogEntry::Checkpoint {
            checkpoint,
            error,
            reason,
            changes,
            ..
        } => {
            let reason = serde_json::to_string(reason).unwrap_or_default();
            // The id is hex, but it comes from the disk: cut it on a
            // character, never in one.
            let short = |id: &str| id.chars().take(12).collect::<String>();
            let text = match (checkpoint, error) {
                (Some(id), _) if changes.is_empty() => {
                    format!("{} {}", reason.trim_matches('"'), short(id))
                }
                (Some(id), _) => format!(
                    "{} {} ({})",
                    reason.trim_matches('"'),
                    short(id),
                    crate::protocol::notes::summary(changes)
                ),
                (None, error) => format!(
                    "{} not taken: {}",
                    reason.trim_matches('"'),
                    error.as_deref().unwrap_or("unknown error")
                ),
            };
            row("checkpoint", text)
        }
        LogEntry::Rewind {
            files_restored,
            conflicts,
            not_restored,
            conversation,
            ..
        } => row(
            "rewind",
            crate::protocol::notes::rewind(files_restored, conflicts, not_restored, *conversation),
        ),
        LogEntry::Unknown => row(
            "unknown",
            "(an entry of a kind this version does not know)".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::InjectedItem;

    #[test]
    fn project_instructions_show_their_file_and_text() {
        let entry = LogEntry::HookInjectedItems {
            items: vec![InjectedItem {
                source: "project_instructions".into(),
                text: "AGENTS.md\n# Rules\nrun cargo fmt\n".into(),
            }],
        };
        assert_eq!(
            describe(&entry),
            [(
                "instructions".to_owned(),
                "AGENTS.md (2 lines)\n# Rules\nrun cargo fmt".to_owned()
            )]
        );
    }

    #[test]
    fn a_tool_result_shows_its_first_line_and_how_many_follow() {
        let result = |output: &str| LogEntry::ToolResults {
            results: vec![crate::protocol::ToolResult {
                call_id: "c".into(),
                output: output.into(),
                is_error: false,
            }],
        };
        let text = |output: &str| describe(&result(output))[0].1.clone();
        assert_eq!(
            text("created new.txt (15 bytes, 2 lines)"),
            "created new.txt (15 bytes, 2 lines)"
        );
        assert_eq!(text("a\nb"), "a (+1 line)");
        assert_eq!(text("a\nb\nc"), "a (+2 lines)");
    }

    /// QA, "the first hour" item 16: `checkpoint turn_start`, `tool
    /// result`, `session start` and `[environment]` ran past the kind
    /// column. Every row's text now starts in the same column; a kind too
    /// long for it is cut with `…`; escapes stay inert.
    #[test]
    fn kinds_are_one_column_wide() {
        let entries = [
            LogEntry::HookInjectedItems {
                items: vec![
                    InjectedItem {
                        source: "environment".into(),
                        text: "cwd /w".into(),
                    },
                    InjectedItem {
                        source: "a-hook-with-a-long-name\u{1b}[2J".into(),
                        text: "two\nlines \u{1b}]52;c;x\u{7}".into(),
                    },
                ],
            },
            LogEntry::ToolResults {
                results: vec![crate::protocol::ToolResult {
                    call_id: "c".into(),
                    output: "ok".into(),
                    is_error: false,
                }],
            },
            LogEntry::ModelChange {
                provider: "openai".into(),
                model: "gpt-4o".into(),
                at: "2026-01-01T00:00:00Z".into(),
            },
        ];
        let mut out = Vec::new();
        for (seq, entry) in entries.iter().enumerate() {
            write_entry(&mut out, seq, entry).unwrap();
        }
        let out = String::from_utf8(out).unwrap();
        let rows: Vec<&str> = out.lines().collect();
        assert_eq!(
            rows,
            [
                "    0  [environment]     cwd /w",
                "       [a-hook-with-a-l… two",
                "                         lines \\e]52;c;x\\x07",
                "    1  tool result       ok",
                "    2  model             openai/gpt-4o",
            ]
        );
    }
}
