//! How each block of the conversation looks: its rows at a given width.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::markdown;
use super::wrap::{wrap, wrap_text};
use crate::protocol::{Level, Segment, SegmentView};
use crate::tui::composer::paste_label;
use crate::tui::conversation::{short_id, BlockKind, Draft, ToolBlock, PROJECT_INSTRUCTIONS};

pub const PASTE: Style = Style::new().fg(Color::Magenta);
pub const FILE_REF: Style = Style::new().fg(Color::Cyan);
pub const KNOWLEDGE_REF: Style = Style::new().fg(Color::Green);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const USER_MARK: Style = Style::new().fg(Color::Green).add_modifier(Modifier::BOLD);
const TOOL: Style = Style::new().fg(Color::Blue).add_modifier(Modifier::BOLD);
const ERROR: Style = Style::new().fg(Color::Red);
const INJECTED: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::DIM);

/// Rows shown in a collapsed tool block's output preview, and the argument
/// fields that name what a tool acts on, most telling first.
const KEY_ARGUMENTS: &[&str] = &["command", "path", "pattern", "query", "url", "file"];

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
        } => {
            let label = match compacted_from {
                Some(old) => format!(
                    " session {} · compacted from {} ",
                    short_id(session_id),
                    short_id(old)
                ),
                None => format!(" session {} ", short_id(session_id)),
            };
            out.push(divider(&label, width));
        }
        BlockKind::UnknownEntry => out.push(Line::styled(
            "[an entry of a kind this version cannot show]",
            DIM,
        )),
    }
    out.push(Line::default());
    out
}

/// The rows of the block being streamed: drawn like its confirmed form so
/// that nothing jumps when the entry replaces it.
pub fn layout_draft(draft: &Draft, width: u16) -> Vec<Line<'static>> {
    let w = usize::from(width).max(1);
    let mut out = Vec::new();
    match draft {
        Draft::Text(text) => markdown::render(text, w, Style::new(), &mut out),
        Draft::Reasoning(text) => reasoning(text, w, &mut out),
        Draft::ToolCall {
            name, arguments, ..
        } => {
            let first = [Span::styled(format!("⚙ {name} "), TOOL)];
            let args: String = arguments.chars().take(w * 2).collect();
            wrap(&[Span::styled(args, DIM)], w, &first, &[], &mut out);
        }
    }
    out.push(Line::default());
    out
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
    for segment in segments {
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
            SegmentView::WorkflowInvoke { slug, args: "" } => (format!("/{slug}"), FILE_REF),
            SegmentView::WorkflowInvoke { slug, args } => (format!("/{slug} {args}"), FILE_REF),
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
            let about = format!("{} · {lines} lines", file.trim());
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

/// The argument that says what the call acts on, or the arguments in short.
fn key_argument(arguments: &Value) -> String {
    let Value::Object(map) = arguments else {
        return match arguments {
            Value::Null => String::new(),
            other => other.to_string(),
        };
    };
    KEY_ARGUMENTS
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))
        .map(|s| s.lines().next().unwrap_or("").to_owned())
        .unwrap_or_else(|| arguments.to_string())
}

fn tool_block(tool: &ToolBlock, width: usize, selected: bool, out: &mut Vec<Line<'static>>) {
    let marker = if selected { "▶ " } else { "⚙ " };
    let head = [
        Span::styled(marker, TOOL),
        Span::styled(format!("{} ", tool.name), TOOL),
    ];
    let rest = [Span::raw("    ")];
    let key = key_argument(&tool.arguments);
    let key: String = key.chars().take(width * 3).collect();
    wrap(&[Span::styled(key, DIM)], width, &head, &rest, out);
    let branch = |s: &'static str| [Span::styled(s, DIM)];
    let Some(result) = &tool.result else {
        wrap(
            &[Span::styled("running…", DIM)],
            width,
            &branch("  └ "),
            &rest,
            out,
        );
        return;
    };
    let style = if result.is_error { ERROR } else { Style::new() };
    let lines = result.output.lines().count();
    if tool.expanded {
        if !tool.arguments.is_null() {
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
            Span::styled(format!("{lines} lines"), DIM),
        ]));
        wrap_text(
            &result.output,
            style,
            width,
            &branch("  │ "),
            &branch("  │ "),
            out,
        );
        return;
    }
    let first_line = result.output.lines().next().unwrap_or("");
    let first_line: String = first_line.chars().take(width * 2).collect();
    let mut spans = Vec::new();
    if result.is_error {
        spans.push(Span::styled("error: ", ERROR));
    }
    spans.push(Span::styled(first_line, style));
    if lines > 1 {
        spans.push(Span::styled(format!(" ({lines} lines)"), DIM));
    }
    wrap(&spans, width, &branch("  └ "), &rest, out);
}
