//! Token counts as people read them: the status bar's, `pod status`'s.
//! Estimating them is the provider layer's (`provider::estimate`).

use super::Usage;

/// A token count as people read it: `950`, `12.3k`, `1.2M`.
pub fn short(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Usage on one line, for the TUI's status bar and `pod status`:
/// `12.3k in (10.1k cached) · 456 out`. Cached input is billed at a
/// fraction, so it is worth seeing; it is left out when there is none.
pub fn usage_line(usage: &Usage) -> String {
    let cached = match usage.cache_read_tokens {
        0 => String::new(),
        n => format!(" ({} cached)", short(n)),
    };
    format!(
        "{} in{cached} · {} out",
        short(usage.input_tokens),
        short(usage.output_tokens)
    )
}
