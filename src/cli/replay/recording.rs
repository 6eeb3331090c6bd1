//! What the replay takes from a recorded log: the user inputs, the model
//! replies as a script for the `script` provider, the tool results to
//! compare with, and how approvals were answered.

use std::collections::{HashMap, VecDeque};

use serde_json::{json, Value};

use crate::protocol::{AssistantItem, DecidedBy, Decision, LogEntry, LogLine, Segment};

/// One recorded tool result.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub(super) seq: u64,
    pub(super) tool: String,
    pub(super) output: String,
    pub(super) is_error: bool,
}

/// What the replay needs of a recorded session.
#[derive(Debug, Default)]
pub(super) struct Recording {
    pub(super) workspace: Option<String>,
    pub(super) first_checkpoint: Option<String>,
    /// Each turn's user input, in order.
    pub(super) turns: Vec<Vec<Segment>>,
    /// One script line per model call, in order.
    pub(super) calls: Vec<Vec<Value>>,
    /// The recorded results by call id, in order (an id may repeat).
    pub(super) results: HashMap<String, VecDeque<Recorded>>,
    /// How the recording answered each asked call (by call id, in order).
    pub(super) decisions: HashMap<String, VecDeque<(Decision, Option<String>)>>,
    /// The log stops before its end (`--until-seq`).
    pub(super) cut_at: Option<u64>,
}

impl Recording {
    /// Reads the log's lines up to `until_seq` (all without it).
    pub(super) fn from_log(lines: &[LogLine], until_seq: Option<u64>) -> Recording {
        let mut recording = Recording::default();
        let mut call: Option<Vec<Value>> = None;
        let mut tools: HashMap<String, String> = HashMap::new();
        let mut cut = false;
        for line in lines {
            if until_seq.is_some_and(|n| line.seq > n) {
                cut = true;
                break;
            }
            match &line.entry {
                LogEntry::SessionStart { workspace, .. } => {
                    recording.workspace = workspace.clone();
                }
                LogEntry::UserInput { segments, .. } => {
                    recording.close(&mut call);
                    recording.turns.push(segments.clone());
                }
                LogEntry::AssistantItems { items } => {
                    let events = call.get_or_insert_with(Vec::new);
                    for item in items {
                        events.push(match item {
                            AssistantItem::Text { text } => json!({ "text": text }),
                            AssistantItem::Reasoning { text } => json!({ "reasoning": text }),
                            AssistantItem::ToolCall {
                                call_id,
                                name,
                                arguments,
                            } => {
                                tools.insert(call_id.clone(), name.clone());
                                json!({"tool_call": {"id": call_id, "name": name, "arguments": arguments}})
                            }
                        });
                    }
                }
                LogEntry::ToolResults { results } => {
                    recording.close(&mut call);
                    for result in results {
                        recording
                            .results
                            .entry(result.call_id.clone())
                            .or_default()
                            .push_back(Recorded {
                                seq: line.seq,
                                tool: tools.get(&result.call_id).cloned().unwrap_or_default(),
                                output: result.output.clone(),
                                is_error: result.is_error,
                            });
                    }
                }
                LogEntry::ApprovalDecision {
                    call_id,
                    decision,
                    by: DecidedBy::User | DecidedBy::Hook,
                    message,
                    ..
                } => recording
                    .decisions
                    .entry(call_id.clone())
                    .or_default()
                    .push_back((*decision, message.clone())),
                LogEntry::Checkpoint {
                    checkpoint: Some(id),
                    ..
                } if recording.first_checkpoint.is_none() => {
                    recording.first_checkpoint = Some(id.clone());
                }
                LogEntry::TurnEnd { usage, error, .. } => {
                    // A call that failed before it streamed anything left no
                    // entry: the error alone is its reply.
                    if let Some(error) = error.as_ref().filter(|e| provider_failure(e.code)) {
                        call.get_or_insert_with(Vec::new)
                            .push(json!({ "error": error.message }));
                    }
                    if let Some(usage) = usage {
                        let last = match call.as_mut() {
                            Some(events) => Some(events),
                            None => recording.calls.last_mut(),
                        };
                        if let Some(events) = last {
                            events.push(json!({"usage": {
                                "input_tokens": usage.input_tokens,
                                "output_tokens": usage.output_tokens,
                            }}));
                        }
                    }
                    recording.close(&mut call);
                }
                _ => {}
            }
        }
        if cut {
            recording.cut_at = until_seq;
            // A reply cut mid-way keeps its text, not its tool calls (their
            // results lie past the cut), and ends the turn saying why.
            if let (Some(events), Some(n)) = (call.as_mut(), until_seq) {
                events.retain(|event| event.get("tool_call").is_none());
                events.push(
                    json!({ "error": format!("pod replay: stopped at seq {n} (--until-seq)") }),
                );
            }
        }
        recording.close(&mut call);
        recording
    }

