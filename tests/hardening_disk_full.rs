//! A disk that fills up and is freed again, and logs that an older pod left
//! with turns it never closed: the log must still project to a context a
//! model API accepts — no tool call without its result.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use std::time::Duration;

use harness::{kinds, Pod};
use serde_json::{json, Value};
use support::{data_frames, model_server, Reply};

/// Item 2: the disk fills up while a tool runs (the tool itself creates the
/// fault marker), so neither its result nor the turn's end can be
/// committed. Once the disk takes writes again, the next run first closes
/// that turn — a result for the call, `turn_end` — and only then commits
/// its own input.
#[test]
fn a_turn_whose_end_failed_on_a_full_disk_is_closed_before_the_next_input() {
    let script = [
        json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"touch disk-full"}}}]}),
        json!({"events":[{"text":"after the disk was freed"}]}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ws/disk-full");
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .env(
            "POD_FAULT",
            &format!("fail_writes_while={}", marker.display()),
        )
        .start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("fill the disk");
    let err = client.until_type("error");
    assert_eq!(err["code"], "storage_error", "{err}");
    assert_eq!(
        kinds(&pod.log_lines()),
        [
            "session_start",
            "user_input",
            "environment",
            "assistant:tool_call",
            "checkpoint"
        ]
    );

    // The disk is freed; the next run goes through, the old turn closed first.
    harness::eventually("the tool to have run", Duration::from_secs(20), || {
        marker.exists()
    });
    std::fs::remove_file(&marker).unwrap();
    client.run("again");
    client.until(|f| {
        f["type"] == "entry"
            && f["entry"]["kind"] == "turn_end"
            && f["entry"]["reason"] == "completed"
    });
    let log = pod.log_lines();
    assert_eq!(
        kinds(&log),
        [
            "session_start",
            "user_input",
            "environment",
            "assistant:tool_call",
            "checkpoint",
            "tool_results",
            "checkpoint",
            "turn_end",
            "user_input",
            "assistant:text",
            "turn_end",
        ]
    );
    let result = &harness::first_of(&log, "tool_results")["entry"]["results"][0];
    assert_eq!(result["call_id"], "c1");
    assert_eq!(result["is_error"], true);
    assert_eq!(log[7]["entry"]["reason"], "error");
}

fn line(seq: usize, entry: Value) -> String {
    json!({"seq": seq, "entry": entry}).to_string()
}

fn tool_call(id: &str) -> Value {
    json!({"kind":"assistant_items","items":[
        {"type":"tool_call","call_id":id,"name":"read_file","arguments":{"path":"x"}}
    ]})
}

fn user_input(text: &str) -> Value {
    json!({"kind":"user_input","segments":[{"type":"text","text":text}],
           "at":"2025-01-01T00:00:00Z"})
}

/// Checks an OpenAI chat request the way the API does: every assistant
/// tool call is answered by a `tool` message before the next other message,
/// and every `tool` message answers a call.
fn assert_openai_accepts(request: &Value) {
    let messages = request["messages"].as_array().unwrap();
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str().unwrap() {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                assert!(
                    open.iter().any(|c| c == id),
                    "a tool message answers no call ({id}): {messages:#?}"
                );
                open.retain(|c| c != id);
            }
            role => {
                assert!(
                    open.is_empty(),
                    "tool calls {open:?} have no result before a {role} message: {messages:#?}"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    open = calls
                        .iter()
                        .map(|c| c["id"].as_str().unwrap().to_owned())
                        .collect();
                }
            }
        }
    }
    assert!(open.is_empty(), "tool calls {open:?} have no result");
}

/// Item 2: a log an older pod left with an unfinished turn in the middle (a
/// tool call with no result and no `turn_end`, then more turns) and one at
/// the end still gives the model a valid context: the last turn is closed on
/// start, and the earlier one is answered in the projection.
#[test]
fn every_unfinished_turn_of_a_damaged_log_projects_to_a_valid_context() {
    let answer = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"fine"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&answer)]);

    let dir = tempfile::tempdir().unwrap();
    let session = "6a3c1f52-1f2e-4c47-9a53-0c8e3f6d2b11";
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("sessions")).unwrap();
    std::fs::create_dir_all(data.join("pods")).unwrap();
    let entries = [
        json!({"kind":"session_start","session_id":session,
               "created_at":"2025-01-01T00:00:00Z","compacted_from":null,"forked_from":null}),
        user_input("one"),
        tool_call("c1"),
        user_input("two"),
        json!({"kind":"assistant_items","items":[{"type":"text","text":"two done"}]}),
        json!({"kind":"turn_end","reason":"completed","usage":null}),
        user_input("three"),
        tool_call("c2"),
    ];
    let log: Vec<String> = entries
        .into_iter()
        .enumerate()
        .map(|(seq, e)| line(seq, e))
        .collect();
    std::fs::write(
        data.join(format!("sessions/{session}.jsonl")),
        log.join("\n") + "\n",
    )
    .unwrap();
    // The state file of the pod the workspace `ws` names.
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let name = pod::cli::derived_name(&workspace.canonicalize().unwrap());
    std::fs::write(
        data.join(format!("pods/{name}.json")),
        json!({ "session_id": session }).to_string(),
    )
    .unwrap();

    let pod = Pod::builder()
        .in_dir(dir)
        .args(["--provider", "openai", "--model", "m", "--base-url"])
        .arg(format!("{}/v1", server.url))
        .env("OPENAI_API_KEY", "test-key")
        .start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("four");
    let end = client
        .until(|f| f["type"] == "entry" && f["entry"]["kind"] == "turn_end" && f["seq"] == 13);
    assert_eq!(end["entry"]["reason"], "completed", "{:?}", client.frames);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_openai_accepts(&requests[0].json());
    // The last turn was closed in the log itself, on start.
    let kinds = kinds(&pod.log_lines());
    assert_eq!(
        kinds[8..],
        [
            "tool_results",
            "turn_end",
            "user_input",
            "environment",
            "assistant:text",
            "turn_end"
        ]
    );
}
