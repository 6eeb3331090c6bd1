//! The rewind picker (Esc Esc): the session's user messages, newest first,
//! each with what its turn changed in the files; then the choice of files,
//! conversation or both.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use crate::tui::overlay::RewindPicker;

const TITLE: Style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);

/// The picker's rows at `width`, and the row of the selected message.
pub fn lines(picker: &RewindPicker, width: u16) -> (Vec<Line<'static>>, usize) {
    let width = usize::from(width).max(1);
    let keys = if picker.choosing {
        "  back to just before it: f files · c conversation · b/Enter both · Esc back"
    } else {
        "  Enter choose · Esc close"
    };
    let mut out = vec![
        Line::from(vec![Span::styled("Rewind", TITLE), Span::styled(keys, DIM)]),
        Line::default(),
    ];
    if picker.inputs.is_empty() {
        out.push(Line::styled("  (no message in this session yet)", DIM));
    }
    let mut selected_row = 0;
    for (i, mark) in picker.inputs.iter().enumerate() {
        let about = mark
            .changes
            .clone()
            .unwrap_or_else(|| "no file changes".into());
        let text = crate::safe_text::line(&mark.text);
        let room = width.saturating_sub(about.width() + 6).max(8);
        let text = super::sessions::cut(&text, room);
        if i == picker.selected {
            selected_row = out.len();
        }
        out.push(super::sessions::row_line(
            format!("  {text}"),
            about,
            width,
            i == picker.selected,
        ));
    }
    (out, selected_row)
}

/// Draws the picker over `area`, scrolled to keep the selection in view.
pub fn draw(frame: &mut Frame<'_>, area: Rect, picker: &RewindPicker) {
    super::sessions::draw_rows(frame, area, lines(picker, area.width));
}
