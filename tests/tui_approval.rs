//! The approval panel: what a pending request looks like in the input
//! box's place, which `approve` frames its keys send, and how it goes away
//! — answered here, answered by another client, or no longer pending.
//! Accept snapshot changes with `INSTA_UPDATE=always cargo test --test
//! tui_approval` and read the `.snap` files before committing them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod tui_common;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use insta::assert_snapshot;
use pod::tui::connection::Outgoing;
use pod::tui::App;
use ratatui::style::Color;
use serde_json::{json, Value};
use tui_common::*;

fn key(app: &mut App, code: KeyCode) {
    let modifiers = match code {
        KeyCode::Char(c) if c.is_uppercase() => KeyModifiers::SHIFT,
        _ => KeyModifiers::NONE,
    };
    app.on_terminal(TermEvent::Key(KeyEvent::new(code, modifiers)));
}

/// The requests sent since the last call, as JSON, with their ids.
fn sent(app: &mut App) -> Vec<(Option<String>, Value)> {
    app.take_outgoing()
        .into_iter()
        .filter_map(|o| match o {
            Outgoing::Request(r) => Some((r.request_id, serde_json::to_value(&r.method).unwrap())),
            Outgoing::Reconnect | Outgoing::Open(_) | Outgoing::Back => None,
        })
        .collect()
}

fn methods(app: &mut App) -> Vec<Value> {
    sent(app).into_iter().map(|(_, m)| m).collect()
}

const DIFF: &str = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,4 +1,4 @@\n use std::io;\n-fn old() {}\n+fn new() {}\n // end\n";

