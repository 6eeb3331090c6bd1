//! Recognising a reply stuck in a loop: the same run of text over and over.
//!
//! Small local models (a 135M model on llama.cpp, in #42's trial) fall into
//! loops and, on a CPU, would fill the output limit for ten minutes. A
//! reply whose last [`MIN_SPAN`] bytes or more are one piece of at most
//! [`MAX_PERIOD`] bytes repeated at least [`MIN_REPEATS`] times, exactly,
//! is such a loop: real answers vary (a list's items differ in their
//! numbers or words, a table's rows in their cells), so they never repeat
//! that much byte for byte.

/// How long the exactly repeating tail must be, in bytes.
pub const MIN_SPAN: usize = 2048;
/// The longest repeated piece recognised, in bytes.
pub const MAX_PERIOD: usize = 512;
/// How often the piece must occur in a row.
pub const MIN_REPEATS: usize = 6;
/// The piece's last bytes, searched for to find where it started before.
const PROBE: usize = 16;

/// A loop at the end of a text: the repeated piece's length in bytes and how
/// many times in a row it occurs there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loop {
    pub period: usize,
    pub repeats: usize,
}

/// The loop `text` ends in, if it ends in one. Cheap enough to call after
/// every streamed delta: it looks at most at the last
/// `MAX_PERIOD * MIN_REPEATS` bytes (and nothing under [`MIN_SPAN`]), and
/// finds the candidate periods with `memrchr` on the probe's last byte
/// rather than comparing the probe at each of the [`MAX_PERIOD`] places (a
/// few thousand instructions per delta of a long reply, more than the rest
/// of the pod's work on it; see docs/performance.md, scenario 7).
pub fn ending_loop(text: &str) -> Option<Loop> {
    let bytes = text.as_bytes();
    if bytes.len() < MIN_SPAN {
        return None;
    }
    let probe = &bytes[bytes.len() - PROBE..];
    let longest = MAX_PERIOD.min(bytes.len() - PROBE);
    // Where an earlier copy of the probe would end for each period from 1
    // to `longest`: the byte `period` before the text's last one.
    let base = bytes.len() - 1 - longest;
    let ends = &bytes[base..bytes.len() - 1];
    // Each earlier place the text's last bytes occur is a candidate period
    // (the nearest first, so the smallest period is found).
    memchr::memrchr_iter(probe[PROBE - 1], ends)
        .map(|at| bytes.len() - 1 - (base + at))
        .filter(|&period| {
            let end = bytes.len() - period;
            &bytes[end - PROBE..end] == probe
        })
        .find_map(|period| {
            let span = repeating_span(bytes, period);
            let repeats = span / period;
            (span >= MIN_SPAN && repeats >= MIN_REPEATS).then_some(Loop { period, repeats })
        })
}

/// How many of `bytes`' last bytes repeat with `period`: the longest tail
/// in which every byte equals the one `period` before it, plus that first
/// period.
fn repeating_span(bytes: &[u8], period: usize) -> usize {
    // `ending_loop` looks at texts of `MIN_SPAN` bytes or more only.
    let limit = bytes.len().min(MAX_PERIOD * MIN_REPEATS);
    let start = bytes.len().saturating_sub(limit);
    let mut at = bytes.len();
    while at > start + period && bytes[at - 1] == bytes[at - 1 - period] {
        at -= 1;
    }
    bytes.len() - at + period
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sentence_said_over_and_over_is_a_loop() {
        let text = format!(
            "Sure! Here is the answer.\n{}",
            "The function returns the value. ".repeat(80)
        );
        let found = ending_loop(&text).unwrap();
        assert_eq!(found.period, 32);
        assert!(found.repeats >= MIN_REPEATS);
    }

    #[test]
    fn a_run_of_one_character_is_a_loop_once_it_is_long() {
        assert_eq!(ending_loop(&"-".repeat(MIN_SPAN - 1)), None);
        assert!(ending_loop(&"-".repeat(MIN_SPAN + 10)).is_some());
    }

    #[test]
    fn a_numbered_list_and_a_table_are_not_loops() {
        let list: String = (1..400).map(|n| format!("- item {n}: done\n")).collect();
        assert_eq!(ending_loop(&list), None);
        let table: String = (1..200)
            .map(|n| format!("| {n} | {} | ok |\n", n * 7))
            .collect();
        assert_eq!(ending_loop(&table), None);
    }

    #[test]
    fn a_long_piece_repeated_a_few_times_is_not_yet_a_loop() {
        let piece: String = (0..400)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let piece = format!("{piece}!");
        assert_eq!(ending_loop(&piece.repeat(5)), None);
        assert!(ending_loop(&piece.repeat(7)).is_some());
    }

    /// `ending_loop` as it was written first: the probe compared at every
    /// period.
    fn every_period(text: &str) -> Option<Loop> {
        let bytes = text.as_bytes();
        if bytes.len() < MIN_SPAN {
            return None;
        }
        let probe = &bytes[bytes.len() - PROBE..];
        (1..=MAX_PERIOD.min(bytes.len() - PROBE))
            .filter(|&period| {
                let end = bytes.len() - period;
                &bytes[end - PROBE..end] == probe
            })
            .find_map(|period| {
                let span = repeating_span(bytes, period);
                let repeats = span / period;
                (span >= MIN_SPAN && repeats >= MIN_REPEATS).then_some(Loop { period, repeats })
            })
    }

    proptest! {
        /// Whatever precedes it, a short piece repeated well past the span
        /// is found, and the period found divides into the piece's.
        #[test]
        fn any_repeated_piece_is_found(
            prefix in "[a-z .]{0,300}",
            piece in "[a-z .\n]{1,64}",
        ) {
            let times = MIN_SPAN / piece.len() + MIN_REPEATS + 1;
            let text = format!("{prefix}{}", piece.repeat(times));
            let found = ending_loop(&text).unwrap();
            prop_assert_eq!(piece.len() % found.period, 0);
        }

        /// The search by the probe's last byte finds what comparing the
        /// probe at every period finds.
        #[test]
        fn the_search_agrees_with_trying_every_period(
            prefix in "[a-c]{0,3000}",
            piece in "[a-c]{1,40}",
            times in 0usize..120,
            suffix in "[a-c]{0,20}",
        ) {
            let text = format!("{prefix}{}{suffix}", piece.repeat(times));
            prop_assert_eq!(ending_loop(&text), every_period(&text));
        }

        /// Text in which no 16 bytes recur is never a loop.
        #[test]
        fn distinct_lines_are_never_a_loop(n in 200usize..600) {
            let text: String = (0..n).map(|i| format!("line {i:05} of the answer\n")).collect();
            prop_assert_eq!(ending_loop(&text), None);
        }
    }
}
