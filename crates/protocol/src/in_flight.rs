//! The block being streamed right now, and the one rule that builds it
//! from hints.
//!
//! The pod folds every hint it sends into an [`InFlight`] so a snapshot can
//! carry the partial block; a client folds the hints it receives after that
//! snapshot into the same value. Both ends call [`InFlight::apply`], so a
//! client that attached mid-block ends up with exactly what a client that
//! saw every hint built.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Event;

/// Bytes of a running tool's output kept from its beginning, and from its
/// end, when it grows past both: what a person needs is how it started and
/// what it is printing now.
pub const TOOL_OUTPUT_HEAD: usize = 8 * 1024;
pub const TOOL_OUTPUT_TAIL: usize = 8 * 1024;
/// What stands for the cut middle of a long tool output.
pub const TOOL_OUTPUT_CUT: &str = "\n[…]\n";

/// The block the model is streaming right now, or the output of a running
/// tool: not yet an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InFlight {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        arguments_so_far: String,
    },
    /// The output so far of a running tool (its head and tail when long).
    ToolOutput {
        call_id: String,
        text: String,
    },
}

impl InFlight {
    /// Folds one frame into the in-flight block. Hints extend it; any
    /// `entry` (the block is final), `turn_start`, `retry` (the partial
    /// block is void) and session changes clear it; other frames leave it.
    pub fn apply(current: &mut Option<InFlight>, event: &Event) {
        match event {
            Event::TextDelta { text } => match current {
                Some(InFlight::Text { text: so_far }) => so_far.push_str(text),
                _ => *current = Some(InFlight::Text { text: text.clone() }),
            },
            Event::ReasoningDelta { text } => match current {
                Some(InFlight::Reasoning { text: so_far }) => so_far.push_str(text),
                _ => *current = Some(InFlight::Reasoning { text: text.clone() }),
            },
            Event::ToolCallStart { call_id, name } => {
                *current = Some(InFlight::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments_so_far: String::new(),
                })
            }
            Event::ToolCallArgsDelta { call_id, delta } => {
                if let Some(InFlight::ToolCall {
                    call_id: id,
                    arguments_so_far,
                    ..
                }) = current
                {
                    if id == call_id {
                        arguments_so_far.push_str(delta);
                    }
                }
            }
            Event::ToolOutputDelta { call_id, text } => match current {
                Some(InFlight::ToolOutput {
                    call_id: id,
                    text: so_far,
                }) if id == call_id => {
                    so_far.push_str(text);
                    cap_tool_output(so_far);
                }
                _ => {
                    let mut text = text.clone();
                    cap_tool_output(&mut text);
                    *current = Some(InFlight::ToolOutput {
                        call_id: call_id.clone(),
                        text,
                    });
                }
            },
            Event::Entry { .. }
            | Event::Snapshot(_)
            | Event::TurnStart { .. }
            | Event::Retry { .. }
            | Event::CompactDone { .. }
            | Event::SessionSwitched { .. } => *current = None,
            _ => {}
        }
    }
}

/// Keeps the first [`TOOL_OUTPUT_HEAD`] and last [`TOOL_OUTPUT_TAIL`] bytes
/// (at character boundaries) with [`TOOL_OUTPUT_CUT`] between. A function of
/// the text alone: the head never changes once cut and the tail is always
/// the newest bytes, so capping in steps gives what capping once would.
fn cap_tool_output(text: &mut String) {
    // A text capped before has its marker where its head ends (up to 3
    // bytes before the budget, at a character boundary): it is re-cut at
    // the same place, so capping in steps gives what capping once would.
    let window = TOOL_OUTPUT_HEAD.saturating_sub(3)..=TOOL_OUTPUT_HEAD;
    let marked = window
        .filter(|&at| at <= text.len())
        .find(|&at| text.as_bytes()[at..].starts_with(TOOL_OUTPUT_CUT.as_bytes()));
    let limit = TOOL_OUTPUT_HEAD + TOOL_OUTPUT_CUT.len() + TOOL_OUTPUT_TAIL;
    if marked.is_none() && text.len() <= limit {
        return;
    }
    let mut head_end = marked.unwrap_or(TOOL_OUTPUT_HEAD);
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len().saturating_sub(TOOL_OUTPUT_TAIL);
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let tail_start = tail_start.max(head_end + marked.map_or(0, |_| TOOL_OUTPUT_CUT.len()));
    let capped = format!(
        "{}{TOOL_OUTPUT_CUT}{}",
        &text[..head_end],
        &text[tail_start..]
    );
    *text = capped;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hint() -> impl Strategy<Value = Event> {
        let text = "[a-zé\n]{0,300}";
        prop_oneof![
            text.prop_map(|text| Event::TextDelta { text }),
            text.prop_map(|text| Event::ReasoningDelta { text }),
            (0..3u8).prop_map(|i| Event::ToolCallStart {
                call_id: format!("c{i}"),
                name: "bash".into()
            }),
            (0..3u8, text).prop_map(|(i, delta)| Event::ToolCallArgsDelta {
                call_id: format!("c{i}"),
                delta
            }),
            (0..2u8, "[a-zé…\n]{0,3000}").prop_map(|(i, text)| Event::ToolOutputDelta {
                call_id: format!("c{i}"),
                text
            }),
            Just(Event::Retry {
                attempt: 1,
                max_attempts: 4,
                delay_ms: 10,
                error: "HTTP 429".into()
            }),
            Just(Event::TurnStart {
                turn_id: "t1".into(),
                request_id: None
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A client that attaches at any point — taking the snapshot's
        /// `in_flight`, as it travels on the wire, and folding the hints
        /// after it — holds what a client that saw every hint holds.
        #[test]
        fn snapshot_plus_later_hints_equals_every_hint(
            hints in proptest::collection::vec(hint(), 0..60),
            cut in 0usize..60,
        ) {
            let cut = cut.min(hints.len());
            let mut everything = None;
            for h in &hints {
                InFlight::apply(&mut everything, h);
            }
            let mut server = None;
            for h in &hints[..cut] {
                InFlight::apply(&mut server, h);
            }
            let wire = serde_json::to_string(&server).unwrap();
            let mut late: Option<InFlight> = serde_json::from_str(&wire).unwrap();
            for h in &hints[cut..] {
                InFlight::apply(&mut late, h);
            }
            prop_assert_eq!(late, everything);
        }
    }

    #[test]
    fn long_tool_output_keeps_head_and_tail() {
        let mut current = None;
        for i in 0..5000 {
            InFlight::apply(
                &mut current,
                &Event::ToolOutputDelta {
                    call_id: "c".into(),
                    text: format!("tick {i}\n"),
                },
            );
        }
        let Some(InFlight::ToolOutput { text, .. }) = current else {
            panic!("no tool output")
        };
        assert!(text.starts_with("tick 0\n"));
        assert!(text.ends_with("tick 4999\n"));
        assert!(text.contains(TOOL_OUTPUT_CUT));
        assert!(text.len() <= TOOL_OUTPUT_HEAD + TOOL_OUTPUT_CUT.len() + TOOL_OUTPUT_TAIL);
    }
}
