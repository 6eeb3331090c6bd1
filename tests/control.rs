//! pause / resume, shutdown mid-turn, queueing, and session resumption.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{slow_text_reply, Pod};
use serde_json::{json, Value};

#[test]
fn pause_holds_the_turn_before_its_model_call_and_resume_lets_it_go_on() {
    let pod = Pod::start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"pause","request_id":"p"}));
    assert_eq!(c.until_type("response")["request_id"], "p");
    c.run("wait for it");
    c.until_entry("user_input");
    let snapshot = pod.client().until_type("snapshot");
    assert_eq!(snapshot["status"]["state"], "paused");
    // Held: nothing more is committed while paused.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        harness::kinds(&pod.log_lines()),
        ["session_start", "user_input", "environment"],
        "the model was called while paused"
    );
    c.send(json!({"type":"resume"}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
}

#[test]
fn runs_queue_in_order_and_report_how_many_are_ahead() {
    let pod = Pod::builder().script(&slow_text_reply(10, 20)).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    for i in 0..3 {
        c.send(json!({"type":"run","request_id":format!("r{i}"),
            "segments":[{"type":"text","text":format!("run {i}")}]}));
    }
    for i in 0..3 {
        let r = c.until_type("response");
        assert_eq!(r["request_id"], format!("r{i}"));
        assert_eq!(r["queued"], i, "runs ahead of r{i}");
    }
    for _ in 0..3 {
        c.until_entry("turn_end");
    }
    // A turn may start before the later runs are answered: look at every
    // frame received, not just those after the responses.
    let starts: Vec<&Value> = c
        .frames
        .iter()
        .filter(|f| f["type"] == "turn_start")
        .map(|f| &f["request_id"])
        .collect();
    assert_eq!(starts, ["r0", "r1", "r2"]);
    let inputs: Vec<&Value> = c
        .frames
        .iter()
        .filter(|f| f["type"] == "entry" && f["entry"]["kind"] == "user_input")
        .map(|f| &f["entry"]["segments"][0]["text"])
        .collect();
    assert_eq!(inputs, ["run 0", "run 1", "run 2"]);
}

#[test]
fn shutdown_mid_turn_cancels_it_flushes_and_exits_0() {
    let mut pod = Pod::builder().script(&slow_text_reply(200, 20)).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("long");
    c.until_type("text_delta");
    c.send(json!({"type":"shutdown"}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "cancelled");
    c.until_type("shutdown");
    assert!(c.next().is_none(), "the connection closes after shutdown");
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
    assert_eq!(pod.log_lines().last().unwrap()["entry"]["kind"], "turn_end");
}

#[test]
fn serve_resumes_the_current_session_unless_told_otherwise() {
    let pod = Pod::start();
    let mut c = pod.client();
    let first = c.until_type("snapshot")["session_id"].clone();
    c.run("remember me");
    c.until_entry("turn_end");
    drop(c);
    let dir = pod.into_dir();

    let pod = Pod::builder().in_dir(dir).start();
    let snapshot = pod.client().until_type("snapshot");
    assert_eq!(snapshot["session_id"], first);
    // session_start, user_input, environment, assistant text, turn_end.
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 5);
    let dir = pod.into_dir();

    let pod = Pod::builder().in_dir(dir).arg("--new-session").start();
    let snapshot = pod.client().until_type("snapshot");
    assert_ne!(snapshot["session_id"], first);
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 1);
}
