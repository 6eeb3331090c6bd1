//! How each block of the conversation looks: its rows at a given width.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use std::time::Duration;

use super::outcome::{self, Outcome};
use super::wrap::{wrap, wrap_text};
use super::{ansi, diff, markdown};
use crate::protocol::tools;
use crate::protocol::{
    DecidedBy, Decision, ForkPoint, InFlight, Level, Scope, Segment, SegmentView, SwitchReason,
    TurnEndReason, TurnError,
};
use crate::tui::composer::paste_label;
use crate::tui::conversation::{
    short_id, BlockKind, Conversation, DecisionView, RetryView, ToolBlock, PROJECT_INSTRUCTIONS,
};

pub const PASTE: Style = Style::new().fg(Color::Magenta);
pub const FILE_REF: Style = Style::new().fg(Color::Cyan);
pub const KNOWLEDGE_REF: Style = Style::new().fg(Color::Green);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const USER_MARK: Style = Style::new().fg(Color::Green).add_modifier(Modifier::BOLD);
const TOOL: Style = Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD);
const ERROR: Style = Style::new().fg(Color::Red);
const INJECTED: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::DIM);
const RETRY: Style = Style::new().fg(Color::Yellow);
/// The mark of a `bash` call that started a background job.
const JOB: Style = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
/// The lines of an edit's diff that was not applied: grey, not red and
/// green (struck through, code would be hard to read).
const NOT_APPLIED: Style = Style::new().fg(Color::DarkGray);

/// Rows of a file edit's diff shown while its call is collapsed.
const DIFF_ROWS: usize = 6;

/// The rows of one block, ending with a blank separator row.
pub fn layout(kind: &BlockKind, width: u16, selected: bool) -> Vec<Line<'static>> {
    let width = usize::from(width).max(1);
    let mut out = Vec::new();
    match kind {
        BlockKind::User { segments } => user(segments, width, &mut out),
        BlockKind::Assistant { text } => markdown::render(text, width, Style::new(), &mut out),
        BlockKind::Reasoning { text } => reasoning(text, width, &mut out),
        BlockKind::Tool(tool) => tool_block(tool, width, selected, &mut out),
        BlockKind::Injected {
            source,
            text,
            expanded,
        } => injected(source, text, *expanded, selected, width, &mut out),
        BlockKind::Notice { level, text } => {
            let style = match level {
                Level::Info | Level::Unknown => Style::new().fg(Color::Cyan),
                Level::Warn => Style::new().fg(Color::Yellow),
                Level::Error => ERROR,
            };
            wrap_text(text, style, width, &[], &[], &mut out);
        }
        BlockKind::SessionStart {
            session_id,
            compacted_from,
            forked_from,
            switch,
        } => {
            let label = session_label(session_id, *compacted_from, forked_from.as_ref(), *switch);
            out.push(divider(&label, width));
        }
        BlockKind::Decision(d) => decision(d, width, &mut out),
        BlockKind::ModelChange { provider, model } => {
            let text = format!("model: {provider}/{model}");
            wrap_text(&text, INJECTED, width, &[], &[], &mut out);
        }
        BlockKind::TurnEnd {
            reason,
            error,
            duration,
        } => turn_end(*reason, error.as_ref(), *duration, width, &mut out),
        BlockKind::Agent(agent) => agent_block(agent, width, &mut out),
        BlockKind::UnknownEntry => out.push(Line::styled(
            "[an entry of a kind this version cannot show]",
            DIM,
        )),
    }
    out.push(Line::default());
    out
}

