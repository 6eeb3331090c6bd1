//! Compaction through each trigger — manual (idle, and during a turn),
//! after a turn, before a model call — as seen by clients attached before,
//! during and after it, on a real `pod serve` with the `script` provider.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod compaction_common;
mod harness;

use compaction_common::*;
use harness::Pod;
use serde_json::{json, Value};

#[test]
fn manual_compaction_while_idle_switches_every_client_and_keeps_the_old_log() {
    let long_question = "please look at this: ".repeat(200);
    let pod = pod(&[
        text("first answer"),
        text("SUMMARY one"),
        text("second answer"),
        text("SUMMARY two"),
    ]);
    let mut a = attach(&pod);
    a.run(&long_question);
    a.until_entry("turn_end");
    let old = current_session(&pod);
    let old_path = pod.data_dir.join(format!("sessions/{old}.jsonl"));
    let old_bytes = std::fs::read(&old_path).unwrap();

    compact(&mut a);
    a.until_type("compact_done");
    until_environment(&mut a);
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    let new = assert_switch(&a, &old, "SUMMARY one");
    assert_eq!(
        trace(&a, &[(&old, "old"), (&new, "new")]),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 environment",
            "old#3 assistant_items",
            "old#4 turn_end",
            "compact_start manual",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 environment",
        ]
    );
    assert_compacting_shown(&a);
    assert_eq!(
        std::fs::read(&old_path).unwrap(),
        old_bytes,
        "old log touched"
    );
    assert_eq!(current_session(&pod), new);
    // #30 item 11: the new session holds a summary and no input yet; `pod
    // sessions` titles it by the conversation it continues.
    let listed = harness::succeeded(pod.command("sessions").output().unwrap());
    let row = listed
        .lines()
        .find(|l| l.contains(&new[..8]))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(row.contains("(compacted) please look at this"), "{row}");

    // A client attaching now starts in the new session and can fetch the old.
    let mut b = attach(&pod);
    let snapshot = &b.frames[0];
    assert_eq!(snapshot["session_id"], new.as_str());
    assert_eq!(snapshot["greeting"]["session_id"], new.as_str());
    assert_eq!(snapshot["status"]["state"], "idle");
    assert_eq!(
        kinds(snapshot["entries"].as_array().unwrap()),
        ["session_start", "hook_injected_items", "environment"]
    );
    assert_eq!(get_session(&mut b, &old), pod.session_lines(&old));

    // The conversation goes on in the new session.
    b.run("and now?");
    b.until_entry("turn_end");
    a.until_entry("turn_end");
    assert_eq!(
        kinds(&pod.session_lines(&new)),
        [
            "session_start",
            "hook_injected_items",
            "environment",
            "user_input",
            "assistant_items",
            "turn_end"
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[4]["entry"]["items"][0]["text"],
        "second answer"
    );
    assert_gapless("a", &a, &pod);
    assert_gapless("b", &b, &pod);

    // A second compaction chains: `pod log --chain` prints all three, oldest
    // first.
    compact(&mut b);
    let done = b.until_type("compact_done");
    let newest = done["new_session_id"].as_str().unwrap().to_owned();
    until_environment(&mut b);
    assert_eq!(get_session(&mut b, &new), pod.session_lines(&new));
    let out = pod.command("log").arg("--chain").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).unwrap();
    let headers: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("── session"))
        .collect();
    assert_eq!(
        headers,
        [
            format!("── session {old}"),
            format!("── session {new}"),
            format!("── session {newest}")
        ]
    );
    assert!(out.contains(&format!("compacted from {new}")), "{out}");
    assert!(out.contains("[compact_summary] SUMMARY two"), "{out}");
    let raw = pod
        .command("log")
        .args(["--chain", "--json"])
        .output()
        .unwrap();
    let raw: Vec<Value> = String::from_utf8(raw.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut all = pod.session_lines(&old);
    all.extend(pod.session_lines(&new));
    all.extend(pod.session_lines(&newest));
    assert_eq!(raw, all);
}

