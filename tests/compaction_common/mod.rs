//! Shared helpers for the compaction tests: scripts, a pod with a small
//! context window, and the checks every trigger shares (the order of what a
//! client saw, the switch itself, the gapless invariant per session).
//!
//! Most tests trigger compaction through reported usage (`input_tokens`
//! 9000 against a [`WINDOW`] of 10000 tokens compacting at 8000), which is
//! exact. Every model call takes the next script line, the summarising call
//! included, so a script reads as the sequence of calls the pod is expected
//! to make: a call it should not make shows up as the wrong reply further on.

// Each test crate compiles this module on its own and uses only some of it.
#![allow(dead_code)]

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::harness::{Client, Pod};

pub const WINDOW: &str = "10000";

pub fn script(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

pub fn text(t: &str) -> Value {
    json!({"events":[{"text":t}]})
}

/// A reply whose usage says the context is over the threshold.
pub fn big_text(t: &str) -> Value {
    json!({"events":[{"text":t},{"usage":{"input_tokens":9000,"output_tokens":0}}]})
}

pub fn read_file_call(path: &str, usage: u64) -> Value {
    json!({"events":[
        {"tool_call":{"name":"read_file","arguments":{"path":path}}},
        {"usage":{"input_tokens":usage,"output_tokens":0}}
    ]})
}

pub fn failing(message: &str) -> Value {
    json!({"events":[{"error":message}]})
}

pub fn pod(lines: &[Value]) -> Pod {
    Pod::builder()
        .script(&script(lines))
        .arg("--context-window")
        .arg(WINDOW)
        .start()
}

pub fn attach(pod: &Pod) -> Client {
    let mut c = pod.client();
    c.until_type("snapshot");
    c
}

pub fn current_session(pod: &Pod) -> String {
    pod.log_lines()[0]["entry"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub fn session_files(pod: &Pod) -> usize {
    std::fs::read_dir(pod.data_dir.join("sessions"))
        .unwrap()
        .count()
}

/// An entry's kind, the pod's environment entry named `environment`.
pub fn kind_of(entry: &Value) -> String {
    match entry["kind"].as_str().unwrap() {
        "hook_injected_items" if entry["items"][0]["source"] == "environment" => {
            "environment".into()
        }
        kind => kind.into(),
    }
}

/// Reads up to the environment entry, the last of those a compaction (or
/// a session's first turn) commits at its start.
pub fn until_environment(client: &mut Client) -> Value {
    client.until_with("the environment entry", |f| {
        f["type"] == "entry" && kind_of(&f["entry"]) == "environment"
    })
}

pub fn kinds(lines: &[Value]) -> Vec<String> {
    lines.iter().map(|l| kind_of(&l["entry"])).collect()
}

/// The frames a client received, minus streaming hints and status, as short
/// readable strings; session ids are replaced by their labels.
pub fn trace(client: &Client, labels: &[(&str, &str)]) -> Vec<String> {
    let labels: HashMap<&str, &str> = labels.iter().copied().collect();
    let name = |v: &Value| -> String {
        let id = v.as_str().unwrap_or("?");
        labels.get(id).copied().unwrap_or(id).to_owned()
    };
    client
        .frames
        .iter()
        .filter_map(|f| {
            Some(match f["type"].as_str().unwrap() {
                "snapshot" => format!(
                    "snapshot {} {}",
                    name(&f["session_id"]),
                    f["entries"].as_array().unwrap().len()
                ),
                "entry" => format!(
                    "{}#{} {}",
                    name(&f["session_id"]),
                    f["seq"],
                    kind_of(&f["entry"])
                ),
                "compact_start" => format!("compact_start {}", f["reason"].as_str().unwrap()),
                "compact_done" => format!("compact_done {}", name(&f["new_session_id"])),
                "compact_failed" => "compact_failed".into(),
                "notification" => format!("notification {}", f["source"].as_str().unwrap()),
                "turn_start" => "turn_start".into(),
                "response" => "response".into(),
                "error" => format!("error {}", f["code"].as_str().unwrap()),
                _ => return None,
            })
        })
        .collect()
}

/// The states the client was told, in order, starting with its snapshot's.
pub fn states(client: &Client) -> Vec<String> {
    client
        .frames
        .iter()
        .filter_map(|f| match f["type"].as_str() {
            Some("snapshot") => Some(f["status"]["state"].as_str().unwrap().to_owned()),
            Some("status") => Some(f["state"].as_str().unwrap().to_owned()),
            _ => None,
        })
        .collect()
}

/// The invariant across a switch: for every session the client saw, its
/// frames for that session are exactly that session's log lines, and it
/// never went back to a session it had left. Call it once the client has
/// read everything the pod has committed.
pub fn assert_gapless(who: &str, client: &Client, pod: &Pod) {
    let view = client.log_view();
    let mut order: Vec<String> = Vec::new();
    for (sid, _, _) in &view {
        if order.last() != Some(sid) {
            assert!(!order.contains(sid), "{who}: went back to session {sid}");
            order.push(sid.clone());
        }
    }
    assert!(!order.is_empty(), "{who}: saw no entries");
    for sid in order {
        let seen: Vec<(u64, Value)> = view
            .iter()
            .filter(|(s, _, _)| *s == sid)
            .map(|(_, seq, entry)| (*seq, entry.clone()))
            .collect();
        let log: Vec<(u64, Value)> = pod
            .session_lines(&sid)
            .iter()
            .map(|l| (l["seq"].as_u64().unwrap(), l["entry"].clone()))
            .collect();
        assert_eq!(seen, log, "{who}: frames of session {sid} are not its log");
    }
}

/// `compact_done` is immediately followed by the new session's first two
/// entries; returns the new session id and checks what they hold.
pub fn assert_switch(client: &Client, old: &str, summary: &str) -> String {
    let frames = &client.frames;
    let i = frames
        .iter()
        .position(|f| f["type"] == "compact_done")
        .expect("no compact_done");
    let done = &frames[i];
    let new = done["new_session_id"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    let (before, after) = (
        done["tokens_before"].as_u64().unwrap(),
        done["tokens_after"].as_u64().unwrap(),
    );
    assert!(0 < after && after < before, "tokens {before} -> {after}");
    let start = &frames[i + 1];
    assert_eq!(start["type"], "entry", "right after compact_done: {start}");
    assert_eq!(start["session_id"], new.as_str());
    assert_eq!(start["seq"], 0);
    assert_eq!(start["entry"]["kind"], "session_start");
    assert_eq!(start["entry"]["session_id"], new.as_str());
    assert_eq!(start["entry"]["compacted_from"], old);
    let injected = &frames[i + 2];
    assert_eq!(injected["session_id"], new.as_str());
    assert_eq!(injected["seq"], 1);
    assert_eq!(
        injected["entry"],
        json!({"kind":"hook_injected_items","items":[{"source":"compact_summary","text":summary}]})
    );
    new
}

/// The status a client saw went to `compacting` before `compact_done` (or
/// `compact_failed`) and left it after.
pub fn assert_compacting_shown(client: &Client) {
    let frames = &client.frames;
    let end = frames
        .iter()
        .position(|f| f["type"] == "compact_done" || f["type"] == "compact_failed")
        .expect("no compaction outcome");
    let compacting = |f: &Value| f["type"] == "status" && f["state"] == "compacting";
    assert!(
        frames[..end].iter().any(compacting),
        "no compacting status before the outcome"
    );
    let after = frames[end..]
        .iter()
        .find(|f| f["type"] == "status")
        .expect("no status after the outcome");
    assert_ne!(after["state"], "compacting");
}

pub fn get_session(client: &mut Client, id: &str) -> Vec<Value> {
    client.send(json!({"type":"get_session","request_id":"gs","session_id":id}));
    let response = client.until_with("get_session response", |f| {
        f["type"] == "response" && f["request_id"] == "gs"
    });
    assert_eq!(response["session_id"], id);
    response["entries"].as_array().unwrap().clone()
}

pub fn compact(client: &mut Client) {
    client.send(json!({"type":"compact"}));
}
