//! Assistant text rendered by the TUI's Markdown renderer at some width.
//!
//! Input: one byte choosing the width, then the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ratatui::style::Style;

fuzz_target!(|data: &[u8]| {
    let Some((&width, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let mut out = Vec::new();
    pod::tui::render::markdown::render(text, usize::from(width), Style::new(), &mut out);
});