/// A turn waiting for two calls: a `bash` command and an edit.
fn waiting() -> App {
    attached_with_status(
        vec![
            user_input(json!([{"type":"text","text":"run the tests and fix lib.rs"}])),
            json!({"kind":"assistant_items","items":[
                {"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"cargo test --all"}},
                {"type":"tool_call","call_id":"c2","name":"edit_file","arguments":
                    {"path":"src/lib.rs","old_string":"fn old() {}\n","new_string":"fn new() {}\n"}}]}),
            with_rule(
                approval_request("c1", "bash", "cargo test --all", "cargo test --all"),
                "bash:cargo test *",
            ),
            with_rule(
                approval_request("c2", "edit_file", "edit src/lib.rs (+1 −1)", DIFF),
                "write:src/lib.rs",
            ),
        ],
        json!({"state":"waiting","queued":0,"pending_approvals":["c1","c2"],"approval":"ask"}),
    )
}

/// A request entry carrying the rule the pod says a session answer adds.
fn with_rule(mut request: Value, rule: &str) -> Value {
    request["session_rule"] = json!(rule);
    request
}

/// The recorded log of a turn waiting for two calls (recorded from a real
/// pod); `tests/web.rs` opens a pod on the same file, so the TUI and the
/// web page are tested against one sequence of entries.
const RECORDED: &str = include_str!("fixtures/waiting_for_approval.jsonl");

/// The TUI attached to a pod whose snapshot holds the recorded log, and
/// each request's call id with the `session_rule` the pod put on it.
fn recorded() -> (App, Vec<(String, String)>) {
    let lines: Vec<Value> = RECORDED
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let requests: Vec<(String, String)> = lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_request")
        .map(|l| {
            let e = &l["entry"];
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["session_rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let session_id = lines[0]["entry"]["session_id"].clone();
    let pending: Vec<&str> = requests.iter().map(|(id, _)| id.as_str()).collect();
    let mut app = App::new("default", std::time::Instant::now());
    app.on_connection(pod::tui::connection::ConnEvent::Connected);
    app.on_pod_event(event(json!({"type":"snapshot","protocol_version":1,
        "greeting":{"pod":"default","version":"0.1.0","session_id":session_id,
                    "provider":"script","model":"script","workspace":"/elsewhere","pid":1,
                    "approval":"ask",
                    "sandbox":{"mode":"workspace-write","available":true,"network":true},
                    "mcp_servers":[]},
        "status":{"state":"waiting","queued":0,"pending_approvals":pending,"approval":"ask"},
        "session_id":session_id,"entries":lines,"in_flight":null})));
    app.take_outgoing();
    (app, requests)
}

/// #37.3: the panel shows the rule the pod put on each request, as the
/// web page does for the same recorded entries (`web::
/// both_panels_show_the_recorded_session_rule`).
#[test]
fn the_panel_shows_the_recorded_session_rule() {
    let (mut app, requests) = recorded();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for (i, (call_id, rule)) in requests.iter().enumerate() {
        let text = screen(&mut app, 110, 24);
        assert!(
            text.contains(&format!("a allow for this session: {rule}")),
            "{call_id}: {text}"
        );
        if i + 1 < requests.len() {
            key(&mut app, KeyCode::Char('n'));
        }
    }
}

/// The TUI shows the entry's rule and never works one out: a request from
/// a log older than `session_rule` offers the session answer without
/// naming a rule it cannot know.
#[test]
fn a_request_without_a_session_rule_names_none() {
    let mut app = attached_with_status(
        vec![
            tool_call("c1", "bash", json!({"command":"cargo test --all"})),
            approval_request("c1", "bash", "cargo test --all", "cargo test --all"),
        ],
        json!({"state":"waiting","queued":0,"pending_approvals":["c1"],"approval":"ask"}),
    );
    let text = screen(&mut app, 100, 20);
    assert!(text.contains("a allow for this session"), "{text}");
    assert!(
        !text.contains("bash:cargo"),
        "a rule the pod did not name: {text}"
    );
}

#[test]
fn a_bash_request_takes_the_input_box_place() {
    let mut app = waiting();
    let text = screen(&mut app, 70, 20);
    assert!(text.contains("bash wants to run"), "{text}");
    assert!(text.contains("1 of 2"), "{text}");
    assert!(!text.contains("? help"), "the input box is hidden:\n{text}");
    assert_snapshot!("bash_request", text);
}

/// What `a` would add is on the panel before it is pressed: the command's
/// subcommand for `cargo test`, the file for an edit.
#[test]
fn the_panel_shows_the_rule_a_session_answer_adds() {
    let mut app = waiting();
    let text = screen(&mut app, 100, 20);
    assert!(
        text.contains("a allow for this session: bash:cargo test *"),
        "{text}"
    );
    key(&mut app, KeyCode::Char('y'));
    let text = screen(&mut app, 100, 20);
    assert!(
        text.contains("a allow for this session: write:src/lib.rs"),
        "{text}"
    );
}

#[test]
fn a_diff_request_is_coloured_and_scrolls() {
    let mut app = waiting();
    key(&mut app, KeyCode::Char('y'));
    let buffer = buffer(&mut app, 60, 18);
    let fg = |needle: &str| buffer[find(&buffer, needle).expect(needle)].fg;
    assert_eq!(fg("+fn new"), Color::Green);
    assert_eq!(fg("-fn old"), Color::Red);
    assert_eq!(fg("@@ -1,4"), Color::Cyan);
    assert_snapshot!("diff_request", screen(&mut app, 60, 18));

    // Too short for the whole preview: it scrolls, the keys stay.
    let top = screen(&mut app, 60, 12);
    assert!(top.contains("lines 1–4 of 7"), "{top}");
    assert!(top.contains("y allow once"), "{top}");
    key(&mut app, KeyCode::PageDown);
    let scrolled = screen(&mut app, 60, 12);
    assert!(scrolled.contains("// end"), "{scrolled}");
    assert!(!scrolled.contains("--- a/src/lib.rs"), "{scrolled}");
    assert_snapshot!("diff_request_scrolled", scrolled);
}

#[test]
fn keys_send_the_right_answers_in_order() {
    let mut app = waiting();
    key(&mut app, KeyCode::Char('a'));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c1","decision":"allow","scope":"session"})]
    );
    assert!(screen(&mut app, 70, 20).contains("edit_file wants to run"));
    key(&mut app, KeyCode::Char('N'));
    for c in "use bar".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert!(screen(&mut app, 70, 20).contains("message for the model › use bar"));
    key(&mut app, KeyCode::Enter);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c2","decision":"deny","message":"use bar"})]
    );
    assert!(
        screen(&mut app, 70, 20).contains("? help"),
        "all answered: the input box is back"
    );

    let mut app = waiting();
    key(&mut app, KeyCode::Char('y'));
    key(&mut app, KeyCode::Char('n'));
    assert_eq!(
        methods(&mut app),
        [
            json!({"type":"approve","call_id":"c1","decision":"allow"}),
            json!({"type":"approve","call_id":"c2","decision":"deny"})
        ]
    );
    // Keys meant for the panel never reach the input box.
    assert!(app.composer().is_empty());
}

#[test]
fn another_clients_answer_removes_it_and_says_who() {
    let mut app = waiting();
    app.on_pod_event(entry(
        5,
        json!({"kind":"approval_decision","call_id":"c1","decision":"allow","scope":"session",
            "rule":"bash:cargo *","by":"user","client":"tui@laptop","message":null}),
    ));
    // Tall enough to show c1, whose decision is drawn under it.
    let text = screen(&mut app, 70, 40);
    assert!(text.contains("edit_file wants to run"), "{text}");
    assert!(!text.contains("1 of 2"), "one left:\n{text}");
    assert!(
        text.contains("✓ allowed by tui@laptop (session: bash:cargo *)"),
        "{text}"
    );
    app.on_pod_event(entry(
        6,
        json!({"kind":"approval_decision","call_id":"c2","decision":"deny","scope":"once",
            "rule":null,"by":"user","client":"pod send","message":"not now"}),
    ));
    let text = screen(&mut app, 70, 20);
    assert!(text.contains("✗ denied by pod send: not now"), "{text}");
    assert!(text.contains("? help"), "{text}");
}

#[test]
fn decisions_in_the_transcript() {
    let mut app = attached(vec![
        tool_call("c1", "bash", json!({"command":"cargo build"})),
        json!({"kind":"approval_decision","call_id":"c1","decision":"allow","scope":"once",
            "rule":null,"by":"user","client":"tui@host","message":null}),
        tool_call("c2", "bash", json!({"command":"rm -rf target"})),
        json!({"kind":"approval_decision","call_id":"c2","decision":"deny","scope":"once",
            "rule":"bash:rm *","by":"policy","client":null,"message":null}),
        tool_call("c3", "bash", json!({"command":"sleep 100"})),
        json!({"kind":"approval_decision","call_id":"c3","decision":"deny","scope":"once",
            "rule":null,"by":"cancel","client":null,"message":null}),
        json!({"kind":"model_change","provider":"openai","model":"gpt-4o-mini","at":"x"}),
    ]);
    let text = screen(&mut app, 60, 20);
    for line in [
        "✓ allowed by tui@host",
        "✗ denied by policy (bash:rm *)",
        "✗ cancelled",
        "model: openai/gpt-4o-mini",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    assert_snapshot!("decisions", text);
}

#[test]
fn not_pending_dismisses_it_with_a_notice() {
    let mut app = waiting();
    key(&mut app, KeyCode::Char('y'));
    let (id, _) = sent(&mut app).pop().unwrap();
    app.on_pod_event(event(json!({"type":"error","code":"not_pending",
        "message":"c1 is not waiting for approval","request_id":id})));
    let text = screen(&mut app, 70, 20);
    assert!(
        text.contains("[approval] c1 was no longer waiting"),
        "{text}"
    );
    assert!(text.contains("edit_file wants to run"), "{text}");

    // Refused for another reason: it shows again.
    let mut app = waiting();
    key(&mut app, KeyCode::Char('y'));
    let (id, _) = sent(&mut app).pop().unwrap();
    app.on_pod_event(event(json!({"type":"error","code":"forbidden",
        "message":"a tool may not approve","request_id":id})));
    let text = screen(&mut app, 70, 20);
    assert!(text.contains("bash wants to run"), "{text}");
    assert!(text.contains("[approval refused]"), "{text}");
}

#[test]
fn only_requests_the_pod_still_lists_are_shown_after_a_snapshot() {
    let mut app = attached_with_status(
        vec![
            tool_call("c1", "bash", json!({"command":"make"})),
            approval_request("c1", "bash", "make", "make"),
        ],
        json!({"state":"idle","queued":0,"pending_approvals":[]}),
    );
    assert!(app.current_approval().is_none());
    assert!(screen(&mut app, 60, 10).contains("? help"));
}

#[test]
fn shift_tab_and_the_command_cycle_the_mode() {
    let mut app = attached(vec![]);
    app.on_terminal(TermEvent::Key(KeyEvent::new(
        KeyCode::BackTab,
        KeyModifiers::SHIFT,
    )));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"set_approval","mode":"edits"})]
    );
    assert!(screen(&mut app, 100, 4).contains("approval: edits"));
    app.on_terminal(TermEvent::Key(KeyEvent::new(
        KeyCode::BackTab,
        KeyModifiers::SHIFT,
    )));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"set_approval","mode":"auto"})]
    );
    for c in "/approval".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let sent: Vec<Value> = methods(&mut app)
        .into_iter()
        .filter(|m| m["type"] != "list_completions")
        .collect();
    assert_eq!(sent, [json!({"type":"set_approval","mode":"read-only"})]);
    app.on_pod_event(event(
        json!({"type":"status","state":"idle","queued":0,"approval":"ask"}),
    ));
    assert!(
        screen(&mut app, 100, 4).contains("approval: ask"),
        "the pod's status has the last word"
    );
}