/// The rows of the live item: the block being streamed, drawn like its
/// confirmed form so that nothing jumps when the entry replaces it, and
/// the line of a model call being retried.
pub fn layout_live(conversation: &Conversation, width: u16) -> Vec<Line<'static>> {
    let w = usize::from(width).max(1);
    let mut out = Vec::new();
    match conversation.in_flight() {
        Some(InFlight::Text { text }) => markdown::render(text, w, Style::new(), &mut out),
        Some(InFlight::Reasoning { text }) => reasoning(text, w, &mut out),
        Some(InFlight::ToolCall {
            name,
            arguments_so_far,
            ..
        }) => {
            let first = [Span::styled(format!("⚙ {name} "), TOOL)];
            let args: String = arguments_so_far.chars().take(w * 2).collect();
            wrap(&[Span::styled(args, DIM)], w, &first, &[], &mut out);
        }
        Some(InFlight::ToolOutput { .. }) | None => {}
    }
    if let Some(retry) = conversation.retry() {
        retry_line(retry, w, &mut out);
    }
    out.push(Line::default());
    out
}

/// `HTTP 429 · retrying in 2s (2/4)`: the failure's first line, the wait
/// and how many tries are left.
fn retry_line(retry: &RetryView, width: usize, out: &mut Vec<Line<'static>>) {
    let error = retry.error.lines().next().unwrap_or("").trim();
    let error: String = error.chars().take(width * 2).collect();
    let text = format!(
        "{error} · retrying in {} ({}/{})",
        short_duration(Duration::from_millis(retry.delay_ms)),
        retry.attempt,
        retry.max_attempts
    );
    wrap_text(&text, RETRY, width, &[Span::styled("↻ ", RETRY)], &[], out);
}

/// A duration as a person reads it: `0.4s`, `12.5s`, `2m 05s`, `1h 02m`.
pub fn short_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..60 => {
            let s = format!("{:.1}", d.as_secs_f64());
            format!("{}s", s.strip_suffix(".0").unwrap_or(&s))
        }
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// `N lines`, or `1 line`.
pub fn count_lines(n: usize) -> String {
    if n == 1 {
        "1 line".to_owned()
    } else {
        format!("{n} lines")
    }
}

/// The divider's label: the session, and how it came to be.
fn session_label(
    session_id: &uuid::Uuid,
    compacted_from: Option<uuid::Uuid>,
    forked_from: Option<&ForkPoint>,
    switch: Option<SwitchReason>,
) -> String {
    let id = short_id(session_id);
    if let Some(fork) = forked_from {
        let at = fork.seq.map(|s| format!(" at {s}")).unwrap_or_default();
        return format!(
            " forked from {}{at} · session {id} ",
            short_id(&fork.session_id)
        );
    }
    if let Some(old) = compacted_from {
        return format!(" session {id} · compacted from {} ", short_id(&old));
    }
    match switch {
        Some(SwitchReason::New) => format!(" new session {id} "),
        Some(SwitchReason::Resume) => format!(" resumed session {id} "),
        _ => format!(" session {id} "),
    }
}

/// `✓ allowed by tui@host (session: bash:cargo *)`, `✗ denied by pod
/// send: not now`, `✗ denied by policy (bash:rm *)`, `✗ cancelled`.
fn decision(d: &DecisionView, width: usize, out: &mut Vec<Line<'static>>) {
    let (mark, mark_style, verb) = match d.decision {
        Decision::Allow => ("✓ ", Style::new().fg(Color::Green), "allowed"),
        Decision::Deny => ("✗ ", ERROR, "denied"),
        Decision::Unknown => ("· ", DIM, "decided"),
    };
    let mut text = match d.by {
        DecidedBy::Cancel => "cancelled".to_owned(),
        DecidedBy::Policy => format!("{verb} by policy"),
        DecidedBy::Hook => format!("{verb} by {}", d.client.as_deref().unwrap_or("a hook")),
        DecidedBy::User | DecidedBy::Unknown => {
            format!("{verb} by {}", d.client.as_deref().unwrap_or("a client"))
        }
    };
    match (&d.rule, d.scope, d.by) {
        (Some(rule), Scope::Session, _) => text.push_str(&format!(" (session: {rule})")),
        (Some(rule), Scope::Always, _) => text.push_str(&format!(" (always: {rule})")),
        (Some(rule), _, DecidedBy::Policy) => text.push_str(&format!(" ({rule})")),
        _ => {}
    }
    if let Some(message) = d.message.as_deref().filter(|m| !m.is_empty()) {
        text.push_str(&format!(": {message}"));
    }
    let first = [Span::styled(format!("  {mark}"), mark_style)];
    wrap_text(&text, DIM, width, &first, &[Span::raw("    ")], out);
}

