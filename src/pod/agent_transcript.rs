//! `read_agent`'s answer: a pod's snapshot as a compact transcript a model
//! reads — user text, assistant text, each tool call as one line with its
//! outcome — cut at a size, with the `from_seq` to go on from.
//!
//! It reads the snapshot as JSON, the way any client does, so it depends on
//! the wire format only: the snapshot is the query.
//!
//! A snapshot of a long session is megabytes, and the transcript shows a
//! few kilobytes of it, so the frame is not parsed into one `Value` tree
//! (building and freeing it cost more than the attach itself): its entries
//! are kept as borrowed raw JSON, each read for its kind only, and parsed
//! whole only where the transcript shows it — a `tool_results` entry for its
//! outcomes, an entry inside the cut for its line.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// How much of one tool call's arguments or outcome a line shows.
const LINE_CAP: usize = 200;

/// The snapshot frame, its entries left raw.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    status: Value,
    #[serde(default, borrow)]
    entries: Vec<Line<'a>>,
    #[serde(default)]
    in_flight: Value,
}

/// One `{"seq", "entry"}` line of the snapshot.
#[derive(Deserialize)]
struct Line<'a> {
    seq: Option<u64>,
    #[serde(borrow)]
    entry: &'a RawValue,
}

/// An entry read for its kind alone (the rest is skipped, not built).
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
}

/// The part of a `tool_results` entry an outcome shows.
#[derive(Deserialize)]
struct Results<'a> {
    #[serde(default, borrow)]
    results: Vec<ResultHead<'a>>,
}

#[derive(Deserialize)]
struct ResultHead<'a> {
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    output: Option<Cow<'a, str>>,
    is_error: Option<bool>,
}

/// The entry kinds [`describe`] shows; every other kind is skipped unparsed.
const SHOWN: &[&str] = &[
    "user_input",
    "assistant_items",
    "approval_request",
    "approval_decision",
    "turn_end",
    "agent_started",
    "agent_turn_end",
];

fn kind_of(entry: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Kind>(entry.get()).ok()?.kind
}

/// Renders the snapshot frame `frame` (one line of JSON) from `from_seq`
/// on, in at most about `max_bytes`; an error when it is not a snapshot.
pub fn render(name: &str, frame: &[u8], from_seq: u64, max_bytes: usize) -> Result<String, String> {
    let frame: Frame = serde_json::from_slice(frame).map_err(|e| e.to_string())?;
    if frame.kind != "snapshot" {
        return Err(format!(
            "the first frame was not a snapshot: {}",
            Value::from(frame.kind.as_ref())
        ));
    }
    let outcomes = outcomes(&frame.entries);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pod {name}, session {}, state {}",
        frame.session_id.as_deref().unwrap_or("?"),
        frame.status["state"].as_str().unwrap_or("?"),
    );
    let mut cut_at = None;
    for line in &frame.entries {
        let Some(seq) = line.seq else {
            continue;
        };
        if seq < from_seq {
            continue;
        }
        if !kind_of(line.entry).is_some_and(|kind| SHOWN.contains(&kind.as_ref())) {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<Value>(line.entry.get()) else {
            continue;
        };
        let Some(text) = describe(&entry, &outcomes) else {
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
            if let Some(text) = frame.in_flight["text"].as_str() {
                let block = clip(text, max_bytes.saturating_sub(out.len()).max(LINE_CAP));
                let _ = writeln!(out, "[streaming] assistant: {block}");
            }
        }
    }
    Ok(out)
}

/// Each tool call's outcome by call id: `ok`/`error` and its first line.
fn outcomes(entries: &[Line]) -> HashMap<String, String> {
    let mut found = HashMap::new();
    for line in entries {
        if kind_of(line.entry).as_deref() != Some("tool_results") {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<Results>(line.entry.get()) else {
            continue;
        };
        for result in entry.results {
            let Some(id) = result.call_id else {
                continue;
            };
            let output = result.output.as_deref().unwrap_or("");
            let first = output.lines().next().unwrap_or("");
            let verdict = if result.is_error == Some(true) {
                "error"
            } else {
                "ok"
            };
            found.insert(
                id.into_owned(),
                format!("{verdict}: {}", clip(first, LINE_CAP)),
            );
        }
    }
    found
}

/// One entry as a line, or `None` for what a reader does not need.
fn describe(entry: &Value, outcomes: &HashMap<String, String>) -> Option<String> {
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
        let text = render("p.c", snapshot().to_string().as_bytes(), 0, 16 * 1024).unwrap();
        assert!(text.contains("[1] user: fix it"), "{text}");
        assert!(
            text.contains(r#"[2] tool bash {"command":"ls"} → ok: a"#),
            "{text}"
        );
        assert!(text.contains("[4] assistant: done"), "{text}");
        assert!(text.contains("[streaming] assistant: more"), "{text}");
    }

    #[test]
    fn escaped_text_reads_as_written_and_a_result_after_the_cut_still_shows() {
        let frame = json!({"type":"snapshot","session_id":"s1","status":{"state":"idle"},
            "entries":[
                {"seq":0,"entry":{"kind":"session_start"}},
                {"seq":1,"entry":{"kind":"user_input","segments":[{"type":"text","text":"say \"hi\"\n→ now"}]}},
                {"seq":2,"entry":{"kind":"assistant_items","items":[{"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"echo"}}]}},
                {"seq":3,"entry":{"kind":"usage","anything":[1,{"deep":null}]}},
                {"seq":4,"entry":{"kind":"assistant_items","items":[{"type":"text","text":"x".repeat(400)}]}},
                {"seq":5,"entry":{"kind":"tool_results","results":[{"call_id":"c1","output":"fine\nmore","is_error":true}]}}
            ],
            "in_flight":null});
        let text = render("p.c", frame.to_string().as_bytes(), 0, 300).unwrap();
        assert!(text.contains("[1] user: say \"hi\"\n→ now\n"), "{text}");
        assert!(
            text.contains(r#"[2] tool bash {"command":"echo"} → error: fine"#),
            "{text}"
        );
        assert!(text.contains("from_seq 4 reads on"), "{text}");
    }

    #[test]
    fn a_first_frame_that_is_not_a_snapshot_is_an_error() {
        let why = render("p.c", br#"{"type":"greeting"}"#, 0, 1024).unwrap_err();
        assert_eq!(why, r#"the first frame was not a snapshot: "greeting""#);
        assert!(render("p.c", b"{not json", 0, 1024).is_err());
    }

    #[test]
    fn a_cut_transcript_names_the_seq_to_go_on_from() {
        let text = render("p.c", snapshot().to_string().as_bytes(), 2, 90).unwrap();
        assert!(!text.contains("user: fix it"), "{text}");
        assert!(text.contains("from_seq 4"), "{text}");
    }
}
