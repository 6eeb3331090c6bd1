//! The input box and the `@` completion popup.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthStr;

use super::blocks::{FILE_REF, KNOWLEDGE_REF, PASTE};
use crate::tui::composer::{paste_label, Atom, Composer, MenuItem, TokenKind};

const PROMPT: &str = "› ";
/// What the empty input box says, most needed first: a narrow terminal
/// cuts the end off.
const HINT: &str =
    "? help · Enter send · / commands · @ file · # knowledge · Esc cancel · Ctrl+D detach";
const POPUP_ROWS: usize = 8;

/// The composer's rows at `width`, and the cursor's row and column.
/// Every atom is kept whole on one row (a paste label is not split), and
/// a word that does not fit moves to the next row whole (a word longer
/// than a row is broken): the cursor position is exact either way.
pub fn layout(composer: &Composer, width: u16) -> (Vec<Line<'static>>, (usize, usize)) {
    let width = usize::from(width).max(3);
    let prompt = Span::styled(PROMPT, prompt_style());
    if composer.is_empty() {
        let hint = Span::styled(HINT, Style::new().add_modifier(Modifier::DIM));
        return (vec![Line::from(vec![prompt, hint])], (0, PROMPT.width()));
    }
    let cells: Vec<(String, Style)> = composer.atoms().iter().map(cell).collect();
    let places = place(composer.atoms(), &cells, width);
    let cursor = match places.get(composer.cursor()) {
        Some(&at) => at,
        None => match (places.last(), cells.last()) {
            (Some(&(row, col)), Some((text, _)))
                if composer.atoms().last() != Some(&Atom::Char('\n')) =>
            {
                let col = col + text.width();
                if col >= width {
                    (row + 1, INDENT)
                } else {
                    (row, col)
                }
            }
            (Some(&(row, _)), _) => (row + 1, INDENT),
            _ => (0, PROMPT.width()),
        },
    };
    let rows_needed = places.iter().map(|p| p.0).max().unwrap_or(0).max(cursor.0) + 1;
    let mut rows: Vec<Vec<Span<'static>>> = (0..rows_needed)
        .map(|r| {
            vec![if r == 0 {
                prompt.clone()
            } else {
                Span::raw("  ")
            }]
        })
        .collect();
    for (atom, ((text, style), (row, _))) in
        composer.atoms().iter().zip(cells.into_iter().zip(places))
    {
        if *atom != Atom::Char('\n') {
            rows[row].push(Span::styled(text, style));
        }
    }
    (rows.into_iter().map(Line::from).collect(), cursor)
}

/// Columns after the prompt, and before every wrapped row.
const INDENT: usize = 2;

/// How an atom is drawn.
fn cell(atom: &Atom) -> (String, Style) {
    match atom {
        Atom::Char('\n') => (String::new(), Style::new()),
        Atom::Char(c) if c.is_control() => ("\u{fffd}".to_owned(), Style::new()),
        Atom::Char(c) => (c.to_string(), Style::new()),
        Atom::Paste { id, text } => (paste_label(*id, text), PASTE),
        Atom::FileRef(path) => (format!("@{path}"), FILE_REF),
        Atom::KnowledgeRef(slug) => (format!("#{slug}"), KNOWLEDGE_REF),
        Atom::Image(image) => (image.chip(), PASTE),
    }
}

/// The row and column of every atom. A line break starts a new row; a
/// character that would pass the edge takes the word it ends (the
/// characters since the last blank on its row) to the next row with it,
/// unless that word fills the row from its start.
fn place(atoms: &[Atom], cells: &[(String, Style)], width: usize) -> Vec<(usize, usize)> {
    let mut places: Vec<(usize, usize)> = Vec::with_capacity(atoms.len());
    let (mut row, mut col) = (0, PROMPT.width());
    // Where the current word starts, as an atom index, when it is on this row.
    let mut word: Option<usize> = None;
    for (i, atom) in atoms.iter().enumerate() {
        if *atom == Atom::Char('\n') {
            places.push((row, col));
            (row, col) = (row + 1, INDENT);
            word = None;
            continue;
        }
        let w = cells[i].0.width();
        let is_word_char = matches!(atom, Atom::Char(c) if !c.is_whitespace());
        if col + w > width && col > INDENT {
            match word.filter(|&start| places[start].1 > INDENT) {
                Some(start) if is_word_char => {
                    row += 1;
                    col = INDENT;
                    for k in start..i {
                        places[k] = (row, col);
                        col += cells[k].0.width();
                    }
                }
                _ => {
                    (row, col) = (row + 1, INDENT);
                    word = None;
                }
            }
        }
        if is_word_char {
            word.get_or_insert(i);
        } else {
            word = None;
        }
        places.push((row, col));
        col += w;
    }
    places
}
/// A message on one line, as the queued list shows it: line breaks as
/// spaces, pastes and references as their labels.
pub fn one_line(atoms: &[Atom]) -> String {
    atoms
        .iter()
        .map(|atom| match atom {
            Atom::Char(c) if c.is_whitespace() || c.is_control() => " ".to_owned(),
            other => cell(other).0,
        })
        .collect()
}

