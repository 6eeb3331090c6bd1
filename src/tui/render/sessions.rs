//! The session picker (`/sessions`): one row per session, newest first,
//! each rewind and fork under the session it came from, with its title,
//! age, size and what it came from.

use std::time::{Duration, SystemTime};

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use crate::protocol::{branch_kind, repeats_title, SessionInfo};
use crate::safe_text;
use crate::tui::overlay::SessionPicker;

const TITLE: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const SELECTED: Style = Style::new().bg(Color::Blue).fg(Color::White);

/// How long ago `rfc3339` was, in the largest whole unit: `3m ago`.
pub fn age(rfc3339: &str, now: SystemTime) -> String {
    let Ok(then) = humantime::parse_rfc3339_weak(rfc3339) else {
        return "?".into();
    };
    let secs = now.duration_since(then).unwrap_or(Duration::ZERO).as_secs();
    match secs {
        0..60 => "just now".into(),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// What a session row says after its title: age, size, and marks.
fn about(s: &SessionInfo, foreign: bool, now: SystemTime) -> String {
    let entries = match s.entries {
        1 => "1 entry".to_owned(),
        n => format!("{n} entries"),
    };
    let mut parts = vec![age(&s.updated_at, now), entries];
    if foreign {
        parts.push("other workspace".into());
    }
    if s.compacted_from.is_some() {
        parts.push("compacted".into());
    }
    match branch_kind(s) {
        Some("rewind") => parts.push("rewound".into()),
        Some(_) => parts.push("forked".into()),
        None => {}
    }
    if s.current {
        parts.push("current".into());
    }
    parts.join(" · ")
}

/// `text` cut to `width` columns, with `…` where it was cut.
pub(super) fn cut(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    for c in text.chars() {
        if out.width() + 2 > width {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// The picker's rows at `width`, and the row of the selected session.
pub fn lines(picker: &SessionPicker, width: u16, now: SystemTime) -> (Vec<Line<'static>>, usize) {
    let width = usize::from(width).max(1);
    let mut out = vec![
        Line::from(vec![
            Span::styled("Sessions", TITLE),
            Span::styled("  Enter resume · f fork · Esc close", DIM),
        ]),
        Line::default(),
    ];
    if let Some(theirs) = picker
        .sessions
        .get(picker.selected)
        .filter(|_| picker.confirming)
        .and_then(|s| picker.foreign(s))
    {
        let warn = Style::new().fg(Color::Yellow);
        let here = picker.workspace.as_deref().unwrap_or("?");
        for text in [
            format!(
                "  This session is of the workspace {}",
                safe_text::line(theirs)
            ),
            format!("  and this pod works in {}.", safe_text::line(here)),
            "  Press the key again to resume it over these files; Esc keeps the current one."
                .to_owned(),
        ] {
            out.push(Line::styled(cut(&text, width), warn));
        }
        out.push(Line::default());
    }
    if picker.sessions.is_empty() {
        out.push(Line::styled("  (no sessions)", DIM));
    }
    let mut selected_row = 0;
    for (i, (s, tree)) in picker.sessions.iter().zip(&picker.rows).enumerate() {
        let id: String = s.session_id.to_string().chars().take(8).collect();
        let about = about(s, picker.foreign(s).is_some(), now);
        // A branch shows its title only when it is not the one above's.
        let title = if repeats_title(&picker.sessions, tree) {
            String::new()
        } else {
            s.shown_title(&picker.sessions)
                .unwrap_or_else(|| "(no messages)".into())
        };
        let fixed = 2 + id.len() + 2 + tree.guide.width() + 2 + about.width();
        let title = cut(&title, width.saturating_sub(fixed).max(8));
        let row = format!(
            "{} {id}  {}{title}  ",
            if s.current { "●" } else { " " },
            tree.guide
        );
        if i == picker.selected {
            selected_row = out.len();
        }
        out.push(row_line(row, about, width, i == picker.selected));
    }
    (out, selected_row)
}

/// A picker's row: `row` on the left, `about` dimmed at the right edge of
/// `width`, the whole row highlighted when selected.
pub(super) fn row_line(row: String, about: String, width: usize, selected: bool) -> Line<'static> {
    let pad = " ".repeat(width.saturating_sub(row.width() + about.width()));
    if selected {
        Line::styled(format!("{row}{pad}{about}"), SELECTED)
    } else {
        Line::from(vec![
            Span::raw(row),
            Span::raw(pad),
            Span::styled(about, DIM),
        ])
    }
}

/// Draws the picker over `area`, scrolled to keep the selection in view.
pub fn draw(frame: &mut Frame<'_>, area: Rect, picker: &SessionPicker, now: SystemTime) {
    draw_rows(frame, area, lines(picker, area.width, now));
}

/// Draws a picker's rows over `area`, scrolled to keep the selected row
/// (the second of the pair) in view.
pub(super) fn draw_rows(
    frame: &mut Frame<'_>,
    area: Rect,
    (lines, selected): (Vec<Line<'static>>, usize),
) {
    let height = usize::from(area.height);
    let skip = (selected + 1).saturating_sub(height);
    let visible: Vec<Line<'static>> = lines.into_iter().skip(skip).take(height).collect();
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(visible), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_people_say_them() {
        let now = humantime::parse_rfc3339("2026-01-02T00:00:00Z").unwrap();
        assert_eq!(age("2026-01-01T23:59:30Z", now), "just now");
        assert_eq!(age("2026-01-01T23:55:00Z", now), "5m ago");
        assert_eq!(age("2026-01-01T21:00:00Z", now), "3h ago");
        assert_eq!(age("2025-12-30T00:00:00Z", now), "3d ago");
        assert_eq!(age("garbage", now), "?");
    }
}
