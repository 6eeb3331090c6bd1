//! Word wrapping of styled text into rows of a fixed width.
//!
//! Done here instead of by ratatui's `Paragraph` wrapping because the
//! viewport must know every block's exact height before drawing, so that it
//! lays out and draws only the rows on screen.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use crate::safe_text;

/// Wraps one logical line (no `\n` inside) to `width` columns, putting
/// `first` before the first row and `rest` before every following row.
pub fn wrap(
    spans: &[Span<'_>],
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
    out: &mut Vec<Line<'static>>,
) {
    let prefix_width = |p: &[Span]| p.iter().map(Span::width).sum::<usize>();
    let mut avail = width.saturating_sub(prefix_width(first)).max(1);
    let rest_avail = width.saturating_sub(prefix_width(rest)).max(1);
    let mut rows: Vec<Vec<(char, Style)>> = Vec::new();
    let mut row: Vec<(char, Style)> = Vec::new();
    let mut row_width = 0;
    let mut break_at: Option<usize> = None;
    for (c, style) in cells(spans) {
        let w = c.width().unwrap_or(0);
        if row_width + w > avail && !row.is_empty() {
            if c == ' ' {
                rows.push(std::mem::take(&mut row));
                row_width = 0;
                break_at = None;
                avail = rest_avail;
                continue;
            }
            let tail = match break_at {
                Some(b) if b < row.len() => row.split_off(b),
                _ => Vec::new(),
            };
            rows.push(std::mem::replace(&mut row, tail));
            row_width = row.iter().map(|(c, _)| c.width().unwrap_or(0)).sum();
            break_at = None;
            avail = rest_avail;
            if row_width + w > avail && !row.is_empty() {
                rows.push(std::mem::take(&mut row));
                row_width = 0;
            }
        }
        row.push((c, style));
        row_width += w;
        if c == ' ' {
            break_at = Some(row.len());
        }
    }
    rows.push(row);
    for (i, row) in rows.into_iter().enumerate() {
        let mut line: Vec<Span<'static>> = if i == 0 { first } else { rest }.to_vec();
        merge(row, &mut line);
        out.push(Line::from(line));
    }
}

/// The characters to draw, with their styles. Tabs become spaces and every
/// other character unsafe on a terminal its visible escape (`\e`, `\u202e`;
/// [`crate::safe_text`], which every CLI uses too), so that tool output can
/// never send escape sequences to the terminal nor reorder what is shown.
fn cells<'a>(spans: &'a [Span<'_>]) -> impl Iterator<Item = (char, Style)> + 'a {
    spans.iter().flat_map(|span| {
        span.content.chars().flat_map(move |c| {
            let (c, n, escape) = match c {
                '\t' => (' ', 4, None),
                '\r' | '\n' => (' ', 0, None),
                c if safe_text::is_unsafe(c) => (c, 0, Some(safe_text::escape(c))),
                c => (c, 1, None),
            };
            std::iter::repeat_n(c, n)
                .chain(escape.into_iter().flatten())
                .map(move |c| (c, span.style))
        })
    })
}

fn merge(row: Vec<(char, Style)>, line: &mut Vec<Span<'static>>) {
    let mut text = String::new();
    let mut style = None;
    for (c, s) in row {
        if style.is_some_and(|st| st != s) {
            line.push(Span::styled(
                std::mem::take(&mut text),
                style.unwrap_or_default(),
            ));
        }
        style = Some(s);
        text.push(c);
    }
    if let Some(s) = style {
        line.push(Span::styled(text, s));
    }
}

/// Splits text on line breaks and wraps each line in one style.
pub fn wrap_text(
    text: &str,
    style: Style,
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
    out: &mut Vec<Line<'static>>,
) {
    for (i, line) in text.split('\n').enumerate() {
        let p = if i == 0 { first } else { rest };
        wrap(&[Span::styled(line, style)], width, p, rest, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        wrap(&[Span::raw(text)], width, &[], &[], &mut out);
        out.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn breaks_at_spaces_and_hard_breaks_long_words() {
        assert_eq!(rows("hello big world", 9), ["hello big", "world"]);
        assert_eq!(rows("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(rows("", 4), [""]);
        assert_eq!(rows("ab cdefgh", 4), ["ab ", "cdef", "gh"]);
    }

    #[test]
    fn wide_chars_and_controls() {
        assert_eq!(rows("日本語", 4), ["日本", "語"]);
        assert_eq!(rows("a\x1b[2Jb", 10), ["a\\e[2Jb"]);
        assert_eq!(rows("x", 0), ["x"]);
    }

    #[test]
    fn prefixes_hang() {
        let mut out = Vec::new();
        wrap(
            &[Span::raw("one two three")],
            8,
            &[Span::raw("• ")],
            &[Span::raw("  ")],
            &mut out,
        );
        let rows: Vec<String> = out.iter().map(|l| l.to_string()).collect();
        assert_eq!(rows, ["• one ", "  two ", "  three"]);
    }
}