#[test]
fn post_turn_compaction_is_seen_by_clients_attached_before_during_and_after() {
    let pod = pod(&[
        big_text("a long answer"),
        json!({"events":[{"delay_ms":1500},{"text":"SUMMARY post"}]}),
        text("next answer"),
    ]);
    let mut a = attach(&pod);
    a.run("question");
    a.until_entry("turn_end");
    let old = current_session(&pod);
    let start = a.until_type("compact_start");
    assert_eq!(start["reason"], "auto_post_turn");

    // Attached while the summary is being written.
    let mut during = pod.client();
    let snapshot = during.until_type("snapshot");
    assert_eq!(snapshot["session_id"], old.as_str());
    assert_eq!(snapshot["status"]["state"], "compacting");
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 5);

    until_environment(&mut a);
    until_environment(&mut during);
    let new = assert_switch(&a, &old, "SUMMARY post");
    assert_eq!(assert_switch(&during, &old, "SUMMARY post"), new);
    let labels = [(old.as_str(), "old"), (new.as_str(), "new")];
    assert_eq!(
        trace(&a, &labels),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 environment",
            "old#3 assistant_items",
            "old#4 turn_end",
            "compact_start auto_post_turn",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 environment",
        ]
    );
    assert_eq!(
        trace(&during, &labels),
        [
            "snapshot old 5",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 environment",
        ]
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_compacting_shown(&a);

    let mut after = attach(&pod);
    assert_eq!(after.frames[0]["session_id"], new.as_str());
    assert_eq!(
        trace(&after, &labels),
        ["snapshot new 3"],
        "a late client hears no compaction events"
    );

    // The next turn runs in the new session and does not compact again.
    after.run("go on");
    for c in [&mut a, &mut during, &mut after] {
        c.until_entry("turn_end");
        c.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    }
    assert_eq!(
        trace(&after, &labels),
        [
            "snapshot new 3",
            "response",
            "turn_start",
            "new#3 user_input",
            "new#4 assistant_items",
            "new#5 turn_end"
        ]
    );
    for (who, c) in [("a", &a), ("during", &during), ("after", &after)] {
        assert_gapless(who, c, &pod);
    }
    assert_eq!(session_files(&pod), 2);
}