#[test]
fn file_edits_show_their_diff_not_json() {
    let mut app = attached(vec![
        tool_call(
            "c1",
            "edit_file",
            json!({"path":"src/lib.rs","old_string":"a\nb\nc\n","new_string":"a\nB\nc\nd\n"}),
        ),
        tool_result("c1", "edited src/lib.rs", false),
        tool_call(
            "c2",
            "write_file",
            json!({"path":"notes.md","content":"1\n2\n3\n4\n5\n6\n7\n8\n9\n"}),
        ),
        tool_result("c2", "wrote notes.md", false),
    ]);
    let buffer = buffer(&mut app, 50, 24);
    assert_eq!(buffer[find(&buffer, "+B").unwrap()].fg, Color::Green);
    assert_eq!(buffer[find(&buffer, "-b").unwrap()].fg, Color::Red);
    let collapsed = screen(&mut app, 50, 24);
    assert!(!collapsed.contains("old_string"), "{collapsed}");
    assert!(collapsed.contains("… 3 more lines (Ctrl+O)"), "{collapsed}");
    assert_snapshot!("file_edits_collapsed", collapsed);
    app.on_terminal(TermEvent::Key(KeyEvent::new(
        KeyCode::Char('o'),
        KeyModifiers::CONTROL,
    )));
    let expanded = screen(&mut app, 50, 30);
    assert!(expanded.contains("+9"), "{expanded}");
    assert!(!expanded.contains("\"content\""), "{expanded}");
}