/// A turn that did not complete says why, with its error in place; one
/// this client timed says how long it took.
fn turn_end(
    reason: TurnEndReason,
    error: Option<&TurnError>,
    duration: Option<Duration>,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    let took = duration.map(short_duration);
    let label = match reason {
        TurnEndReason::Completed => {
            let text = format!("done in {}", took.unwrap_or_default());
            out.push(Line::styled(text, DIM));
            return;
        }
        TurnEndReason::Unknown => "turn ended",
        TurnEndReason::Cancelled => "turn cancelled",
        TurnEndReason::Error => "turn ended by an error",
        TurnEndReason::MaxSteps => "turn stopped: too many steps",
        TurnEndReason::Interrupted => "turn interrupted: the pod stopped mid-turn",
    };
    let mut text = match took {
        Some(t) => format!("[{label} after {t}]"),
        None => format!("[{label}]"),
    };
    if let Some(e) = error {
        let code = serde_json::to_value(e.code)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "error".into());
        text.push_str(&format!(" {code}: {}", e.message));
    }
    let style = match reason {
        TurnEndReason::Error => ERROR,
        _ => Style::new().fg(Color::Yellow),
    };
    wrap_text(&text, style, width, &[], &[], out);
}

fn divider(label: &str, width: usize) -> Line<'static> {
    let label_width = label.chars().count();
    let left = 2.min(width);
    let right = width.saturating_sub(left + label_width);
    Line::styled(
        format!("{}{label}{}", "─".repeat(left), "─".repeat(right)),
        DIM,
    )
}

fn user(segments: &[Segment], width: usize, out: &mut Vec<Line<'static>>) {
    let mut logical: Vec<Vec<Span<'static>>> = vec![Vec::new()];
    let mut images = 0;
    for (i, segment) in segments.iter().enumerate() {
        let (text, style) = match segment.view() {
            SegmentView::Text { text } => {
                for (i, part) in text.split('\n').enumerate() {
                    if i > 0 {
                        logical.push(Vec::new());
                    }
                    if let Some(line) = logical.last_mut() {
                        line.push(Span::raw(part.to_owned()));
                    }
                }
                continue;
            }
            SegmentView::Paste { id, text } => (paste_label(id, text), PASTE),
            SegmentView::FileRef { path } => (format!("@{path}"), FILE_REF),
            SegmentView::KnowledgeRef { slug } => (format!("#{slug}"), KNOWLEDGE_REF),
            SegmentView::WorkflowInvoke { slug, args } => {
                let mut call = format!("/{slug}");
                if !args.is_empty() {
                    call = format!("{call} {args}");
                }
                // The composer sends the space typed after the call's
                // arguments as part of them (trimmed away): a ref right
                // after it would otherwise be drawn glued to it.
                let next_spaced = match segments.get(i + 1).map(Segment::view) {
                    None => true,
                    Some(SegmentView::Text { text }) => text.starts_with(char::is_whitespace),
                    Some(_) => false,
                };
                if !next_spaced {
                    call.push(' ');
                }
                (call, FILE_REF)
            }
            SegmentView::Image { name, .. } => {
                images += 1;
                (
                    format!(
                        "[Image #{images} | {}]",
                        crate::safe_text::line(name.unwrap_or("image"))
                    ),
                    PASTE,
                )
            }
            SegmentView::Unknown { kind } => (format!("[{kind} input]"), DIM),
        };
        if let Some(line) = logical.last_mut() {
            line.push(Span::styled(text, style));
        }
    }
    let first = [Span::styled("› ", USER_MARK)];
    let rest = [Span::raw("  ")];
    for (i, spans) in logical.iter().enumerate() {
        wrap(
            spans,
            width,
            if i == 0 { &first } else { &rest },
            &rest,
            out,
        );
    }
}

