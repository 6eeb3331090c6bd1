//! Tool output as a terminal would colour it.
//!
//! Commands colour their output (`cargo`, `pytest`, `grep --color`, `ls
//! --color`), and showing those colours as `\e[31m` noise made the output
//! hard to read. Colours and text attributes (SGR sequences) become styles,
//! parsed by `ansi-to-tui`; every other escape sequence — cursor moves,
//! erasing, titles, hyperlinks, clipboard — is removed first, so that no
//! output can move the cursor or draw over the lines around it. Whatever
//! control character is left (a bell, a lone `\r`, a bidi override) is
//! still shown as its visible escape by [`super::wrap`], which draws every
//! row.

use std::borrow::Cow;

use ansi_to_tui::IntoText;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

/// The logical lines of `text` (split at `\n`), each as styled spans: the
/// colours its SGR sequences set, on top of `base`. A reset goes back to
/// `base`, not to the terminal's default, so that an error's output stays
/// red around the colours it sets itself.
pub fn lines(text: &str, base: Style) -> Vec<Line<'static>> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    let kept = keep_only_sgr(text);
    if !kept.contains(ESC) {
        return kept
            .split('\n')
            .map(|line| Line::from(Span::styled(line.to_owned(), base)))
            .collect();
    }
    let Ok(mut parsed) = kept.as_bytes().into_text() else {
        // Unreadable colours: the text without them is still worth showing.
        return strip(&kept)
            .split('\n')
            .map(|line| Line::from(Span::styled(line.to_owned(), base)))
            .collect();
    };
    // The parser gives no line for what follows a final `\n`; `split`
    // does, and both paths must count lines alike.
    if kept.ends_with('\n') {
        parsed.lines.push(Line::default());
    }
    parsed
        .lines
        .into_iter()
        .map(|line| {
            let spans: Vec<Span<'static>> = line
                .spans
                .into_iter()
                .map(|span| {
                    let style = base.patch(relative(span.style));
                    Span::styled(span.content.into_owned(), style)
                })
                .collect();
            Line::from(spans)
        })
        .collect()
}

/// `text` with every escape sequence removed, colours included: for the
/// places that match on output's words.
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ESC {
            skip_sequence(&mut chars);
        } else {
            out.push(c);
        }
    }
    out
}

/// An SGR style as a change to the base style. The parser's styles are
/// cumulative (each span's `add_modifier` is every attribute in force), and
/// it spells "back to the default" as `Color::Reset` and a removal of every
/// modifier, which here both mean "as the base has it" — a reset inside a
/// dimmed tail must not make the rest of it bright.
fn relative(style: Style) -> Style {
    let unset = |c: Option<Color>| c.filter(|c| *c != Color::Reset);
    Style {
        fg: unset(style.fg),
        bg: unset(style.bg),
        underline_color: unset(style.underline_color),
        add_modifier: style.add_modifier,
        sub_modifier: Modifier::empty(),
    }
}

/// `text` with its SGR sequences (`ESC [ params m`) kept and every other
/// escape sequence dropped whole. The parser would drop most of them
/// itself, but not all: it knows OSC only when ended by BEL, so an OSC 8
/// hyperlink (ended by `ESC \`) would eat the rest of its line, and a
/// two-character sequence such as `ESC ( B` would leave `(B` behind.
fn keep_only_sgr(text: &str) -> Cow<'_, str> {
    if !text.contains(ESC) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESC {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            let mut sequence = String::from("\u{1b}[");
            let mut final_byte = None;
            while let Some(&next) = chars.peek() {
                if next == '\n' {
                    break;
                }
                chars.next();
                sequence.push(next);
                if ('\u{40}'..='\u{7e}').contains(&next) {
                    final_byte = Some(next);
                    break;
                }
            }
            let sgr = final_byte == Some('m')
                && sequence
                    .get(2..sequence.len() - 1)
                    .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit() || c == ';'));
            if sgr {
                out.push_str(&sequence);
            }
        } else {
            skip_sequence(&mut chars);
        }
    }
    Cow::Owned(out)
}

/// Skips the rest of an escape sequence whose `ESC` was just read: a CSI
/// (`[` … final byte), a string (OSC `]`, DCS `P`, SOS `X`, PM `^`, APC
/// `_`, up to BEL or `ESC \`), or `ESC`, intermediates and one final
/// character (`ESC ( B`, `ESC 7`). None runs past the end of its line: an
/// unterminated one must not swallow the output that follows.
fn skip_sequence(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.peek().copied() {
        Some('[') => {
            chars.next();
            while let Some(&c) = chars.peek() {
                if c == '\n' {
                    return;
                }
                chars.next();
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    return;
                }
            }
        }
        Some(']' | 'P' | 'X' | '^' | '_') => {
            chars.next();
            while let Some(&c) = chars.peek() {
                if c == '\n' {
                    return;
                }
                chars.next();
                if c == BEL {
                    return;
                }
                if c == ESC {
                    if chars.peek() == Some(&'\\') {
                        chars.next();
                    }
                    return;
                }
            }
        }
        _ => {
            while let Some(&c) = chars.peek() {
                if c == '\n' {
                    return;
                }
                chars.next();
                if !(' '..='/').contains(&c) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn colours_become_styles_on_the_base() {
        let base = Style::new().fg(Color::Red);
        let lines = lines("a \u{1b}[32mgreen\u{1b}[0m b\n\u{1b}[1mbold", base);
        assert_eq!(plain(&lines), ["a green b", "bold"]);
        let spans = &lines[0].spans;
        assert_eq!(spans[0].style.fg, Some(Color::Red));
        assert_eq!(spans[1].style.fg, Some(Color::Green));
        assert_eq!(spans[2].style.fg, Some(Color::Red), "a reset is the base");
    }

    #[test]
    fn every_other_sequence_goes() {
        let text = "\u{1b}[2J\u{1b}[1Aup\u{1b}]0;title\u{7}x\u{1b}]8;;http://e\u{1b}\\link\u{1b}]8;;\u{1b}\\\u{1b}(Bend\u{1b}[";
        assert_eq!(plain(&lines(text, Style::new())), ["upxlinkend"]);
        assert_eq!(strip(text), "upxlinkend");
        assert_eq!(strip("\u{1b}[31mred\u{1b}[0m"), "red");
        // An unterminated string stops at its line's end.
        assert_eq!(strip("a\u{1b}]0;never ended\nnext"), "a\nnext");
    }

    #[test]
    fn controls_other_than_escape_are_left_for_the_wrapper() {
        let lines = lines("bell\u{7} \u{202e}txt", Style::new());
        assert_eq!(plain(&lines), ["bell\u{7} \u{202e}txt"]);
    }
}