/// A panel that appears while the user is typing a message does not take
/// the rest of that message as answers: the keys go on into the message
/// (none is lost), and the panel takes its keys after a pause.
#[test]
fn typing_never_answers_a_panel_that_appears_mid_word() {
    let t0 = std::time::Instant::now();
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_tick(t0);
    for c in "ye".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    app.on_tick(t0 + std::time::Duration::from_millis(100));
    app.on_pod_event(entry(
        1,
        tool_call("c1", "bash", json!({"command":"rm -rf build"})),
    ));
    app.on_pod_event(entry(
        2,
        approval_request("c1", "bash", "rm -rf build", "rm -rf build"),
    ));
    app.on_tick(t0 + std::time::Duration::from_millis(200));
    key(&mut app, KeyCode::Char('y'));
    app.on_tick(t0 + std::time::Duration::from_millis(400));
    key(&mut app, KeyCode::Char('a'));
    assert!(methods(&mut app).is_empty(), "nothing answered mid-burst");
    assert!(screen(&mut app, 90, 12).contains("pause, then y, a, n or N"));
    assert_eq!(
        app.composer().plain_text().as_deref(),
        Some("yeya"),
        "no key typed is lost"
    );

    app.on_tick(t0 + std::time::Duration::from_secs(2));
    key(&mut app, KeyCode::Char('n'));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c1","decision":"deny"})]
    );
    assert_eq!(app.composer().plain_text().as_deref(), Some("yeya"));
}