fn prompt_style() -> Style {
    Style::new().fg(Color::Green).add_modifier(Modifier::BOLD)
}

/// Draws the composer rows that fit in `area`, scrolled to keep the cursor
/// visible, and places the terminal cursor.
pub fn draw(frame: &mut Frame<'_>, area: Rect, rows: Vec<Line<'static>>, cursor: (usize, usize)) {
    let height = usize::from(area.height);
    if height == 0 {
        return;
    }
    let skip = (cursor.0 + 1).saturating_sub(height);
    let visible: Vec<Line<'static>> = rows.into_iter().skip(skip).take(height).collect();
    frame.render_widget(Paragraph::new(visible), area);
    let x = area.x
        + u16::try_from(cursor.1)
            .unwrap_or(u16::MAX)
            .min(area.width.saturating_sub(1));
    let y = area.y + u16::try_from(cursor.0 - skip).unwrap_or(0);
    frame.set_cursor_position((x, y));
}

/// The menu of candidates, drawn just above the composer: each value with
/// its sigil, then its description, dimmed, in a column of its own. In the
/// `/` menu a workflow (one of the workspace's `.pod/workflows`, listed by
/// the pod) is cyan and tagged `workflow`, so that `/deploy` is not taken
/// for a built-in command. When there are more candidates than rows, a
/// last row says how many are above and below and where the selection is
/// (`↑ 2 more · ↓ 5 more · 3/15`), as nothing else would show that the
/// menu scrolls.
pub fn draw_popup(frame: &mut Frame<'_>, composer: &Composer, above: Rect) {
    let Some(c) = composer.completion().filter(|c| !c.items.is_empty()) else {
        return;
    };
    let scrolls = c.items.len() > POPUP_ROWS;
    let rows = c.items.len().min(POPUP_ROWS);
    // The scroll row goes first when the space is short: without it, the
    // menu would seem to end where it is cut.
    let space = usize::from(above.height);
    let rows = rows.min(space.saturating_sub(usize::from(scrolls)));
    let height = u16::try_from(rows + usize::from(scrolls))
        .unwrap_or(0)
        .min(above.height);
    if height == 0 {
        return;
    }
    let sigil = match c.token.kind {
        TokenKind::Command => '/',
        TokenKind::File => '@',
        TokenKind::Knowledge => '#',
    };
    let is_workflow = |item: &MenuItem| c.token.kind == TokenKind::Command && !item.builtin;
    let max_width = usize::from(above.width);
    let value_width = c
        .items
        .iter()
        .map(|i| i.value.width() + 1)
        .max()
        .unwrap_or(0)
        .min(max_width / 2)
        .max(1);
    let first = (c.selected + 1).saturating_sub(rows);
    let mut lines: Vec<Line<'static>> = c
        .items
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, item)| {
            let (style, detail_style) = if i == c.selected {
                let s = Style::new().bg(Color::Blue).fg(Color::White);
                (s, s)
            } else {
                let s = Style::new().bg(Color::Black).fg(Color::Gray);
                (s, s.fg(Color::DarkGray))
            };
            let workflow = is_workflow(item);
            let value_style = match (workflow, i == c.selected) {
                (true, false) => style.fg(Color::Cyan),
                _ => style,
            };
            let value = format!("{sigil}{}", item.value);
            let mut spans = vec![Span::styled(
                format!(" {value:<value_width$} "),
                value_style,
            )];
            let detail = item.detail.as_deref().filter(|d| !d.is_empty());
            if workflow {
                spans.push(Span::styled(
                    " workflow",
                    value_style.add_modifier(Modifier::ITALIC),
                ));
                let detail = detail.map_or(String::new(), |d| format!(" · {d}"));
                spans.push(Span::styled(format!("{detail} "), detail_style));
            } else if let Some(detail) = detail {
                spans.push(Span::styled(format!(" {detail} "), detail_style));
            }
            Line::from(spans)
        })
        .collect();
    if scrolls {
        let above_count = first;
        let below = c.items.len().saturating_sub(first + rows);
        let mut parts = Vec::new();
        if above_count > 0 {
            parts.push(format!("↑ {above_count} more"));
        }
        if below > 0 {
            parts.push(format!("↓ {below} more"));
        }
        parts.push(format!("{}/{}", c.selected + 1, c.items.len()));
        let style = Style::new().bg(Color::Black).fg(Color::DarkGray);
        lines.push(Line::styled(format!(" {} ", parts.join(" · ")), style));
    }
    let width = lines
        .iter()
        .map(Line::width)
        .max()
        .map_or(0, |w| u16::try_from(w).unwrap_or(u16::MAX))
        .min(above.width);
    // Every row is as wide as the widest, so the menu is one box.
    let lines = lines
        .into_iter()
        .map(|mut line| {
            let pad = usize::from(width).saturating_sub(line.width());
            let style = line.spans.last().map(|s| s.style).unwrap_or_default();
            line.spans.push(Span::styled(" ".repeat(pad), style));
            line
        })
        .collect::<Vec<_>>();
    let area = Rect {
        x: above.x,
        y: above.y + above.height - height,
        width,
        height,
    };
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines), area);
}