/// What the pod put into the conversation. Project instructions show as
/// one collapsed row naming the file (Ctrl+O shows them, as Markdown); a
/// compaction summary as Markdown under its label; anything else as
/// `[source] text`.
fn injected(
    source: &str,
    text: &str,
    expanded: bool,
    selected: bool,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    match source {
        PROJECT_INSTRUCTIONS => {
            let (file, body) = text.split_once('\n').unwrap_or((text, ""));
            let lines = body.lines().count();
            let marker = match (selected, expanded) {
                (true, _) => "▶ ",
                (false, true) => "▾ ",
                (false, false) => "▸ ",
            };
            let head = [
                Span::styled(marker, INJECTED),
                Span::styled(
                    "project instructions ",
                    INJECTED.add_modifier(Modifier::BOLD),
                ),
            ];
            let about = format!("{} · {}", file.trim(), count_lines(lines));
            wrap(
                &[Span::styled(about, INJECTED)],
                width,
                &head,
                &[Span::raw("  ")],
                out,
            );
            if expanded {
                let gutter = Span::styled("  │ ", INJECTED);
                let mut rows = Vec::new();
                markdown::render(
                    body,
                    width.saturating_sub(4).max(1),
                    Style::new(),
                    &mut rows,
                );
                for row in rows {
                    let mut spans = vec![gutter.clone()];
                    spans.extend(row.spans);
                    out.push(Line::from(spans));
                }
            }
        }
        "compact_summary" => {
            out.push(Line::styled("[compact summary]", INJECTED));
            markdown::render(text, width, Style::new(), out);
        }
        _ => {
            let first = [Span::styled(format!("[{source}] "), INJECTED)];
            wrap_text(text, INJECTED, width, &first, &[], out);
        }
    }
}

fn reasoning(text: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let style = Style::new()
        .fg(Color::DarkGray)
        .add_modifier(Modifier::ITALIC);
    let mut rows = Vec::new();
    markdown::render(text, width.saturating_sub(2).max(1), style, &mut rows);
    for row in rows {
        let mut spans = vec![Span::styled("┊ ", style)];
        spans.extend(row.spans);
        out.push(Line::from(spans));
    }
}

/// What the call acts on, as every client shows it
/// ([`tools::or_arguments`]): its first line.
fn key_argument(name: &str, arguments: &Value) -> String {
    let text = tools::or_arguments(name, arguments);
    text.lines().next().unwrap_or("").to_owned()
}

/// A `bash` call with `background: true`: it started a job.
fn is_background_job(tool: &ToolBlock) -> bool {
    tools::effect(&tool.name) == tools::Effect::RunsCommands
        && tool.arguments.get("background") == Some(&Value::Bool(true))
}