/// A panel that appears while the user is not typing still takes no key
/// in its first moments: a key pressed then was meant for the screen as it
/// was. It goes into the message instead, and the panel takes the next.
#[test]
fn a_panel_is_armed_only_after_a_moment() {
    let t0 = std::time::Instant::now();
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_tick(t0);
    app.on_pod_event(entry(1, tool_call("c1", "bash", json!({"command":"make"}))));
    app.on_pod_event(entry(2, approval_request("c1", "bash", "make", "make")));
    app.on_tick(t0 + std::time::Duration::from_millis(50));
    key(&mut app, KeyCode::Char('n'));
    assert!(methods(&mut app).is_empty(), "not armed yet");
    assert_eq!(app.composer().plain_text().as_deref(), Some("n"));
    app.on_tick(t0 + std::time::Duration::from_secs(1));
    key(&mut app, KeyCode::Esc);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c1","decision":"deny"})],
        "Esc denies"
    );
    assert!(screen(&mut app, 90, 12).contains("denied (Esc)"));
}

/// A message sent with Enter ends the burst: a panel that appears right
/// after takes the next key once it is armed.
#[test]
fn a_sent_message_ends_the_burst() {
    let t0 = std::time::Instant::now();
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_tick(t0);
    for c in "go".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    app.take_outgoing();
    app.on_pod_event(entry(1, tool_call("c1", "bash", json!({"command":"make"}))));
    app.on_pod_event(entry(2, approval_request("c1", "bash", "make", "make")));
    app.on_tick(t0 + std::time::Duration::from_millis(400));
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c1","decision":"allow"})]
    );
}

/// One step, two calls: k1 decided and run, k2 still waiting.
fn k1_decided_k2_waiting() -> Vec<Value> {
    vec![
        user_input(json!([{"type":"text","text":"two commands"}])),
        json!({"kind":"assistant_items","items":[
            {"type":"tool_call","call_id":"k1","name":"bash","arguments":{"command":"echo ran k1"}},
            {"type":"tool_call","call_id":"k2","name":"bash","arguments":{"command":"echo k2 done"}}]}),
        approval_request("k1", "bash", "echo ran k1", "echo ran k1"),
        approval_request("k2", "bash", "echo k2 done", "echo k2 done"),
        json!({"kind":"approval_decision","call_id":"k1","decision":"allow","scope":"once",
            "rule":null,"by":"user","client":"pod approve","message":null}),
        tool_result("k1", "ran k1\nand more", false),
    ]
}

/// The rows of the screen, trimmed, without the blank ones.
fn rows(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_matches('"').trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A decision is drawn under its own call, not under whichever call came
/// last: live and when the view is rebuilt from a snapshot alike.
#[test]
fn a_decision_sits_under_its_own_call_when_a_step_has_two() {
    let status = json!({"state":"waiting","queued":0,"pending_approvals":["k2"],"approval":"ask"});
    let mut entries = k1_decided_k2_waiting();
    let mut from_snapshot = attached_with_status(entries.clone(), status.clone());
    let live_tail = entries.split_off(4);
    let mut live = attached_with_status(
        entries,
        json!({"state":"waiting","queued":0,"pending_approvals":["k1","k2"],"approval":"ask"}),
    );
    for (i, e) in live_tail.into_iter().enumerate() {
        live.on_pod_event(entry(5 + i as u64, e));
    }
    for app in [&mut from_snapshot, &mut live] {
        let text = screen(app, 70, 30);
        let rows = rows(&text);
        let at = |needle: &str| {
            rows.iter()
                .position(|r| r.contains(needle))
                .unwrap_or_else(|| panic!("{needle}:\n{text}"))
        };
        assert_eq!(
            at("✓ allowed by pod approve"),
            at("2 lines · ran k1") + 1,
            "{text}"
        );
        assert!(
            at("⚙ bash echo k2 done") > at("✓ allowed by pod approve"),
            "{text}"
        );
    }
}

/// A provider that reuses call ids across turns: the second turn's `k2`
/// asks again, and the first turn's answer to `k2` does not hide it.
#[test]
fn a_call_id_reused_by_a_later_turn_asks_again() {
    let mut entries = k1_decided_k2_waiting();
    entries.push(
        json!({"kind":"approval_decision","call_id":"k2","decision":"allow",
        "scope":"once","rule":null,"by":"user","client":"tui@host","message":null}),
    );
    entries.push(tool_result("k2", "k2 done", false));
    entries.push(json!({"kind":"turn_end","reason":"completed","usage":null,
        "turn_id":null,"request_id":null}));
    entries.push(user_input(json!([{"type":"text","text":"again"}])));
    let second_turn = vec![
        tool_call("k2", "bash", json!({"command":"echo second time"})),
        approval_request("k2", "bash", "echo second time", "echo second time"),
    ];

    // Rebuilt from a snapshot.
    let mut all = entries.clone();
    all.extend(second_turn.clone());
    let mut app = attached_with_status(
        all,
        json!({"state":"waiting","queued":0,"pending_approvals":["k2"],"approval":"ask"}),
    );
    let text = screen(&mut app, 70, 30);
    assert!(text.contains("bash wants to run"), "{text}");
    assert!(text.contains("echo second time"), "{text}");

    // Live, this client having answered the first turn's `k2` itself.
    let first_turn_end = entries.split_off(6);
    let mut app = attached_with_status(
        entries,
        json!({"state":"waiting","queued":0,"pending_approvals":["k2"],"approval":"ask"}),
    );
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"k2","decision":"allow"})]
    );
    for (seq, e) in (7..).zip(first_turn_end.into_iter().chain(second_turn)) {
        app.on_pod_event(entry(seq, e));
    }
    let text = screen(&mut app, 70, 30);
    assert!(text.contains("bash wants to run"), "{text}");
    assert!(text.contains("echo second time"), "{text}");
    let calls = rows(&text);
    let second = calls
        .iter()
        .position(|r| r.contains("⚙ bash echo second time"))
        .expect("second call");
    assert!(
        calls[second + 1..].iter().all(|r| !r.contains("allowed")),
        "no decision under the new call:\n{text}"
    );
}

