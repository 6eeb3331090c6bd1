//! The help screen (`?` on an empty input box, or `/help`): every key,
//! command and input token, and the workspace's workflows.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use super::wrap::wrap;
use crate::tui::commands::BUILTINS;
use crate::tui::composer::MenuItem;

/// Every key the TUI reacts to, as `docs/tui.md` lists them.
const KEYS: &[(&str, &str)] = &[
    (
        "Enter",
        "send the message, or accept the highlighted menu item",
    ),
    ("Tab", "accept the highlighted menu item"),
    ("Alt+Enter, Shift+Enter, Ctrl+J", "new line in the message"),
    (
        "←/→, Ctrl+A / Ctrl+E",
        "move in the message; start / end of the line",
    ),
    (
        "↑/↓",
        "move between lines; on the first / last: the input history; in a menu: choose",
    ),
    (
        "Backspace, Delete",
        "delete (a paste or a reference goes as one piece)",
    ),
    ("Ctrl+U", "clear the whole draft"),
    (
        "Esc",
        "close the menu or this screen; on an empty input box, take back your last queued message; else cancel the running turn",
    ),
    (
        "Esc Esc",
        "on an empty input box while idle: rewind files, conversation or both to before an earlier message",
    ),
    (
        "Shift+Tab",
        "next approval mode: ask → edits → auto → read-only",
    ),
    (
        "y / a / A / n / N",
        "when a tool call waits for approval: allow once / allow for the session / allow always (also written to the config file) / deny (Esc too) / deny with a message for the model (↑/↓, PgUp/PgDn scroll its preview)",
    ),
    (
        "Ctrl+C",
        "clear the draft, else cancel the turn; twice within a second: quit",
    ),
    ("Ctrl+D", "quit (detach; the pod keeps running)"),
    ("PgUp / PgDn, mouse wheel", "scroll"),
    (
        "Home / End, Ctrl+L",
        "top of the conversation / back to the end, following it",
    ),
    (
        "Alt+↑ / Alt+↓",
        "select the previous / next tool call or instructions block",
    ),
    (
        "Ctrl+O",
        "expand or collapse the selected block (the last one if none is)",
    ),
    ("Ctrl+T", "show the model's plan as a checklist, or as one line"),
    ("Ctrl+P", "pause the turn before its next step; again: go on"),
    ("?", "this help (on an empty input box)"),
];

/// What a message can hold besides text.
const TOKENS: &[(&str, &str)] = &[
    (
        "/name args",
        "at the start: a command, or a workflow called with args",
    ),
    ("@path", "a workspace file, read into the model's context"),
    ("#name", "a knowledge file (.pod/knowledge/NAME.md)"),
    ("//text", "send text that starts with /"),
    ("paste", "kept as one piece, shown as [Clipboard #N | …]"),
];

const TITLE: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
const KEY: Style = Style::new().fg(Color::Yellow);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);

/// The help's rows at `width`: sections of two columns, the second
/// wrapping under itself.
pub fn lines(workflows: &[MenuItem], width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width).max(1);
    let mut out = vec![
        Line::from(vec![
            Span::styled("Help", TITLE),
            Span::styled("  Esc closes · ↑/↓ PgUp/PgDn scroll", DIM),
        ]),
        Line::default(),
    ];
    let commands: Vec<(String, String)> = BUILTINS
        .iter()
        .map(|b| {
            let name = match b.args {
                "" => format!("/{}", b.name),
                args => format!("/{} {args}", b.name),
            };
            (name, b.help.to_owned())
        })
        .collect();
    let pairs = |rows: &[(&str, &str)]| -> Vec<(String, String)> {
        rows.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let mut sections = vec![
        ("Keys", pairs(KEYS)),
        ("Commands", commands),
        ("In a message", pairs(TOKENS)),
    ];
    if !workflows.is_empty() {
        let rows = workflows
            .iter()
            .map(|w| {
                (
                    format!("/{}", w.value),
                    w.detail.clone().unwrap_or_default(),
                )
            })
            .collect();
        sections.push(("Workflows (.pod/workflows)", rows));
    }
    for (title, rows) in sections {
        out.push(Line::styled(title, TITLE));
        section(&rows, width, &mut out);
        out.push(Line::default());
    }
    out.pop();
    out
}

/// The widest first column, so that descriptions keep most of the row.
const MAX_KEY_COLUMN: usize = 20;

/// Two columns; the first as wide as its widest entry that fits in
/// [`MAX_KEY_COLUMN`] and a third of the screen; a longer entry has its
/// description on the next row.
fn section(rows: &[(String, String)], width: usize, out: &mut Vec<Line<'static>>) {
    let limit = MAX_KEY_COLUMN.min(width / 3);
    let key_width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .filter(|w| *w <= limit)
        .max()
        .unwrap_or(limit);
    let indent = " ".repeat(key_width + 4);
    for (key, text) in rows {
        let key_cols = key.chars().count();
        let rest = [Span::raw(indent.clone())];
        if key_cols > key_width {
            out.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(key.clone(), KEY),
            ]));
            wrap(&[Span::raw(text.clone())], width, &rest, &rest, out);
        } else {
            let pad = " ".repeat(key_width - key_cols + 2);
            let first = [
                Span::raw("  "),
                Span::styled(key.clone(), KEY),
                Span::raw(pad),
            ];
            wrap(&[Span::raw(text.clone())], width, &first, &rest, out);
        }
    }
}

/// Draws the help over `area`, from row `scroll` (clamped so the last
/// row can reach the bottom but no further); returns the scroll used.
pub fn draw(frame: &mut Frame<'_>, area: Rect, workflows: &[MenuItem], scroll: usize) -> usize {
    let lines = lines(workflows, area.width);
    let scroll = scroll.min(lines.len().saturating_sub(usize::from(area.height)));
    let visible: Vec<Line<'static>> = lines
        .into_iter()
        .skip(scroll)
        .take(usize::from(area.height))
        .collect();
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(visible), area);
    scroll
}
