//! Compaction end to end: a real `pod serve` with the `script` provider,
//! driven through each trigger (manual, after a turn, before a model call),
//! through summariser failures and the breaker, and killed at each step of a
//! compaction.
//!
//! Every model call takes the next script line, the summarising call
//! included, so each script below reads as the sequence of calls the pod is
//! expected to make: a call the pod should not make shows up as the wrong
//! reply further on.
//!
//! Most tests trigger compaction through reported usage (`input_tokens`
//! 9000 against a 10000-token window compacting at 8000), which is exact; the
//! mid-turn tool test triggers it through the size estimate of a large tool
//! result instead.

mod harness;

use std::collections::HashMap;
use std::time::Duration;

use harness::{Client, Pod};
use serde_json::{json, Value};

const WINDOW: &str = "10000";

fn script(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn text(t: &str) -> Value {
    json!({"events":[{"text":t}]})
}

/// A reply whose usage says the context is over the threshold.
fn big_text(t: &str) -> Value {
    json!({"events":[{"text":t},{"usage":{"input_tokens":9000,"output_tokens":0}}]})
}

fn read_file_call(path: &str, usage: u64) -> Value {
    json!({"events":[
        {"tool_call":{"name":"read_file","arguments":{"path":path}}},
        {"usage":{"input_tokens":usage,"output_tokens":0}}
    ]})
}

fn failing(message: &str) -> Value {
    json!({"events":[{"error":message}]})
}

fn pod(lines: &[Value]) -> Pod {
    Pod::builder()
        .script(&script(lines))
        .arg("--context-window")
        .arg(WINDOW)
        .start()
}

fn attach(pod: &Pod) -> Client {
    let mut c = pod.client();
    c.until_type("snapshot");
    c
}

fn current_session(pod: &Pod) -> String {
    pod.log_lines()[0]["entry"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn session_files(pod: &Pod) -> usize {
    std::fs::read_dir(pod.data_dir.join("sessions"))
        .unwrap()
        .count()
}

fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["entry"]["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The frames a client received, minus streaming hints and status, as short
/// readable strings; session ids are replaced by their labels.
fn trace(client: &Client, labels: &[(&str, &str)]) -> Vec<String> {
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
                    f["entry"]["kind"].as_str().unwrap()
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
fn states(client: &Client) -> Vec<String> {
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
fn assert_gapless(who: &str, client: &Client, pod: &Pod) {
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
fn assert_switch(client: &Client, old: &str, summary: &str) -> String {
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
fn assert_compacting_shown(client: &Client) {
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

fn get_session(client: &mut Client, id: &str) -> Vec<Value> {
    client.send(json!({"type":"get_session","request_id":"gs","session_id":id}));
    let response = client.until_with("get_session response", |f| {
        f["type"] == "response" && f["request_id"] == "gs"
    });
    assert_eq!(response["session_id"], id);
    response["entries"].as_array().unwrap().clone()
}

fn compact(client: &mut Client) {
    client.send(json!({"type":"compact"}));
}

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
    a.until_entry("hook_injected_items");
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    let new = assert_switch(&a, &old, "SUMMARY one");
    assert_eq!(
        trace(&a, &[(&old, "old"), (&new, "new")]),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "old#2 assistant_items",
            "old#3 turn_end",
            "compact_start manual",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
        ]
    );
    assert_compacting_shown(&a);
    assert_eq!(
        std::fs::read(&old_path).unwrap(),
        old_bytes,
        "old log touched"
    );
    assert_eq!(current_session(&pod), new);

    // A client attaching now starts in the new session and can fetch the old.
    let mut b = attach(&pod);
    let snapshot = &b.frames[0];
    assert_eq!(snapshot["session_id"], new.as_str());
    assert_eq!(snapshot["greeting"]["session_id"], new.as_str());
    assert_eq!(snapshot["status"]["state"], "idle");
    assert_eq!(
        kinds(snapshot["entries"].as_array().unwrap()),
        ["session_start", "hook_injected_items"]
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
            "user_input",
            "assistant_items",
            "turn_end"
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[3]["entry"]["items"][0]["text"],
        "second answer"
    );
    assert_gapless("a", &a, &pod);
    assert_gapless("b", &b, &pod);

    // A second compaction chains: `pod log --chain` prints all three, oldest
    // first.
    compact(&mut b);
    let done = b.until_type("compact_done");
    let newest = done["new_session_id"].as_str().unwrap().to_owned();
    b.until_entry("hook_injected_items");
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
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 4);

    a.until_entry("hook_injected_items");
    during.until_entry("hook_injected_items");
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
            "old#2 assistant_items",
            "old#3 turn_end",
            "compact_start auto_post_turn",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
        ]
    );
    assert_eq!(
        trace(&during, &labels),
        [
            "snapshot old 4",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
        ]
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_compacting_shown(&a);

    let mut after = attach(&pod);
    assert_eq!(after.frames[0]["session_id"], new.as_str());
    assert_eq!(
        trace(&after, &labels),
        ["snapshot new 2"],
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
            "snapshot new 2",
            "response",
            "turn_start",
            "new#2 user_input",
            "new#3 assistant_items",
            "new#4 turn_end"
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
            "old#2 assistant_items",
            "old#3 tool_results",
            "compact_start auto_mid_turn",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 assistant_items",
            "new#3 turn_end",
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
            "assistant_items",
            "tool_results"
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[2]["entry"]["items"][0]["text"],
        "done reading"
    );
    a.until_with("idle", |f| f["type"] == "status" && f["state"] == "idle");
    assert_gapless("a", &a, &pod);

    let mut b = attach(&pod);
    assert_eq!(trace(&b, &labels), ["snapshot new 4"]);
    assert_eq!(get_session(&mut b, &old), pod.session_lines(&old));
}

#[test]
fn manual_compaction_requested_during_a_turn_runs_before_its_next_model_call() {
    // 10000 tokens of question; a summary of 8500 helps, yet leaves the
    // context over the 8000-token threshold: only the rule "no automatic
    // compaction right after a manual one" keeps the post-turn check quiet.
    let question = "0123456789".repeat(4000);
    let summary = "summary ".repeat(4250);
    let pod = pod(&[text(&summary), text("answer from the new session")]);
    let mut a = attach(&pod);
    let old = current_session(&pod);
    // Paused, the turn holds before its first model call: the compaction
    // request certainly arrives while the turn runs.
    a.send(json!({"type":"pause"}));
    a.run(&question);
    a.until_entry("user_input");
    compact(&mut a);
    a.send(json!({"type":"resume"}));
    let end = a.until_entry("turn_end");
    let new = assert_switch(&a, &old, summary.trim());
    assert_eq!(end["session_id"], new.as_str());
    assert_eq!(
        trace(&a, &[(&old, "old"), (&new, "new")]),
        [
            "snapshot old 1",
            "response",
            "turn_start",
            "old#1 user_input",
            "compact_start manual",
            "compact_done new",
            "new#0 session_start",
            "new#1 hook_injected_items",
            "new#2 assistant_items",
            "new#3 turn_end",
        ]
    );
    let done = a
        .frames
        .iter()
        .find(|f| f["type"] == "compact_done")
        .unwrap();
    assert!(done["tokens_after"].as_u64().unwrap() > 8000, "{done}");
    assert_eq!(
        pod.session_lines(&new)[2]["entry"]["items"][0]["text"],
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
    a.until_entry("hook_injected_items");
    assert_gapless("a", &a, &pod);
}

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
        "old#2 assistant_items",
        "old#3 tool_results",
        "compact_start auto_mid_turn",
        "compact_failed",
        "old#4 assistant_items",
        "old#5 turn_end",
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
    assert_eq!(pod.log_lines()[5]["entry"]["reason"], "completed");
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
            "old#2 assistant_items",
            "old#3 turn_end",
            "compact_start auto_post_turn",
            "compact_failed",
            "response",
            "turn_start",
            "old#4 user_input",
            "compact_start auto_mid_turn",
            "compact_failed",
            "old#5 assistant_items",
            "old#6 turn_end",
            "compact_start auto_post_turn",
            "compact_failed",
            "notification compactor",
            "response",
            "turn_start",
            "old#7 user_input",
            "old#8 assistant_items",
            "old#9 turn_end",
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
    assert_eq!(pod.log_lines()[8]["entry"]["items"][0]["text"], "three");

    compact(&mut a);
    a.until_entry("hook_injected_items");
    a.until_with("idle", idle);
    let new = assert_switch(&a, &old, "SUMMARY manual");
    a.frames.clear();
    a.run("4");
    a.until_entry("hook_injected_items");
    a.until_with("idle", idle);
    let newest = current_session(&pod);
    assert_eq!(
        trace(&a, &[(&new, "new"), (&newest, "newest")]),
        [
            "response",
            "turn_start",
            "new#2 user_input",
            "new#3 assistant_items",
            "new#4 turn_end",
            "compact_start auto_post_turn",
            "compact_done newest",
            "newest#0 session_start",
            "newest#1 hook_injected_items",
        ]
    );
    assert_eq!(
        pod.session_lines(&new)[3]["entry"]["items"][0]["text"],
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
            ["session_start", "hook_injected_items", "turn_end"]
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
            {"tool_call":{"id":"slow","name":"bash","arguments":{"command":"sleep 3"}}}
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
            "assistant_items",
            "assistant_items",
            "tool_results",
            "turn_end"
        ]
    );
    assert_eq!(lines[4]["entry"]["results"][0]["call_id"], "slow");
    assert_eq!(lines[4]["entry"]["results"][0]["is_error"], true);
    assert_eq!(lines[5]["entry"]["reason"], "interrupted");
    b.run("hello again");
    // (The interrupted turn's end may reach b as an entry, after its snapshot.)
    b.until_with("the new turn's end", |f| {
        f["type"] == "entry" && f["entry"]["kind"] == "turn_end" && f["seq"] == 8
    });
    assert_eq!(pod.log_lines()[8]["entry"]["reason"], "completed");
    assert_gapless("b", &b, &pod);
}
