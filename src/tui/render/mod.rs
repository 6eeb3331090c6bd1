//! Drawing: the frame's layout, and the look of each part.
//!
//! The screen is, top to bottom: the conversation (or an overlay such as
//! the help, in its place), the model's plan and this client's queued
//! messages, a rule (with
//! the sandbox and the workspace), the composer — or the approval panel in
//! its place while a tool call waits — and the status bar. On a terminal
//! too small for all of them the status bar goes last, then the rule, then
//! the conversation; nothing panics at any size, zero included.

mod agents;
mod ansi;
mod approval;
pub mod blocks;
mod composer;
mod diff;
pub mod help;
mod highlight;
pub use highlight::preload as preload_highlighting;
pub mod markdown;
mod outcome;
mod rewind;
mod sessions;
mod status;
mod table;
pub mod wrap;

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::app::App;
use super::overlay::Overlay;
use crate::protocol::SandboxMode;

/// The most rows the composer takes before it scrolls.
const COMPOSER_MAX_ROWS: usize = 8;

pub fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let status_row = Rect {
        y: area.y + area.height - 1,
        height: 1,
        ..area
    };
    frame.render_widget(Paragraph::new(status::status_line(app)), status_row);
    let mut free = area.height - 1;
    let bottom_height = draw_bottom(frame, app, area, free);
    free -= bottom_height;
    let rule_height = u16::from(free >= 2);
    let mut queued = queued_lines(app, area.width);
    // The plan sits right above the queued messages, as part of that band,
    // and the child pods above the plan.
    if let Some(items) = super::plan::latest(&app.conversation) {
        let mut plan = super::plan::lines(&items, app.plan_expanded, area.width);
        plan.append(&mut queued);
        queued = plan;
    }
    if let Some(status) = &app.status {
        let mut agents = super::agents::lines(status, area.width);
        agents.append(&mut queued);
        queued = agents;
    }
    let queued_height = u16::try_from(queued.len())
        .unwrap_or(0)
        .min(free.saturating_sub(rule_height + 1));
    let view = Rect {
        height: free - rule_height - queued_height,
        ..area
    };
    app.view_size = (view.width, view.height);
    if view.height > 0 {
        match &mut app.overlay {
            Some(Overlay::Help { scroll }) => {
                *scroll = help::draw(frame, view, &app.workflows, *scroll);
            }
            Some(Overlay::Sessions(picker)) => {
                sessions::draw(frame, view, picker, std::time::SystemTime::now());
            }
            Some(Overlay::Rewind(picker)) => rewind::draw(frame, view, picker),
            Some(Overlay::Agents(picker)) => agents::draw(frame, view, picker),
            None => {
                let mut rows = app.cache.rows(&app.conversation, view.width);
                let lines = app.viewport.visible(&mut rows, usize::from(view.height));
                frame.render_widget(Paragraph::new(lines), view);
                composer::draw_popup(frame, &app.composer, view);
            }
        }
    }
    if queued_height > 0 {
        let queued_area = Rect {
            y: area.y + view.height,
            height: queued_height,
            ..area
        };
        let skip = queued.len() - usize::from(queued_height);
        let lines: Vec<Line<'static>> = queued.into_iter().skip(skip).collect();
        frame.render_widget(Paragraph::new(lines), queued_area);
    }
    if rule_height == 1 {
        let rule_area = Rect {
            y: area.y + view.height + queued_height,
            height: 1,
            ..area
        };
        frame.render_widget(Paragraph::new(rule(app, area.width)), rule_area);
    }
}

/// Draws the input box, or the approval panel in its place, at the bottom
/// of the `free` rows above the status bar; returns the rows it took.
fn draw_bottom(frame: &mut Frame<'_>, app: &mut App, area: Rect, free: u16) -> u16 {
    let at = |height: u16| Rect {
        y: area.y + free - height,
        height,
        ..area
    };
    let pending = app.conversation.pending_approvals();
    if let Some((request, waiting)) = app.approval.current(pending) {
        let request = request.clone();
        let max_rows = usize::from(free)
            .saturating_sub(2)
            .max(usize::from(free) * 2 / 3);
        let (lines, cursor) =
            approval::lines(&mut app.approval, &request, waiting, area.width, max_rows);
        let height = u16::try_from(lines.len()).unwrap_or(free).min(free);
        let panel = at(height);
        frame.render_widget(Paragraph::new(lines), panel);
        if let Some((row, col)) = cursor {
            let x = area.x
                + u16::try_from(col)
                    .unwrap_or(0)
                    .min(area.width.saturating_sub(1));
            let y = panel.y
                + u16::try_from(row)
                    .unwrap_or(0)
                    .min(height.saturating_sub(1));
            frame.set_cursor_position((x, y));
        }
        return height;
    }
    let (rows, cursor) = composer::layout(&app.composer, area.width);
    let wanted = u16::try_from(rows.len().min(COMPOSER_MAX_ROWS)).unwrap_or(1);
    let height = wanted.min(free);
    composer::draw(frame, at(height), rows, cursor);
    height
}

/// This client's queued messages, dim, oldest first, with how to take
/// the last one back.
fn queued_lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let dim = Style::new().add_modifier(Modifier::DIM);
    let count = app.queued().len();
    app.queued()
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let hint = if i + 1 == count {
                " · Esc takes it back"
            } else {
                ""
            };
            let text = composer::one_line(&q.atoms);
            let room = width.saturating_sub(12 + hint.len());
            let mut text: String = text.chars().take(room).collect();
            if text.chars().count() == room && room > 0 {
                text.pop();
                text.push('…');
            }
            Line::styled(format!("  queued: {text}{hint}"), dim)
        })
        .collect()
}

/// The rule above the input box: whether the view is at the end, then the
/// sandbox and the workspace at its right.
fn rule(app: &App, width: u16) -> Line<'static> {
    let width = usize::from(width);
    let dim = Style::new().add_modifier(Modifier::DIM);
    let mut left = vec![Span::styled("──", dim)];
    if !app.viewport.is_following() {
        left.push(Span::styled(
            " ↓ more below · End to follow ",
            Style::new().fg(Color::Yellow),
        ));
    }
    let mut right = Vec::new();
    if let Some(g) = &app.greeting {
        let sandbox = &g.sandbox;
        let (text, style) = match (sandbox.mode, sandbox.available) {
            (SandboxMode::Off, _) => ("sandbox: off".to_owned(), Style::new().fg(Color::Red)),
            (mode, false) => (
                format!("sandbox: {} NOT enforced", mode.as_str()),
                Style::new().fg(Color::Red),
            ),
            (mode, true) => (format!("sandbox: {}", mode.as_str()), dim),
        };
        right.push(Span::styled(format!(" {text}"), style));
        right.push(Span::styled(
            format!(" · {} ", home_relative(&g.workspace)),
            dim,
        ));
        right.push(Span::styled("──", dim));
    }
    let used = |spans: &[Span]| spans.iter().map(Span::width).sum::<usize>();
    if used(&left) + used(&right) > width {
        right.clear();
    }
    let fill = width.saturating_sub(used(&left) + used(&right));
    left.push(Span::styled("─".repeat(fill), dim));
    left.extend(right);
    Line::from(left)
}

/// `path` with the home directory written `~`.
fn home_relative(path: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    let home = home.trim_end_matches('/');
    match path.strip_prefix(home) {
        Some(rest) if !home.is_empty() && (rest.is_empty() || rest.starts_with('/')) => {
            format!("~{rest}")
        }
        _ => path.to_owned(),
    }
}
