//! The `/agents` picker: the pod this view came from, then the children of
//! the pod in view, each with its state and usage.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::Frame;

use crate::tui::agents::{AgentPicker, Row};

const TITLE: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);

/// The picker's rows at `width`, and the row of the selected one.
pub fn lines(picker: &AgentPicker, width: u16) -> (Vec<Line<'static>>, usize) {
    let width = usize::from(width).max(1);
    let mut out = vec![
        Line::from(vec![
            Span::styled("Agents", TITLE),
            Span::styled("  Enter opens · Esc closes", DIM),
        ]),
        Line::default(),
    ];
    if picker.rows.is_empty() {
        out.push(Line::styled(
            "  (this pod has no child pods: a turn starts them with spawn_agent)",
            DIM,
        ));
    }
    let mut selected_row = 0;
    for (i, row) in picker.rows.iter().enumerate() {
        let (text, about) = match row {
            Row::Back(parent) => (
                format!("  ↩ back to {}", crate::safe_text::line(parent)),
                String::new(),
            ),
            Row::Child(agent) => (
                format!(
                    "  ⎇ {} · {}",
                    crate::safe_text::line(&agent.name),
                    crate::tui::agents::state(agent).0
                ),
                crate::protocol::tokens::usage_line(&agent.usage),
            ),
        };
        if i == picker.selected {
            selected_row = out.len();
        }
        let room = width.saturating_sub(about.chars().count() + 2).max(8);
        let text = super::sessions::cut(&text, room);
        out.push(super::sessions::row_line(
            text,
            about,
            width,
            i == picker.selected,
        ));
    }
    (out, selected_row)
}

/// Draws the picker over `area`, scrolled to keep the selection in view.
pub fn draw(frame: &mut Frame<'_>, area: Rect, picker: &AgentPicker) {
    super::sessions::draw_rows(frame, area, lines(picker, area.width));
}