fn tool_block(tool: &ToolBlock, width: usize, selected: bool, out: &mut Vec<Line<'static>>) {
    let marker = if selected { "▶ " } else { "⚙ " };
    let head = [
        Span::styled(marker, TOOL),
        Span::styled(format!("{} ", tool.name), TOOL),
    ];
    let rest = [Span::raw("    ")];
    let key = key_argument(&tool.name, &tool.arguments);
    let key: String = key.chars().take(width * 3).collect();
    // A background job outlives its call, so the call says so: its result
    // is only the job's id, and `pod jobs output` reads what it prints.
    let mut spans = Vec::new();
    if is_background_job(tool) {
        spans.push(Span::styled("background job · ", JOB));
    }
    spans.push(Span::styled(key, DIM));
    wrap(&spans, width, &head, &rest, out);
    let branch = |s: &'static str| [Span::styled(s, DIM)];
    let diff = diff::of_tool(tool);
    if let Some(lines) = &diff {
        // A denied or failed edit changed nothing: its diff is drawn dim,
        // under a label, so it cannot be read as a change that was made.
        let applied = !tool.result.as_ref().is_some_and(|r| r.is_error);
        if !applied {
            let label = "✗ not applied";
            wrap_text(label, ERROR, width, &branch("  │ "), &branch("  │ "), out);
        }
        let shown = if tool.expanded {
            lines.len()
        } else {
            lines.len().min(DIFF_ROWS)
        };
        for line in &lines[..shown] {
            let style = if applied {
                diff::line_style(line)
            } else {
                NOT_APPLIED
            };
            wrap_text(line, style, width, &branch("  │ "), &branch("  │ "), out);
        }
        if shown < lines.len() {
            let n = lines.len() - shown;
            let unit = if n == 1 { "line" } else { "lines" };
            let more = format!("… {n} more {unit} (Ctrl+O)");
            wrap_text(&more, DIM, width, &branch("  │ "), &[], out);
        }
    }
    let Some(result) = &tool.result else {
        if let Some(tail) = &tool.output_tail {
            output_rows(tail, DIM, width, out);
        }
        let running = match tool.elapsed_secs {
            _ if tool.outcome_unknown => {
                "outcome unknown: the connection to the pod was lost".to_owned()
            }
            _ if tool.awaiting_approval => "waiting for approval".to_owned(),
            Some(secs @ 1..) => format!("running… {}", short_duration(Duration::from_secs(secs))),
            _ => "running…".to_owned(),
        };
        wrap(
            &[Span::styled(running, DIM)],
            width,
            &branch("  └ "),
            &rest,
            out,
        );
        return;
    };
    let style = if result.is_error { ERROR } else { Style::new() };
    let lines = ansi::lines(&result.output, style);
    if tool.expanded {
        if diff.is_none() && !tool.arguments.is_null() {
            let args = serde_json::to_string_pretty(&tool.arguments).unwrap_or_default();
            wrap_text(&args, DIM, width, &branch("  │ "), &branch("  │ "), out);
        }
        let label = if result.is_error {
            "  ├ error "
        } else {
            "  ├ "
        };
        out.push(Line::from(vec![
            Span::styled(label, if result.is_error { ERROR } else { DIM }),
            Span::styled(count_lines(result.output.lines().count()), DIM),
        ]));
        for line in &lines {
            wrap(&line.spans, width, &branch("  │ "), &branch("  │ "), out);
        }
        return;
    }
    let spans = summary_spans(tool, result.is_error, lines, width);
    wrap(&spans, width, &branch("  └ "), &rest, out);
}

/// A tool's output under its call, a row (or more, wrapped) per line, in
/// its own colours on `base`.
fn output_rows(text: &str, base: Style, width: usize, out: &mut Vec<Line<'static>>) {
    let gutter = [Span::styled("  │ ", DIM)];
    for line in ansi::lines(text, base) {
        wrap(&line.spans, width, &gutter, &gutter, out);
    }
}

/// The collapsed call's summary line: its outcome, then the line of its
/// output that matters, then how many lines there are (see
/// [`outcome`]): `cancelled after 4s`, `exit 1 · FAILED (failures=1) (9
/// lines)`, `17 lines · use std::io;`.
fn summary_spans(
    tool: &ToolBlock,
    is_error: bool,
    lines: Vec<Line<'static>>,
    width: usize,
) -> Vec<Span<'static>> {
    let plain: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    let summary = outcome::summarise(&tool.name, &plain, is_error);
    let mut line = summary
        .line
        .and_then(|i| lines.into_iter().nth(i))
        .map(|l| skip_and_cut(l.spans, summary.skip, width * 2))
        .unwrap_or_default();
    let mut spans = Vec::new();
    match (
        &summary.outcome,
        outcome::describe(&summary.outcome, tool.ran_for),
    ) {
        (Outcome::Cancelled, Some(said)) => {
            spans.push(Span::styled(said, Style::new().fg(Color::Yellow)));
            return spans;
        }
        (Outcome::Failed, _) if line.is_empty() => spans.push(Span::styled("error", ERROR)),
        (Outcome::Failed, _) => {
            spans.push(Span::styled("error: ", ERROR));
            spans.append(&mut line);
        }
        (_, Some(said)) => {
            spans.push(Span::styled(said, ERROR));
            if !line.is_empty() {
                spans.push(Span::styled(" · ", DIM));
                spans.append(&mut line);
            }
        }
        (_, None) => {
            if summary.lines > 1 {
                spans.push(Span::styled(count_lines(summary.lines), DIM));
                if !line.is_empty() {
                    spans.push(Span::styled(" · ", DIM));
                }
            } else if line.is_empty() {
                spans.push(Span::styled("no output", DIM));
            }
            spans.append(&mut line);
            return spans;
        }
    }
    if summary.lines > 1 {
        spans.push(Span::styled(
            format!(" ({})", count_lines(summary.lines)),
            DIM,
        ));
    }
    spans
}

