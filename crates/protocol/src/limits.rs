//! The one rule for how deep JSON may nest, at every door.
//!
//! A value the pod accepts is wrapped a few levels deeper when it is written
//! to the log (`{"seq":…,"entry":{"segments":[…]}}`) and deeper still in a
//! snapshot frame. serde_json refuses to parse past 128 levels, so a frame
//! accepted at 124 levels made a log no one could load again. Every door —
//! client frames and the model's tool-call arguments — therefore admits at
//! most [`MAX_JSON_DEPTH`] levels, far enough below the readers' limit that
//! whatever is accepted is read back by the log reader and by every client.

/// The deepest nesting a frame or a model's tool arguments may have.
pub const MAX_JSON_DEPTH: usize = 64;

/// How deep the arrays and objects of a JSON text nest, counted without
/// parsing (brackets inside strings do not count). Not a validator: it is
/// meant to run before the parser, which reports any other problem.
pub fn json_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nesting_outside_strings() {
        assert_eq!(json_depth(b"1"), 0);
        assert_eq!(json_depth(br#"{"a":[1,{"b":[]}]}"#), 4);
        assert_eq!(json_depth(br#"{"a":"[[[[\"{{"}"#), 1);
        let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
        assert_eq!(json_depth(deep.as_bytes()), 130);
    }

    #[test]
    fn anything_within_the_limit_survives_the_log_and_a_snapshot() {
        let value = format!(
            "{}1{}",
            "[".repeat(MAX_JSON_DEPTH - 3),
            "]".repeat(MAX_JSON_DEPTH - 3)
        );
        let snapshot = format!(
            r#"{{"type":"snapshot","entries":[{{"seq":1,"entry":{{"kind":"user_input","segments":[{{"type":"x","v":{value}}}]}}}}]}}"#
        );
        assert!(json_depth(snapshot.as_bytes()) < 128);
        assert!(serde_json::from_str::<serde_json::Value>(&snapshot).is_ok());
    }
}