#[test]
fn shift_a_answers_always() {
    let mut app = waiting();
    key(&mut app, KeyCode::Char('A'));
    assert_eq!(
        methods(&mut app),
        [json!({"type":"approve","call_id":"c1","decision":"allow","scope":"always"})]
    );
}

/// Over `--url` the pod refuses `always` unless it was started with
/// `--allow-remote-always` (issue 36): the panel does not offer `A` then,
/// and `A` sends nothing; the greeting saying otherwise brings it back, and
/// over the Unix socket it is always offered.
#[test]
fn a_remote_panel_offers_always_only_when_the_pod_takes_it() {
    let waiting_snapshot = |allow_remote_always: bool| {
        let mut snapshot = tui_common::snapshot_with_status(
            vec![
                json!({"kind":"assistant_items","items":[{"type":"tool_call","call_id":"c1",
                    "name":"bash","arguments":{"command":"cargo test --all"}}]}),
                approval_request("c1", "bash", "cargo test --all", "cargo test --all"),
            ],
            Value::Null,
            json!({"state":"waiting","queued":0,"pending_approvals":["c1"],"approval":"ask"}),
        );
        if let pod::protocol::Event::Snapshot(s) = &mut snapshot {
            s.greeting.allow_remote_always = allow_remote_always;
        }
        snapshot
    };
    let app = |remote: bool, allow_remote_always: bool| {
        let mut app = App::new("default", std::time::Instant::now());
        app.set_remote(remote);
        app.on_connection(pod::tui::connection::ConnEvent::Connected);
        app.on_pod_event(waiting_snapshot(allow_remote_always));
        app.take_outgoing();
        app
    };

    let mut remote = app(true, false);
    let text = screen(&mut remote, 120, 12);
    assert!(text.contains("a allow for this session"), "{text}");
    assert!(!text.contains("always"), "{text}");
    key(&mut remote, KeyCode::Char('A'));
    assert!(methods(&mut remote).is_empty(), "A answers nothing");
    assert!(screen(&mut remote, 120, 12).contains("bash wants to run"));

    for (remote, allowed) in [(true, true), (false, false)] {
        let mut app = app(remote, allowed);
        let text = screen(&mut app, 120, 12);
        assert!(text.contains("A always (config file)"), "{text}");
        key(&mut app, KeyCode::Char('A'));
        assert_eq!(
            methods(&mut app),
            [json!({"type":"approve","call_id":"c1","decision":"allow","scope":"always"})]
        );
    }
}
