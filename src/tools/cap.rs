//! The one place tool output is capped.
//!
//! Session logs keep every tool result forever and every later model call
//! re-sends it, so an unbounded result (a 200 KB build log) costs on every
//! step and on every resume. Output over the cap keeps its head (what the
//! command started with) and its tail (where errors and summaries land), with
//! a marker saying how much was cut between them.

use std::collections::VecDeque;

/// Bytes of the cap reserved for the marker, so the result never exceeds it.
const MARKER_RESERVE: usize = 48;

/// Caps `text` to `limit` bytes: see [`CapBuffer`].
pub fn cap(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut buffer = CapBuffer::new(limit);
    buffer.push(text.as_bytes());
    buffer.finish()
}

/// Collects a byte stream of any length in bounded memory, keeping its head
/// and tail. Used directly where output arrives as a stream (a child
/// process) so that a command printing gigabytes never holds them.
#[derive(Debug)]
pub struct CapBuffer {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cut: usize,
}

impl CapBuffer {
    /// A buffer whose [`finish`](Self::finish) is at most `limit` bytes
    /// (for limits above the marker's size; below, just the marker).
    pub fn new(limit: usize) -> Self {
        let budget = limit.saturating_sub(MARKER_RESERVE);
        let head_cap = budget / 2;
        Self {
            head_cap,
            tail_cap: budget - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            cut: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        if bytes.len() > self.tail_cap {
            let skip = bytes.len() - self.tail_cap;
            self.cut += skip + self.tail.len();
            self.tail.clear();
            bytes = &bytes[skip..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.cut += overflow;
        self.tail.extend(bytes);
    }

    /// The kept text. Bytes that are not UTF-8 (binary output) are replaced;
    /// the cut never splits a character, since the bytes of a character split
    /// by it are counted as cut.
    pub fn finish(self) -> String {
        let mut head = self.head;
        let mut tail: Vec<u8> = self.tail.into();
        if self.cut == 0 {
            head.extend_from_slice(&tail);
            return String::from_utf8_lossy(&head).into_owned();
        }
        let mut cut = self.cut;
        let head_end = utf8_prefix_end(&head);
        cut += head.len() - head_end;
        head.truncate(head_end);
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        cut += tail_start;
        tail.drain(..tail_start);
        format!(
            "{}\n[... {cut} bytes cut ...]\n{}",
            String::from_utf8_lossy(&head),
            String::from_utf8_lossy(&tail)
        )
    }
}

/// The largest char boundary of `text` at or below `index`, for cutting a
/// string without splitting a character (`str::floor_char_boundary` is newer
/// than the crate's MSRV).
pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0)
}

/// Where the last complete character of `bytes` ends: a character the head
/// cut in half is dropped, while genuinely invalid bytes are kept for the
/// lossy conversion to mark.
fn utf8_prefix_end(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let at = bytes.len() - back;
        let lead = bytes[at];
        if lead & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let width = match lead {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if width > back { at } else { bytes.len() };
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(cap("hello", 100), "hello");
        assert_eq!(cap("", 0), "");
    }

    #[test]
    fn long_text_keeps_head_and_tail_within_limit() {
        let text = format!("HEAD{}TAIL", "x".repeat(10_000));
        let out = cap(&text, 200);
        assert!(out.len() <= 200, "{}", out.len());
        assert!(out.starts_with("HEAD"));
        assert!(out.ends_with("TAIL"));
        let cut: usize = out
            .split("[... ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        let marker = format!("\n[... {cut} bytes cut ...]\n");
        assert_eq!(out.len() - marker.len() + cut, text.len());
    }

    #[test]
    fn capping_is_idempotent() {
        let text = "y".repeat(5_000);
        let once = cap(&text, 300);
        assert_eq!(cap(&once, 300), once);
    }

    #[test]
    fn cuts_on_char_boundaries() {
        let text = "é".repeat(1_000) + &"日".repeat(1_000);
        for limit in 60..80 {
            let out = cap(&text, limit);
            assert!(!out.contains('\u{FFFD}'), "limit {limit}: {out}");
            assert!(out.len() <= limit);
        }
    }

    #[test]
    fn streaming_equals_one_shot() {
        let text: String = (0..5_000).map(|i| format!("line {i}\n")).collect();
        let mut buffer = CapBuffer::new(1_000);
        for chunk in text.as_bytes().chunks(37) {
            buffer.push(chunk);
        }
        assert_eq!(buffer.finish(), cap(&text, 1_000));
    }

    proptest::proptest! {
        #[test]
        fn capped_output_is_bounded_and_made_of_head_and_tail(
            text in "(\\PC|\n){0,400}",
            limit in 64usize..300,
        ) {
            let out = cap(&text, limit);
            proptest::prop_assert!(out.len() <= limit);
            if text.len() <= limit {
                proptest::prop_assert_eq!(&out, &text);
            } else {
                let replaced = out.contains(char::REPLACEMENT_CHARACTER);
                proptest::prop_assert!(!replaced || text.contains(char::REPLACEMENT_CHARACTER));
                let (head, rest) = out.split_once("\n[... ").unwrap();
                let tail = rest.split_once(" ...]\n").unwrap().1;
                proptest::prop_assert!(text.starts_with(head));
                proptest::prop_assert!(text.ends_with(tail));
            }
        }
    }
}
