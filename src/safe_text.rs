//! Text from the log or a tool, made safe to show on a terminal.
//!
//! Model text, tool output, commands and file names are hostile input: an
//! escape sequence in a command can erase the line that shows it and draw a
//! harmless one instead (`ESC[2K\r`), set the clipboard (OSC 52) or the
//! window title (OSC 2), or move the cursor to fake a "✓ allowed" line; a
//! bidi override (`U+202E`) shows `txt.exe` for `exe.txt`. Every place that
//! shows such text — each CLI command and the TUI — runs it through this
//! one module, which shows every character that could do that as a visible
//! escape instead (`\e`, `\r`, `\x07`, `\u202e`), so what a person reads is
//! what is there.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is: the C0 and C1 control
/// characters and DEL (which start or take part in escape sequences and
/// move the cursor), the bidirectional formatting characters (which reorder
/// what is shown), and the line and paragraph separators.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// The visible escape that stands for `c`: `\e`, `\r`, `\n`, `\t`, `\0`,
/// `\xHH` for the other ASCII controls, `\uHHHH` for the rest. An
/// iterator of its characters, so that drawing a cell at a time costs no
/// allocation.
pub fn escape(c: char) -> Escape {
    let mut escape = Escape {
        text: [b'\\'; 7],
        len: 2,
        at: 0,
    };
    let short = match c {
        '\u{1b}' => Some(b'e'),
        '\r' => Some(b'r'),
        '\n' => Some(b'n'),
        '\t' => Some(b't'),
        '\0' => Some(b'0'),
        _ => None,
    };
    let hex = |n: u32| b"0123456789abcdef"[n as usize & 0xf];
    let code = c as u32;
    match short {
        Some(letter) => escape.text[1] = letter,
        None if c.is_ascii() => {
            escape.text[1..4].copy_from_slice(&[b'x', hex(code >> 4), hex(code)]);
            escape.len = 4;
        }
        // Every unsafe character beyond ASCII is below U+10000.
        None => {
            escape.text[1..6].copy_from_slice(&[
                b'u',
                hex(code >> 12),
                hex(code >> 8),
                hex(code >> 4),
                hex(code),
            ]);
            escape.len = 6;
        }
    }
    escape
}

/// The characters of one visible escape ([`escape`]).
#[derive(Debug, Clone)]
pub struct Escape {
    text: [u8; 7],
    len: u8,
    at: u8,
}

impl Iterator for Escape {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        (self.at < self.len).then(|| {
            self.at += 1;
            char::from(self.text[usize::from(self.at - 1)])
        })
    }
}

/// `text` for one line of output: every unsafe character escaped,
/// newlines and tabs included.
pub fn line(text: &str) -> Cow<'_, str> {
    escaped(text, |_| false)
}

/// `text` for output that may span lines (an answer, tool output): newlines
/// and tabs are kept, a `\r` that ends a line (`\r\n`) is dropped, every
/// other unsafe character is escaped.
pub fn lines(text: &str) -> Cow<'_, str> {
    let text: Cow<'_, str> = if text.contains("\r\n") {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    };
    match escaped(&text, |c| c == '\n' || c == '\t') {
        Cow::Borrowed(_) => text,
        Cow::Owned(owned) => Cow::Owned(owned),
    }
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let must = |c: char| is_unsafe(c) && !keep(c);
    if !text.chars().any(must) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if must(c) {
            out.extend(escape(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spoofing_shows_as_what_it_is() {
        assert_eq!(
            line("touch PWN\u{1b}[2K\rbash: git status"),
            "touch PWN\\e[2K\\rbash: git status"
        );
        assert_eq!(
            line("\u{1b}]52;c;cm0gLXJmIH4=\u{7}"),
            "\\e]52;c;cm0gLXJmIH4=\\x07"
        );
        assert_eq!(line("a\u{202e}txt.exe"), "a\\u202etxt.exe");
        assert_eq!(line("\u{9b}2J\u{7f}"), "\\u009b2J\\x7f");
        assert_eq!(line("two\nlines\tand a tab"), "two\\nlines\\tand a tab");
    }

    #[test]
    fn multi_line_text_keeps_its_lines_and_tabs() {
        assert_eq!(lines("a\n\tb\r\nc"), "a\n\tb\nc");
        assert_eq!(lines("50%\r100%\u{1b}[1A"), "50%\\r100%\\e[1A");
    }

    #[test]
    fn plain_text_is_not_copied() {
        assert!(matches!(line("git status --short ✓"), Cow::Borrowed(_)));
        assert!(matches!(lines("a\nb\tc"), Cow::Borrowed(_)));
    }
}
