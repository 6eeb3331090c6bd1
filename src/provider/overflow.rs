//! "The request does not fit the model's context", in the words each server
//! uses: OpenAI's `context_length_exceeded` ("This model's maximum context
//! length is 8192 tokens…", which vLLM repeats), llama.cpp's "exceeds the
//! available context size (8192 tokens)", Anthropic's "prompt is too long:
//! 215000 tokens > 200000 maximum", Ollama's "exceeds the context length".
//!
//! Such an error is not the user's to fix by hand: the turn loop compacts
//! and tries once more (`pod/turn.rs`), and learns the window where the
//! message states it, so the next compaction comes in time.

use std::sync::LazyLock;

use regex::Regex;

/// What servers say, lower-cased.
const SIGNS: [&str; 8] = [
    "context_length_exceeded",
    "maximum context length",
    "exceeds the available context size",
    "prompt is too long",
    "exceeds the context length",
    "exceeds the context window",
    "context window exceeded",
    "too long for the context window",
];

/// Where a message states the window, first match wins.
#[expect(
    clippy::expect_used,
    reason = "fixed patterns, compiled by the tests of this module"
)]
static WINDOW: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        r"available context size \((\d+) tokens?\)",
        r"maximum context length is (\d+) tokens?",
        r"> ?(\d+) maximum",
    ]
    .map(|pattern| Regex::new(pattern).expect("a fixed, tested pattern"))
});

/// Whether an error's text (status line, the server's message, its raw
/// body) says the request did not fit the context.
pub fn is_overflow(text: &str) -> bool {
    let lower = text.to_lowercase();
    SIGNS.iter().any(|sign| lower.contains(sign))
}

/// The context window, in tokens, that an overflow message states, if it
/// states one.
pub fn stated_window(text: &str) -> Option<u64> {
    let lower = text.to_lowercase();
    WINDOW
        .iter()
        .find_map(|re| re.captures(&lower)?.get(1)?.as_str().parse().ok())
        .filter(|&window| window > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_wording_is_recognised_with_its_window() {
        for (text, window) in [
            (
                "This model's maximum context length is 8192 tokens. However, your messages \
                 resulted in 9000 tokens. (context_length_exceeded)",
                Some(8192),
            ),
            (
                "the request exceeds the available context size (4096 tokens), try increasing it",
                Some(4096),
            ),
            (
                "prompt is too long: 215000 tokens > 200000 maximum",
                Some(200000),
            ),
            ("input length exceeds the context length", None),
        ] {
            assert!(is_overflow(text), "{text}");
            assert_eq!(stated_window(text), window, "{text}");
        }
        assert!(!is_overflow("rate limit: too many tokens per minute"));
        assert!(!is_overflow("invalid api key"));
    }
}
