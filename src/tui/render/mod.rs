//! Drawing: the frame's layout, and the look of each part.
//!
//! The screen is, top to bottom: the conversation (or an overlay such as
//! the help, in its place), a rule, the composer and the status bar. On a terminal too small for all of them the status bar
//! goes last, then the rule, then the conversation; nothing panics at any
//! size, zero included.

pub mod blocks;
mod composer;
pub mod help;
mod highlight;
pub use highlight::preload as preload_highlighting;
pub mod markdown;
mod sessions;
mod status;
mod table;
pub mod wrap;

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::app::App;
use super::overlay::Overlay;

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
    let (rows, cursor) = composer::layout(&app.composer, area.width);
    let wanted = u16::try_from(rows.len().min(COMPOSER_MAX_ROWS)).unwrap_or(1);
    let composer_height = wanted.min(free);
    free -= composer_height;
    let composer_area = Rect {
        y: area.y + free,
        height: composer_height,
        ..area
    };
    composer::draw(frame, composer_area, rows, cursor);
    let rule_height = u16::from(free >= 2);
    let view = Rect {
        height: free - rule_height,
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
            None => {
                let mut rows = app.cache.rows(&app.conversation, view.width);
                let lines = app.viewport.visible(&mut rows, usize::from(view.height));
                frame.render_widget(Paragraph::new(lines), view);
                composer::draw_popup(frame, &app.composer, view);
            }
        }
    }
    if rule_height == 1 {
        let rule_area = Rect {
            y: area.y + view.height,
            height: 1,
            ..area
        };
        frame.render_widget(Paragraph::new(rule(app, area.width)), rule_area);
    }
}

/// The rule above the composer; it says so when the view is not at the end.
fn rule(app: &App, width: u16) -> Line<'static> {
    let width = usize::from(width);
    let dim = Style::new().add_modifier(Modifier::DIM);
    if app.viewport.is_following() {
        return Line::styled("─".repeat(width), dim);
    }
    let label = " ↓ more below · End to follow ";
    let right = width.saturating_sub(2 + label.chars().count());
    let text: String = format!("──{label}{}", "─".repeat(right))
        .chars()
        .take(width)
        .collect();
    Line::styled(text, Style::new().fg(Color::Yellow))
}
