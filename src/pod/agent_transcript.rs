//! `read_agent`'s answer: a pod's snapshot as a compact transcript a model
//! reads — user text, assistant text, each tool call as one line with its
//! outcome — cut at a size, with the `from_seq` to go on from.
//!
//! It reads the snapshot as JSON, the way any client does, so it depends on
//! the wire format only: the snapshot is the query.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::Value;

/// How much of one tool call's arguments or outcome a line shows.
const LINE_CAP: usize = 200;

/// Renders `snapshot`'s entries from `from_seq` on, in at most about
/// `max_bytes`.
pub fn render(name: &str, snapshot: &Value, from_seq: u64, max_bytes: usize) -> String {
    let entries = snapshot["entries"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let outcomes = outcomes(entries);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pod {name}, session {}, state {}",
        snapshot["session_id"].as_str().unwrap_or("?"),
        snapshot["status"]["state"].as_str().unwrap_or("?"),
    );
    let mut cut_at = None;
    for line in entries {
        let Some(seq) = line["seq"].as_u64() else {
            continue;
        };
        if seq < from_seq {
            continue;
        }
        let Some(text) = describe(&line["entry"], &outcomes) else {
            continue;
        };
        let text = format!("[{seq}] {text}\n");
        if out.len() + text.len() > max_bytes {
            cut_at = Some(seq);
            break;
        }
        out.push_str(&text);
    }
    match cut_at {
        Some(seq) => {
            let _ = writeln!(
                out,
                "[cut at {max_bytes} bytes: read_agent with from_seq {seq} reads on]"
            );
        }
        None => {
            if let Some(text) = snapshot["in_flight"]["text"].as_str() {
                let block = clip(text, max_bytes.saturating_sub(out.len()).max(LINE_CAP));
                let _ = writeln!(out, "[streaming] assistant: {block}");
            }
        }
    }
    out
}

/// Each tool call's outcome by call id: `ok`/`error` and its first line.
fn outcomes(entries: &[Value]) -> HashMap<&str, String> {
    let mut found = HashMap::new();
    for line in entries {
        let entry = &line["entry"];
        if entry["kind"] != "tool_results" {
            continue;
        }
        for result in entry["results"].as_array().into_iter().flatten() {
            let Some(id) = result["call_id"].as_str() else {
                continue;
            };
            let output = result["output"].as_str().unwrap_or("");
            let first = output.lines().next().unwrap_or("");
            let verdict = if result["is_error"] == true {
                "error"
            } else {
                "ok"
            };
            found.insert(id, format!("{verdict}: {}", clip(first, LINE_CAP)));
        }
    }
    found
}

/// One entry as a line, or `None` for what a reader does not need.
fn describe(entry: &Value, outcomes: &HashMap<&str, String>) -> Option<String> {
    let str_of = |v: &Value| v.as_str().unwrap_or("").to_owned();
    match entry["kind"].as_str()? {
        "user_input" => {
            let text: Vec<String> = entry["segments"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| match s["text"].as_str() {
                    Some(text) => text.to_owned(),
                    None => format!("[{}]", str_of(&s["type"])),
                })
                .collect();
            Some(format!("user: {}", text.join(" ")))
        }
        "assistant_items" => {
            let item = &entry["items"][0];
            match item["type"].as_str()? {
                "text" => Some(format!("assistant: {}", str_of(&item["text"]))),
                "tool_call" => {
                    let id = item["call_id"].as_str().unwrap_or("");
                    let outcome = outcomes
                        .get(id)
                        .map_or("(no result yet)".to_owned(), Clone::clone);
                    Some(format!(
                        "tool {} {} → {outcome}",
                        str_of(&item["name"]),
                        clip(&item["arguments"].to_string(), LINE_CAP)
                    ))
                }
                _ => None,
            }
        }
        "approval_request" => Some(format!(
            "waits for approval: {}",
            clip(&str_of(&entry["summary"]), LINE_CAP)
        )),
        "approval_decision" => Some(format!(
            "approval: {} by {}",
            str_of(&entry["decision"]),
            str_of(&entry["by"])
        )),
        "turn_end" => Some(format!("turn end: {}", str_of(&entry["reason"]))),
        "agent_started" => Some(format!(
            "agent {} started: {}",
            str_of(&entry["name"]),
            clip(&str_of(&entry["task"]), LINE_CAP)
        )),
        "agent_turn_end" => Some(format!(
            "agent {} turn end: {}",
            str_of(&entry["name"]),
            str_of(&entry["reason"])
        )),
        _ => None,
    }
}

fn clip(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let cut = crate::tools::floor_char_boundary(text, cap);
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshot() -> Value {
        json!({"type":"snapshot","session_id":"s1","status":{"state":"running"},
            "entries":[
                {"seq":0,"entry":{"kind":"session_start"}},
                {"seq":1,"entry":{"kind":"user_input","segments":[{"type":"text","text":"fix it"}]}},
                {"seq":2,"entry":{"kind":"assistant_items","items":[{"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"ls"}}]}},
                {"seq":3,"entry":{"kind":"tool_results","results":[{"call_id":"c1","output":"a\nb","is_error":false}]}},
                {"seq":4,"entry":{"kind":"assistant_items","items":[{"type":"text","text":"done"}]}}
            ],
            "in_flight":{"type":"text","text":"more"}})
    }

    #[test]
    fn a_transcript_shows_input_calls_with_outcomes_and_text() {
        let text = render("p.c", &snapshot(), 0, 16 * 1024);
        assert!(text.contains("[1] user: fix it"), "{text}");
        assert!(
            text.contains(r#"[2] tool bash {"command":"ls"} → ok: a"#),
            "{text}"
        );
        assert!(text.contains("[4] assistant: done"), "{text}");
        assert!(text.contains("[streaming] assistant: more"), "{text}");
    }

    #[test]
    fn a_cut_transcript_names_the_seq_to_go_on_from() {
        let text = render("p.c", &snapshot(), 2, 90);
        assert!(!text.contains("user: fix it"), "{text}");
        assert!(text.contains("from_seq 4"), "{text}");
    }
}
