//! Compaction that does not help: a summariser error, an empty summary, one
//! that would not shrink the context or not bring it under the threshold, and the breaker that stops automatic
//! compaction after three failures in a row.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod compaction_common;
mod harness;

use compaction_common::*;
use harness::Pod;
use serde_json::{json, Value};

#[test]
fn a_summariser_error_is_compact_failed_and_the_turn_completes_in_the_old_session() {
    let pod = pod(&[
        read_file_call("small.txt", 9000),
        failing("the summariser exploded"),
        json!({"events":[{"text":"finished anyway"},{"usage":{"input_tokens":100,"output_tokens":5}}]}),
    ]);
    std::fs::write(pod.workspace.join("small.txt"), "tiny\n").unwrap();
    let mut a = attach(&pod);
    let mut b = attach(&pod);
    let old = current_session(&pod);
    a.run("read small.txt");
    for c in [&mut a, &mut b] {
        c.until_entry("turn_end");
        c.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    }
    let expected = [
        "snapshot old 1",
        "response",
        "turn_start",
        "old#1 user_input",
        "old#2 environment",
        "old#3 assistant_items",
        "old#4 tool_results",
        "compact_start auto_mid_turn",
        "compact_failed",
        "old#5 assistant_items",
        "old#6 turn_end",
    ];
    assert_eq!(trace(&a, &[(&old, "old")]), expected);
    // The other client hears everything but the answer to a's run.
    let mut others = expected.to_vec();
    others.remove(1);
    assert_eq!(trace(&b, &[(&old, "old")]), others);
    for c in [&a, &b] {
        let failed = c
            .frames
            .iter()
            .find(|f| f["type"] == "compact_failed")
            .unwrap();
        assert!(
            failed["error"]
                .as_str()
                .unwrap()
                .contains("the summariser exploded"),
            "{failed}"
        );
        assert_compacting_shown(c);
    }
    assert_eq!(current_session(&pod), old);
    assert_eq!(pod.log_lines()[6]["entry"]["reason"], "completed");
    assert_eq!(session_files(&pod), 1, "a failed compaction leaves no file");
    assert_gapless("a", &a, &pod);
}

#[test]
fn three_failures_in_a_row_stop_automatic_compaction_until_a_manual_one() {
    let pod = pod(&[
        big_text("one"),
        failing("e1"), // after turn 1
        failing("e2"), // before turn 2's model call
        big_text("two"),
        failing("e3"),     // after turn 2: the third failure
        big_text("three"), // turn 3: no attempt before or after
        text("SUMMARY manual"),
        big_text("four"),     // the check right after the manual one is skipped
        text("SUMMARY auto"), // after turn 4: the breaker was reset
    ]);
    let mut a = attach(&pod);
    let old = current_session(&pod);
    let idle = |f: &Value| f["type"] == "status" && f["state"] == "idle";
    for message in ["1", "2", "3"] {
        a.run(message);
        a.until_entry("turn_end");
        a.until_with("idle", idle);
    }
    assert_eq!(
        trace(&a, &[(&old, "old")]),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 environment",
            "old#3 assistant_items",
            "old#4 turn_end",
            "compact_start auto_post_turn",
            "compact_failed",
            "response",
            "turn_start",
            "old#5 user_input",
            "compact_start auto_mid_turn",
            "compact_failed",
            "old#6 assistant_items",
            "old#7 turn_end",
            "compact_start auto_post_turn",
            "compact_failed",
            "notification compactor",
            "response",
            "turn_start",
            "old#8 user_input",
            "old#9 assistant_items",
            "old#10 turn_end",
        ]
    );
    let note = a
        .frames
        .iter()
        .find(|f| f["type"] == "notification")
        .unwrap();
    assert_eq!(note["level"], "warn");
    assert!(
        note["message"].as_str().unwrap().contains("manual"),
        "{note}"
    );
    assert_eq!(pod.log_lines()[9]["entry"]["items"][0]["text"], "three");

    compact(&mut a);
    until_environment(&mut a);
    a.until_with("idle", idle);
    let new = assert_switch(&a, &old, "SUMMARY manual");
    a.frames.clear();
    a.run("4");
    until_environment(&mut a);
    a.until_with("idle", idle);
    let newest = current_session(&pod);
    assert_eq!(
        trace(&a, &[(&new, "new"), (&newest, "newest")]),
        [
            "response",
            "turn_start",
            "new#3 user_input",
            "new#4 assistant_items",
            "new#5 turn_end",
            "compact_start auto_post_turn",
            "compact_done newest",
            "newest#0 session_start",
            "newest#1 hook_injected_items",
            "newest#2 environment",
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[4]["entry"]["items"][0]["text"],
        "four"
    );
}

#[test]
fn an_empty_summary_is_a_failure() {
    let pod = pod(&[text("answer"), json!({"events":[{"text":"  \n "}]})]);
    let mut a = attach(&pod);
    a.run(&"context ".repeat(300));
    a.until_entry("turn_end");
    let old = current_session(&pod);
    let before = pod.log_lines();
    compact(&mut a);
    let failed = a.until_type("compact_failed");
    assert!(
        failed["error"].as_str().unwrap().contains("empty"),
        "{failed}"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_eq!(current_session(&pod), old);
    assert_eq!(pod.log_lines(), before);
    assert_eq!(session_files(&pod), 1);
}

#[test]
fn a_summary_that_does_not_make_the_context_smaller_is_a_failure() {
    let pod = pod(&[
        text("ok"),
        text(&"a very long summary ".repeat(400)),
        text("still here"),
    ]);
    let mut a = attach(&pod);
    a.run("hi");
    a.until_entry("turn_end");
    let old = current_session(&pod);
    compact(&mut a);
    let failed = a.until_type("compact_failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("not make the context smaller"),
        "{failed}"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_eq!(current_session(&pod), old);
    assert_eq!(session_files(&pod), 1);
    // The old session goes on.
    a.run("again");
    let end = a.until_entry("turn_end");
    assert_eq!(end["session_id"], old.as_str());
}

#[test]
fn a_restart_closes_the_breaker() {
    let pod = pod(&[
        big_text("one"),
        failing("e1"),
        failing("e2"),
        big_text("two"),
        failing("e3"),
    ]);
    let mut a = attach(&pod);
    a.run("1");
    a.run("2");
    a.until_type("notification");
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    let old = current_session(&pod);

    let pod = Pod::builder()
        .in_dir(pod.into_dir())
        .script(&script(&[big_text("three"), text("SUMMARY after restart")]))
        .arg("--context-window")
        .arg(WINDOW)
        .start();
    let mut b = attach(&pod);
    b.run("3");
    let start = b.until_type("compact_start");
    assert_eq!(start["reason"], "auto_post_turn");
    until_environment(&mut b);
    assert_switch(&b, &old, "SUMMARY after restart");
}

#[test]
fn a_summary_smaller_than_the_context_but_not_under_the_threshold_is_a_failure() {
    // 9000 reported tokens compact at 8000; a summary of about 8500 estimated
    // tokens (with the tools, the agent tools among them) is smaller, and
    // would be compacted again at once.
    let pod = pod(&[
        big_text("one"),
        text(&"summary ".repeat(2370)),
        text("still here"),
    ]);
    let mut a = attach(&pod);
    let old = current_session(&pod);
    a.run("hi");
    a.until_entry("turn_end");
    let failed = a.until_type("compact_failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("not under the compaction threshold of 8000"),
        "{failed}"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_eq!(current_session(&pod), old);
    assert_eq!(session_files(&pod), 1);
}