#[test]
fn mid_turn_compaction_after_a_large_tool_result_continues_the_turn_in_the_new_session() {
    // The estimate triggers it: the file alone is about 6000 tokens, over
    // the 4800 at which a 6000-token window compacts.
    let pod = Pod::builder()
        .script(&script(&[
            read_file_call("big.txt", 0),
            text("SUMMARY read big.txt"),
            text("done reading"),
        ]))
        .arg("--context-window")
        .arg("6000")
        .start();
    let line = format!("{}\n", "x".repeat(59));
    std::fs::write(pod.workspace.join("big.txt"), line.repeat(400)).unwrap();
    let mut a = attach(&pod);
    let old = current_session(&pod);
    a.run("read big.txt");
    let end = a.until_entry("turn_end");
    let new = assert_switch(&a, &old, "SUMMARY read big.txt");
    assert_eq!(end["session_id"], new.as_str());
    assert_eq!(end["entry"]["reason"], "completed");
    let labels = [(old.as_str(), "old"), (new.as_str(), "new")];
    assert_eq!(
        trace(&a, &labels),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 environment",
            "old#3 assistant_items",
            "old#4 tool_results",
            "compact_start auto_mid_turn",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 environment",
            "new#3 assistant_items",
            "new#4 turn_end",
        ]
    );
    let states = states(&a);
    let at = states.iter().position(|s| s == "compacting").unwrap();
    assert_eq!(states[at - 1], "running");
    assert_eq!(states[at + 1], "running", "the turn goes on: {states:?}");
    // The old log stops at the step boundary, with no turn_end; the new one
    // carries the rest of the turn without a user_input.
    assert_eq!(
        kinds(&pod.session_lines(&old)),
        [
            "session_start",
            "user_input",
            "environment",
            "assistant_items",
            "tool_results"
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[3]["entry"]["items"][0]["text"],
        "done reading"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_gapless("a", &a, &pod);

    let mut b = attach(&pod);
    assert_eq!(trace(&b, &labels), ["snapshot new 5"]);
    assert_eq!(get_session(&mut b, &old), pod.session_lines(&old));
}

#[test]
fn manual_compaction_requested_during_a_turn_runs_before_its_next_model_call() {
    // A first turn of 4000 tokens of question, then a short one; a summary
    // of about 500 (with the tools' specs, under the 8000-token threshold,
    // as a compaction must leave it).
    let question = "0123456789".repeat(1600);
    let summary = "summary ".repeat(250);
    let pod = pod(&[
        text("first answer"),
        text(&summary),
        text("answer from the new session"),
    ]);
    let mut a = attach(&pod);
    let old = current_session(&pod);
    a.run(&question);
    a.until_entry("turn_end");
    // Paused, the turn holds before its first model call: the compaction
    // request certainly arrives while the turn runs.
    a.send(json!({"type":"pause"}));
    a.run("and the short question");
    a.until_entry("user_input");
    compact(&mut a);
    a.send(json!({"type":"resume"}));
    let end = a.until_entry("turn_end");
    let new = assert_switch(&a, &old, summary.trim());
    assert_eq!(end["session_id"], new.as_str());
    // #42 item 4: compacted before the turn's first model call, the turn's
    // input goes on after the summary, so the model answers it.
    assert_eq!(
        trace(&a, &[(&old, "old"), (&new, "new")]),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 environment",
            "old#3 assistant_items",
            "old#4 turn_end",
            "response",
            "turn_start",
            "old#5 user_input",
            "compact_start manual",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 user_input",
            "new#3 environment",
            "new#4 assistant_items",
            "new#5 turn_end",
        ]
    );
    let done = a
        .frames
        .iter()
        .find(|f| f["type"] == "compact_done")
        .unwrap();
    assert!(done["tokens_after"].as_u64().unwrap() < 8000, "{done}");
    assert_eq!(
        pod.session_lines(&new)[4]["entry"]["items"][0]["text"],
        "answer from the new session"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_eq!(
        a.frames
            .iter()
            .filter(|f| f["type"] == "compact_start")
            .count(),
        1,
        "an automatic compaction followed the manual one"
    );
    assert_gapless("a", &a, &pod);
}

#[test]
fn a_compact_request_arriving_with_a_notify_at_the_end_of_a_turn_is_not_lost() {
    let pod = pod(&[
        json!({"events":[{"text":"thinking "},{"delay_ms":800},{"text":"done"}]}),
        text("SUMMARY"),
    ]);
    let mut a = attach(&pod);
    a.run(&"some context ".repeat(200));
    // Both arrive during the turn's last model call.
    a.until_type("text_delta");
    a.send(json!({"type":"notify","message":"build finished"}));
    compact(&mut a);
    a.until_entry("turn_end");
    let note = a.until_entry("hook_injected_items");
    assert_eq!(note["entry"]["items"][0]["source"], "notify");
    let start = a.until_type("compact_start");
    assert_eq!(start["reason"], "manual");
    a.until_type("compact_done");
    until_environment(&mut a);
    assert_gapless("a", &a, &pod);
}

/// A model chosen with `set_model` runs because the session's latest
/// `model_change` says so. Compaction carries that on into the new session
/// (after its summary), so the choice survives a restart as it did before
/// the compaction, instead of falling back to the configured model.
#[test]
fn a_model_chosen_with_set_model_survives_compaction_and_a_restart() {
    let echo = json!({"events":[{"echo_model":{}}]});
    let pod = pod(&[big_text("first answer"), text("SUMMARY one")]);
    let mut a = attach(&pod);
    a.send(json!({"type":"set_model","model":"big-model","request_id":"m"}));
    a.until_entry("model_change");
    a.run("question");
    a.until_entry("turn_end");
    a.until_type("compact_done");
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    let new = current_session(&pod);
    let lines_now = pod.session_lines(&new);
    assert_eq!(
        kinds(&lines_now),
        [
            "session_start",
            "hook_injected_items",
            "environment",
            "model_change"
        ],
        "{lines_now:?}"
    );
    assert_eq!(lines_now[3]["entry"]["model"], "big-model");

    let dir = pod.into_dir();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script(&[echo]))
        .arg("--context-window")
        .arg(WINDOW)
        .start();
    let mut b = attach(&pod);
    assert_eq!(b.frames[0]["status"]["model"], "big-model");
    b.run("which model?");
    b.until_entry("turn_end");
    let answer = pod
        .log_lines()
        .iter()
        .rev()
        .find(|l| l["entry"]["kind"] == "assistant_items")
        .map(|l| l["entry"]["items"][0]["text"].clone())
        .unwrap();
    assert!(answer.as_str().unwrap().contains("big-model"), "{answer}");
}
