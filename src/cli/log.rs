//! `pod log`: a session log, readably. Reads the files directly, so it works
//! whether or not the pod is running; with `--url` it asks the pod instead
//! (the snapshot for the current session, `get_session` for others).

use std::process::ExitCode;

use anyhow::Context as _;
use uuid::Uuid;

use super::args::LogArgs;
use super::Paths;
use crate::protocol::{AssistantItem, LogEntry, SegmentView};
use crate::store::{self, log_file, pointer, LogFile};

pub fn run(name: &str, paths: &Paths, args: LogArgs) -> anyhow::Result<ExitCode> {
    if paths.is_remote() {
        return super::runtime()?.block_on(remote(paths, args));
    }
    let sessions = paths.data_dir.join("sessions");
    let session = match &args.session {
        Some(query) => store::sessions::resolve(&sessions, query)?,
        None => {
            let ptr = pointer::path(&paths.data_dir.join("pods"), name);
            pointer::read(&ptr)?
                .with_context(|| format!("pod {name:?} has no session yet ({})", ptr.display()))?
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

/// `pod log --url`: the sessions as the pod serves them.
async fn remote(paths: &Paths, args: LogArgs) -> anyhow::Result<ExitCode> {
    use crate::protocol::{Event, Method, Request};
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
            sink.send(&Request::with_id(
                Method::GetSession { session_id: query },
                "log",
            ))
            .await?;
            let (id, lines) = loop {
                match events.next().await {
                    Some(Ok(Event::Response(r))) if r.request_id.as_deref() == Some("log") => {
                        break (
                            r.session_id.unwrap_or_default(),
                            r.entries.unwrap_or_default(),
                        )
                    }
                    Some(Ok(Event::Error {
                        message,
                        request_id: Some(id),
                        ..
                    })) if id == "log" => {
                        eprintln!("pod: {message}");
                        return Ok(ExitCode::from(super::connect::exit::FAILED));
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e.into()),
                    None => anyhow::bail!("the pod closed the connection before it answered"),
                }
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
        // Continuation lines are indented under the text, so the seq and
        // kind columns stay readable for multi-line messages.
        let described = describe(entry);
        let text = crate::safe_text::lines(&described);
        let mut lines = text.lines();
        writeln!(out, "{seq:>5}  {}", lines.next().unwrap_or(""))?;
        for line in lines {
            writeln!(out, "{:18}{line}", "")?;
        }
    }
    Ok(())
}

/// `AGENTS.md` (or `CLAUDE.md`) as the model got it: the file's name (the
/// text's first line) and size, then every line, so the log shows exactly
/// which instructions were in force.
fn project_instructions(text: &str) -> String {
    let (file, body) = text.split_once('\n').unwrap_or((text, ""));
    let lines = body.lines().count();
    format!("instructions {} ({lines} lines)\n{body}", file.trim())
        .trim_end()
        .to_owned()
}

/// One readable line (or a few) per entry.
fn describe(entry: &LogEntry) -> String {
    match entry {
        LogEntry::SessionStart {
            created_at,
            compacted_from,
            ..
        } => match compacted_from {
            Some(from) => format!("session start {created_at}, compacted from {from}"),
            None => format!("session start {created_at}"),
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
            format!("user       {}", parts.concat())
        }
        LogEntry::AssistantItems { items } => items
            .iter()
            .map(|item| match item {
                AssistantItem::Text { text } => format!("assistant  {text}"),
                AssistantItem::Reasoning { text } => format!("reasoning  {text}"),
                AssistantItem::ToolCall {
                    name, arguments, ..
                } => format!("tool call  {name} {arguments}"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        LogEntry::ToolResults { results } => results
            .iter()
            .map(|r| {
                let first = r.output.lines().next().unwrap_or("");
                let lines = r.output.lines().count();
                let mark = if r.is_error {
                    "tool error "
                } else {
                    "tool result"
                };
                // The first line, and how many more there are: a count of
                // one would read as part of the output.
                match lines {
                    0 | 1 => format!("{mark} {first}"),
                    2 => format!("{mark} {first} (+1 line)"),
                    n => format!("{mark} {first} (+{} lines)", n - 1),
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        LogEntry::HookInjectedItems { items } => items
            .iter()
            .map(|i| match i.source.as_str() {
                "project_instructions" => project_instructions(&i.text),
                source => format!("[{source}] {}", i.text),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        LogEntry::TurnEnd {
            reason,
            usage,
            error,
            ..
        } => {
            let mut line = format!("turn end   {}", reason.as_str());
            if let Some(u) = usage {
                line.push_str(&format!(
                    " ({} in / {} out tokens)",
                    u.input_tokens, u.output_tokens
                ));
            }
            if let Some(e) = error {
                let code = serde_json::to_string(&e.code).unwrap_or_default();
                line.push_str(&format!(
                    "\n           {}: {}",
                    code.trim_matches('"'),
                    e.message
                ));
            }
            line
        }
        LogEntry::ApprovalRequest {
            call_id,
            summary,
            reason,
            ..
        } => format!("approval?  {summary}  [{call_id}, {reason}]"),
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
                "decision   {} {} by {}",
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
            line
        }
        LogEntry::ModelChange {
            provider, model, ..
        } => {
            format!("model      {provider}/{model}")
        }
        LogEntry::RuleRevoked { rule, client, .. } => match client {
            Some(client) => format!("revoked    {rule} ({client})"),
            None => format!("revoked    {rule}"),
        },
        LogEntry::Checkpoint {
            checkpoint,
            error,
            reason,
            changes,
            ..
        } => {
            let reason = serde_json::to_string(reason).unwrap_or_default();
            match (checkpoint, error) {
                (Some(id), _) if changes.is_empty() => {
                    format!(
                        "checkpoint {} {}",
                        reason.trim_matches('"'),
                        &id[..id.len().min(12)]
                    )
                }
                (Some(id), _) => format!(
                    "checkpoint {} {} ({})",
                    reason.trim_matches('"'),
                    &id[..id.len().min(12)],
                    crate::checkpoint::notes::summary(changes)
                ),
                (None, error) => format!(
                    "checkpoint {} not taken: {}",
                    reason.trim_matches('"'),
                    error.as_deref().unwrap_or("unknown error")
                ),
            }
        }
        LogEntry::Rewind {
            files_restored,
            conflicts,
            not_restored,
            conversation,
            ..
        } => format!(
            "rewind     {}",
            crate::checkpoint::notes::rewind(
                files_restored,
                conflicts,
                not_restored,
                *conversation
            )
        ),
        LogEntry::Unknown => "(unknown entry)".into(),
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
            "instructions AGENTS.md (2 lines)\n# Rules\nrun cargo fmt"
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
        assert_eq!(
            describe(&result("created new.txt (15 bytes, 2 lines)")),
            "tool result created new.txt (15 bytes, 2 lines)"
        );
        assert_eq!(describe(&result("a\nb")), "tool result a (+1 line)");
        assert_eq!(describe(&result("a\nb\nc")), "tool result a (+2 lines)");
    }
}