/// `spans` without their first `skip` bytes and cut to `max` characters.
fn skip_and_cut(spans: Vec<Span<'static>>, mut skip: usize, max: usize) -> Vec<Span<'static>> {
    let mut left = max;
    let mut out = Vec::new();
    for span in spans {
        let text = span.content.as_ref();
        let from = skip.min(text.len());
        skip -= from;
        let text: String = text.get(from..).unwrap_or("").chars().take(left).collect();
        left -= text.chars().count();
        if !text.is_empty() {
            out.push(Span::styled(text, span.style));
        }
    }
    out
}

/// The most rows of a child's task or final text shown in its parent's
/// view: the rest is the child's own (`/agents` opens it).
const AGENT_TEXT_ROWS: usize = 6;

/// A child pod's start or turn end: a header naming it, then its task or
/// final text, cut to a few rows. Every word of it is a model's, so it is
/// shown with visible escapes.
fn agent_block(
    agent: &crate::tui::conversation::AgentView,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    use crate::tui::conversation::AgentEvent;
    let head = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
    let dim = Style::new().add_modifier(Modifier::DIM);
    let name = crate::safe_text::line(&agent.name).into_owned();
    let (header, body, style) = match &agent.event {
        AgentEvent::Started { task } => (
            format!("⎇ agent {name} started · /agents opens it"),
            task.as_str(),
            Style::new(),
        ),
        AgentEvent::TurnEnded {
            reason,
            usage,
            text,
        } => {
            let usage = usage
                .as_ref()
                .map(|u| format!(" · {}", crate::protocol::tokens::usage_line(u)))
                .unwrap_or_default();
            (
                format!("⎇ agent {name}: turn {}{usage}", reason.as_str()),
                text.as_str(),
                dim,
            )
        }
    };
    wrap_text(&header, head, width, &[], &[], out);
    let body = crate::safe_text::lines(body.trim_end());
    let mut rows = Vec::new();
    let indent = [Span::raw("  ")];
    wrap_text(&body, style, width, &indent, &indent, &mut rows);
    let hidden = rows.len().saturating_sub(AGENT_TEXT_ROWS);
    out.extend(rows.into_iter().take(AGENT_TEXT_ROWS));
    if hidden > 0 {
        out.push(Line::styled(
            format!("  … {hidden} more rows in {name}'s own log"),
            dim,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn searches_show_their_pattern() {
        let args = json!({"pattern":"fn main","path":"src"});
        assert_eq!(key_argument("grep", &args), "fn main in src");
        assert_eq!(key_argument("glob", &json!({"pattern":"*.rs"})), "*.rs");
        assert_eq!(key_argument("read_file", &json!({"path":"a.rs"})), "a.rs");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(short_duration(Duration::from_millis(400)), "0.4s");
        assert_eq!(short_duration(Duration::from_secs(2)), "2s");
        assert_eq!(short_duration(Duration::from_secs(125)), "2m 05s");
        assert_eq!(short_duration(Duration::from_secs(3720)), "1h 02m");
        assert_eq!(count_lines(1), "1 line");
    }
}
