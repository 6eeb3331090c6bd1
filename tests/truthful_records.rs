//! The record tells the truth: a cancelled command's result holds what it
//! did, a turn that ended with an error says why in its `turn_end`, a
//! running command's output streams, and a client that reconnects can tell
//! which turn is its own.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::Pod;
use serde_json::{json, Value};

fn bash_then_text(command: &str) -> String {
    format!(
        "{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":command}}}]}),
        json!({"events":[{"text":"done"}]})
    )
}

fn result_of(lines: &[Value], call_id: &str) -> Value {
    lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .flat_map(|l| l["entry"]["results"].as_array().unwrap().clone())
        .find(|r| r["call_id"] == call_id)
        .expect("a result for the call")
}

#[test]
fn cancel_during_a_bash_loop_keeps_the_ticks_and_says_it_was_killed() {
    let pod = Pod::builder()
        .script(&bash_then_text(
            "for i in 1 2 3 4 5 6 7 8 9; do echo tick $i | tee -a ticks.txt; sleep 0.2; done",
        ))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("count");
    // Wait until at least two ticks were printed, as streamed hints.
    let mut ticks = String::new();
    while !ticks.contains("tick 2") {
        let frame = c.until_type("tool_output_delta");
        assert_eq!(frame["call_id"], "c1");
        ticks.push_str(frame["text"].as_str().unwrap());
    }
    c.send(json!({"type":"cancel"}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "cancelled");
    let result = result_of(&pod.log_lines(), "c1");
    let output = result["output"].as_str().unwrap();
    let on_disk = std::fs::read_to_string(pod.workspace.join("ticks.txt")).unwrap();
    for line in on_disk.lines() {
        assert!(
            output.contains(line),
            "{line:?} ran but is not in {output:?}"
        );
    }
    assert!(
        output
            .trim_end()
            .ends_with("[cancelled: the command was killed]"),
        "{output}"
    );
    assert!(!output.contains("before this tool call ran"), "{output}");
}

#[test]
fn output_streams_before_the_result() {
    let pod = Pod::builder()
        .script(&bash_then_text(
            "for i in 1 2 3; do echo line $i; sleep 0.1; done",
        ))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    c.until_entry("turn_end");
    let position = |pred: &dyn Fn(&Value) -> bool| c.frames.iter().position(pred);
    let first_delta = position(&|f| f["type"] == "tool_output_delta").expect("streamed output");
    let result = position(&|f| f["type"] == "entry" && f["entry"]["kind"] == "tool_results")
        .expect("a result");
    assert!(first_delta < result);
    let streamed: String = c
        .frames
        .iter()
        .filter(|f| f["type"] == "tool_output_delta")
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "line 1\nline 2\nline 3\n");
}

#[test]
fn a_model_error_is_in_turn_end_and_in_pod_log() {
    let script =
        json!({"events":[{"text":"Halfway th"},{"error":"connection reset by the script"}]});
    let pod = Pod::builder().script(&script.to_string()).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"run","request_id":"mine","segments":[{"type":"text","text":"hi"}]}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "error");
    assert_eq!(end["entry"]["request_id"], "mine");
    assert_eq!(end["entry"]["error"]["code"], "provider_stream");
    let message = end["entry"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("connection reset by the script"),
        "{message}"
    );
    // The partial text is kept, before the end.
    let lines = pod.log_lines();
    assert_eq!(
        harness::first_of(&lines, "assistant:text")["entry"]["items"][0]["text"],
        "Halfway th"
    );
    let log = harness::succeeded(pod.command("log").output().unwrap());
    assert!(log.contains("connection reset by the script"), "{log}");
    assert!(log.contains("provider_stream"), "{log}");
}

#[test]
fn a_client_that_reconnects_mid_turn_finds_its_turn_in_the_status() {
    let pod = Pod::builder()
        .script(&harness::slow_text_reply(40, 20))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"run","request_id":"r-42","segments":[{"type":"text","text":"hi"}]}));
    let start = c.until_type("turn_start");
    drop(c);
    let mut again = pod.client();
    let snapshot = again.until_type("snapshot");
    let turn = &snapshot["status"]["turn"];
    assert_eq!(turn["request_id"], "r-42");
    assert_eq!(turn["turn_id"], start["turn_id"]);
    let end = again.until_entry("turn_end");
    assert_eq!(end["entry"]["turn_id"], turn["turn_id"]);
    assert_eq!(end["entry"]["request_id"], "r-42");
    // The input records its turn too.
    let input = &pod.log_lines()[1]["entry"];
    assert_eq!(input["turn_id"], turn["turn_id"]);
    assert_eq!(input["request_id"], "r-42");
}

#[test]
fn cancel_with_run_removes_a_queued_run_and_leaves_the_running_turn() {
    let pod = Pod::builder()
        .script(&harness::slow_text_reply(30, 20))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let run =
        |id: &str| json!({"type":"run","request_id":id,"segments":[{"type":"text","text":id}]});
    c.send(run("first"));
    c.send(run("second"));
    c.until_with("second queued", |v| v["request_id"] == "second");
    c.send(json!({"type":"cancel","run":"second","request_id":"x"}));
    let answer = c.until_with("the cancel answer", |v| v["request_id"] == "x");
    assert_eq!(answer["removed"], true, "{answer}");
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed");
    assert_eq!(end["entry"]["request_id"], "first");
    std::thread::sleep(Duration::from_millis(300));
    let inputs = pod
        .log_lines()
        .iter()
        .filter(|l| l["entry"]["kind"] == "user_input")
        .count();
    assert_eq!(inputs, 1, "the removed run started anyway");
    c.send(json!({"type":"cancel","run":"nobody","request_id":"y"}));
    let answer = c.until_with("the cancel answer", |v| v["request_id"] == "y");
    assert_eq!(answer["code"], "not_running");
}

#[test]
fn a_run_that_starts_at_once_never_shows_as_queued() {
    let pod = Pod::builder()
        .script(&harness::slow_text_reply(3, 10))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("hi");
    c.until_entry("turn_end");
    for status in c.frames.iter().filter(|f| f["type"] == "status") {
        assert_eq!(status["queued"], 0, "{status}");
    }
}