    fn close(&mut self, call: &mut Option<Vec<Value>>) {
        if let Some(events) = call.take() {
            self.calls.push(events);
        }
    }

    /// The script the replay's model serves: the recorded replies, then one
    /// that fails saying why, should the replay ask for more than were
    /// recorded (a turn cut by `--until-seq` asks for its next reply).
    pub(super) fn script(&self) -> String {
        let mut lines: Vec<String> = self
            .calls
            .iter()
            .map(|events| json!({ "events": events }).to_string())
            .collect();
        let why = match self.cut_at {
            Some(n) => format!("pod replay: stopped at seq {n} (--until-seq)"),
            None => "pod replay: the recorded session has no more model replies".into(),
        };
        lines.push(json!({"events": [{"error": why}]}).to_string());
        lines.join("\n") + "\n"
    }

    /// How to answer a request for `call_id`: as the recording did; a call
    /// the recording ran without asking is allowed, one it never ran denied.
    pub(super) fn answer(&mut self, call_id: &str) -> (Decision, Option<String>) {
        if let Some(decision) = self
            .decisions
            .get_mut(call_id)
            .and_then(VecDeque::pop_front)
        {
            return decision;
        }
        let ran = self
            .results
            .get(call_id)
            .and_then(VecDeque::front)
            .is_some_and(|r| !r.output.starts_with("[denied"));
        if ran {
            (Decision::Allow, None)
        } else {
            (
                Decision::Deny,
                Some("the recorded session did not run this call".into()),
            )
        }
    }
}

/// Whether a turn error is the model call's own failure, which the
/// replayed reply must reproduce.
pub(super) fn provider_failure(code: crate::protocol::TurnErrorCode) -> bool {
    use crate::protocol::TurnErrorCode as C;
    matches!(
        code,
        C::ProviderHttp | C::ProviderUnreachable | C::ProviderStream
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn line(seq: u64, entry: Value) -> LogLine {
        serde_json::from_value(json!({"seq": seq, "entry": entry})).unwrap()
    }

    /// The replies come out of the log one model call a line, in order,
    /// each turn's usage on its last call, and a cut log asks for no reply
    /// past its cut.
    #[test]
    fn each_model_call_of_the_log_becomes_one_script_line() {
        let id = Uuid::new_v4();
        let log = vec![
            line(
                0,
                json!({"kind":"session_start","session_id":id,"created_at":"x","workspace":"/w"}),
            ),
            line(
                1,
                json!({"kind":"user_input","segments":[{"type":"text","text":"go"}],"at":"x"}),
            ),
            line(
                2,
                json!({"kind":"assistant_items","items":[{"type":"text","text":"Looking."}]}),
            ),
            line(
                3,
                json!({"kind":"assistant_items","items":[{"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"ls"}}]}),
            ),
            line(
                4,
                json!({"kind":"checkpoint","checkpoint":"abc","reason":"turn_start","at":"x"}),
            ),
            line(
                5,
                json!({"kind":"tool_results","results":[{"call_id":"c1","output":"a\n","is_error":false}]}),
            ),
            line(
                6,
                json!({"kind":"assistant_items","items":[{"type":"text","text":"Done."}]}),
            ),
            line(
                7,
                json!({"kind":"turn_end","reason":"completed","usage":{"input_tokens":5,"output_tokens":2}}),
            ),
        ];
        let recording = Recording::from_log(&log, None);
        assert_eq!(recording.workspace.as_deref(), Some("/w"));
        assert_eq!(recording.first_checkpoint.as_deref(), Some("abc"));
        assert_eq!(recording.turns.len(), 1);
        let script: Vec<Value> = recording
            .script()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            script,
            vec![
                json!({"events":[{"text":"Looking."},{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"ls"}}}]}),
                json!({"events":[{"text":"Done."},{"usage":{"input_tokens":5,"output_tokens":2}}]}),
                json!({"events":[{"error":"pod replay: the recorded session has no more model replies"}]}),
            ]
        );
        assert_eq!(recording.results["c1"][0].seq, 5);
        assert_eq!(recording.results["c1"][0].tool, "bash");

        let cut = Recording::from_log(&log, Some(5));
        assert_eq!(cut.calls.len(), 1);
        assert!(cut.script().contains("stopped at seq 5"));
        // Cut after a tool call and before its result: the call is not made.
        let cut = Recording::from_log(&log, Some(3));
        assert_eq!(
            cut.calls,
            vec![vec![
                json!({"text":"Looking."}),
                json!({"error":"pod replay: stopped at seq 3 (--until-seq)"})
            ]]
        );
    }
}
