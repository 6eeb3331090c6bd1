//! A pod killed at each step of a compaction (`POD_FAULT=crash_at=STEP`), or
//! during a turn that a compaction carried into a new session, restarts on
//! a complete session and closes the turn the crash cut short.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod compaction_common;
mod harness;

use std::time::Duration;

use compaction_common::*;
use harness::Pod;
use serde_json::json;

/// A pod killed at `step` of a mid-turn compaction restarts on a complete
/// session: the old one before the pointer moved, the new one after; the
/// turn the crash cut short is closed as interrupted in whichever is
/// current, and the pod serves and runs a turn.
fn crash_at(step: &str) {
    let mut pod = Pod::builder()
        .script(&script(&[
            read_file_call("small.txt", 9000),
            text("SUMMARY crash"),
        ]))
        .arg("--context-window")
        .arg(WINDOW)
        .env("POD_FAULT", &format!("crash_at={step}"))
        .start();
    std::fs::write(pod.workspace.join("small.txt"), "tiny\n").unwrap();
    let mut a = attach(&pod);
    let old = current_session(&pod);
    a.run("read small.txt");
    a.until_type("compact_start");
    while a.next().is_some() {}
    assert!(!pod.wait_exit(Duration::from_secs(20)).success());
    let old_lines = pod.session_lines(&old);
    assert_eq!(
        kinds(&old_lines),
        [
            "session_start",
            "user_input",
            "environment",
            "assistant_items",
            "tool_results"
        ]
    );
    let moved = step == "pointer_moved";

    let dir = pod.into_dir();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script(&[text("after the restart")]))
        .start();
    let current = current_session(&pod);
    assert_eq!(current != old, moved, "{step}: resumed the wrong session");
    let mut b = pod.client();
    let snapshot = b.until_type("snapshot");
    assert_eq!(snapshot["session_id"], current.as_str());
    // The interrupted turn is closed before anything else runs (the client
    // may get its end in the snapshot or as an entry).
    let seen = snapshot["entries"].as_array().unwrap();
    if seen.last().unwrap()["entry"]["kind"] != "turn_end" {
        b.until_entry("turn_end");
    }
    let lines = pod.session_lines(&current);
    let closed = lines.len() - 1;
    assert_eq!(lines[closed]["entry"]["kind"], "turn_end");
    assert_eq!(lines[closed]["entry"]["reason"], "interrupted");
    if moved {
        assert_eq!(
            kinds(&lines),
            [
                "session_start",
                "hook_injected_items",
                "environment",
                "turn_end"
            ]
        );
        assert_eq!(lines[0]["entry"]["compacted_from"], old.as_str());
        assert_eq!(lines[1]["entry"]["items"][0]["text"], "SUMMARY crash");
        assert_eq!(pod.session_lines(&old), old_lines, "old log touched");
    } else {
        assert_eq!(lines[..closed], old_lines[..]);
    }
    b.run("still there?");
    let end = b.until_entry("turn_end");
    assert_eq!(end["session_id"], current.as_str());
    assert_eq!(end["entry"]["reason"], "completed");
    assert_gapless("b", &b, &pod);
}

#[test]
fn kill_9_after_the_summary_resumes_the_old_session() {
    crash_at("summarised");
}

#[test]
fn kill_9_with_the_new_log_half_written_resumes_the_old_session() {
    crash_at("new_session_partial");
}

#[test]
fn kill_9_before_the_pointer_moves_resumes_the_old_session() {
    crash_at("new_session_written");
}

#[test]
fn kill_9_after_the_pointer_moved_resumes_the_complete_new_session() {
    crash_at("pointer_moved");
}

#[test]
fn a_turn_cut_short_in_a_compacted_session_is_closed_there_on_restart() {
    let mut pod = pod(&[
        read_file_call("small.txt", 9000),
        text("SUMMARY"),
        json!({"events":[
            {"text":"running it"},
            {"tool_call":{"id":"slow","name":"bash","arguments":{"command":"touch started; sleep 3"}}}
        ]}),
    ]);
    std::fs::write(pod.workspace.join("small.txt"), "tiny\n").unwrap();
    let mut a = attach(&pod);
    a.run("read small.txt, then run something slow");
    a.until_type("compact_done");
    let call = a.until_entry("assistant_items");
    assert_eq!(call["entry"]["items"][0]["type"], "text");
    let call = a.until_entry("assistant_items");
    assert_eq!(call["entry"]["items"][0]["type"], "tool_call");
    let new = call["session_id"].as_str().unwrap().to_owned();
    // Kill only once the command runs: a child between fork and exec still
    // holds the pod's listening socket, and a restart inside that window
    // would find the socket live.
    let started = pod.workspace.join("started");
    harness::eventually("the command to start", Duration::from_secs(10), || {
        started.exists()
    });
    pod.kill9();

    let pod = Pod::builder()
        .in_dir(pod.into_dir())
        .script(&script(&[text("back")]))
        .start();
    assert_eq!(current_session(&pod), new);
    let mut b = pod.client();
    b.until_type("snapshot");
    harness::eventually("the turn to be closed", Duration::from_secs(10), || {
        kinds(&pod.log_lines()).last().map(String::as_str) == Some("turn_end")
    });
    let lines = pod.log_lines();
    assert_eq!(
        kinds(&lines),
        [
            "session_start",
            "hook_injected_items",
            "environment",
            "assistant_items",
            "assistant_items",
            "checkpoint",
            "tool_results",
            "checkpoint",
            "turn_end"
        ]
    );
    assert_eq!(lines[6]["entry"]["results"][0]["call_id"], "slow");
    assert_eq!(lines[6]["entry"]["results"][0]["is_error"], true);
    assert_eq!(lines[8]["entry"]["reason"], "interrupted");
    b.run("hello again");
    // (The interrupted turn's end may reach b as an entry, after its snapshot.)
    b.until_with("the new turn's end", |f| {
        f["type"] == "entry" && f["entry"]["kind"] == "turn_end" && f["seq"] == 11
    });
    assert_eq!(pod.log_lines()[11]["entry"]["reason"], "completed");
    assert_gapless("b", &b, &pod);
}
