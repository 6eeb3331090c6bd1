//! What keys and frames do to the TUI's state and to the requests it sends,
//! without a terminal or a pod.

mod tui_common;

use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use pod::protocol::Method;
use pod::tui::connection::{ConnEvent, ConnectionState, Outgoing};
use pod::tui::conversation::BlockKind;
use pod::tui::App;
use serde_json::{json, Value};
use tui_common::*;

fn key(app: &mut App, code: KeyCode, modifiers: KeyModifiers) {
    app.on_terminal(TermEvent::Key(KeyEvent::new(code, modifiers)));
}

fn type_str(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c), KeyModifiers::NONE);
    }
}

fn methods(app: &mut App) -> Vec<Value> {
    app.take_outgoing()
        .into_iter()
        .map(|o| match o {
            Outgoing::Request(r) => serde_json::to_value(&r.method).unwrap(),
            Outgoing::Reconnect => json!("reconnect"),
        })
        .collect()
}

/// What was sent besides the menus' `list_completions`.
fn actions(app: &mut App) -> Vec<Value> {
    methods(app)
        .into_iter()
        .filter(|m| m["type"] != "list_completions")
        .collect()
}

#[test]
fn enter_sends_text_and_paste_segments() {
    let mut app = attached(vec![]);
    type_str(&mut app, "hello");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"run","segments":[{"type":"text","text":"hello"}]})]
    );
    assert!(app.composer().is_empty());
    type_str(&mut app, "look");
    key(&mut app, KeyCode::Enter, KeyModifiers::SHIFT);
    app.on_terminal(TermEvent::Paste("one\ntwo".into()));
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"run","segments":[
            {"type":"text","text":"look\n"},
            {"type":"paste","id":1,"text":"one\ntwo"}]})]
    );
    for _ in 0..3 {
        // The last message has two lines: the second Up moves within it.
        key(&mut app, KeyCode::Up, KeyModifiers::NONE);
    }
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"run","segments":[{"type":"text","text":"hello"}]})]
    );
}

#[test]
fn at_asks_the_pod_for_completions() {
    let mut app = attached(vec![]);
    type_str(&mut app, "@src/m");
    let sent = methods(&mut app);
    assert_eq!(
        sent.last(),
        Some(&json!({"type":"list_completions","kind":"file","prefix":"src/m"}))
    );
    let id = app.composer().completion().unwrap().request_id.clone();
    app.on_pod_event(event(
        json!({"type":"response","request_id":id,"completions":["src/main.rs"]}),
    ));
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        methods(&mut app),
        [json!({"type":"run","segments":[{"type":"file_ref","path":"src/main.rs"}]})]
    );
}

#[test]
fn cancel_quit_and_commands() {
    let mut app = attached_with(vec![], Value::Null, "running");
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(methods(&mut app), [json!({"type":"cancel"})]);
    key(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(methods(&mut app), [json!({"type":"cancel"})]);
    assert!(!app.should_quit());
    key(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(app.should_quit(), "a second Ctrl+C within a second quits");

    let mut app = attached(vec![]);
    key(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.on_tick(Instant::now() + Duration::from_secs(2));
    key(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(!app.should_quit(), "Ctrl+C presses far apart do not quit");
    assert!(methods(&mut app).is_empty(), "nothing to cancel when idle");
    type_str(&mut app, "/compact");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(actions(&mut app), [json!({"type":"compact"})]);
    type_str(&mut app, "/quit");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert!(app.should_quit());

    let mut app = attached(vec![]);
    key(&mut app, KeyCode::Char('d'), KeyModifiers::CONTROL);
    assert!(app.should_quit());
}

#[test]
fn input_is_kept_while_disconnected() {
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Retrying {
        retry_in: Duration::from_millis(100),
        error: "no pod".into(),
    });
    type_str(&mut app, "keep me");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert!(methods(&mut app).is_empty());
    assert_eq!(app.composer().plain_text().as_deref(), Some("keep me"));
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot(vec![], Value::Null, "idle"));
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(actions(&mut app).len(), 1);
}

#[test]
fn reconnect_rebuilds_from_the_new_snapshot() {
    let mut app = attached(vec![assistant_text("one")]);
    app.on_pod_event(entry(2, assistant_text("two")));
    app.on_connection(ConnEvent::Retrying {
        retry_in: Duration::from_millis(100),
        error: "gone".into(),
    });
    assert!(matches!(
        app.connection(),
        ConnectionState::Retrying {
            was_connected: true,
            ..
        }
    ));
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(entry(3, assistant_text("before the snapshot: ignored")));
    app.on_pod_event(snapshot(
        vec![
            assistant_text("one"),
            assistant_text("two"),
            assistant_text("three"),
        ],
        Value::Null,
        "idle",
    ));
    let texts: Vec<&str> = app
        .conversation()
        .blocks()
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Assistant { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(app.connection(), ConnectionState::Connected);
}

#[test]
fn a_gap_in_entries_forces_a_reconnect() {
    let mut app = attached(vec![]);
    app.on_pod_event(entry(5, assistant_text("skipped ahead")));
    assert_eq!(methods(&mut app), [json!("reconnect")]);
}

#[test]
fn queue_count_follows_status_and_responses() {
    let mut app = attached_with(vec![], Value::Null, "running");
    type_str(&mut app, "next");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(methods(&mut app).len(), 1, "sent even while a turn runs");
    app.on_pod_event(event(
        json!({"type":"response","request_id":"tui-1","queued":1}),
    ));
    assert!(screen(&mut app, 80, 3).contains("running (1 queued)"));
    app.on_pod_event(event(json!({"type":"status","state":"idle","queued":0})));
    assert!(!screen(&mut app, 80, 3).contains("queued"));
}

#[test]
fn scrolling_leaves_and_resumes_following() {
    let entries = (0..50)
        .map(|i| assistant_text(&format!("answer {i}")))
        .collect();
    let mut app = attached(entries);
    assert!(screen(&mut app, 40, 12).contains("answer 49"));
    key(&mut app, KeyCode::PageUp, KeyModifiers::NONE);
    let up = screen(&mut app, 40, 12);
    assert!(!up.contains("answer 49"));
    assert!(up.contains("↓ more below"));
    app.on_pod_event(entry(51, assistant_text("answer 50")));
    assert_eq!(screen(&mut app, 40, 12), up, "the view stays put");
    key(&mut app, KeyCode::Home, KeyModifiers::NONE);
    assert!(screen(&mut app, 40, 12).contains("answer 0"));
    key(&mut app, KeyCode::End, KeyModifiers::NONE);
    assert!(screen(&mut app, 40, 12).contains("answer 50"));
}

#[test]
fn attaching_to_ten_thousand_entries_is_fast() {
    let entries: Vec<Value> = (0..10_000)
        .map(|i| match i % 4 {
            0 => user_input(json!([{"type":"text","text":format!("question {i}")}])),
            1 => assistant_text(&format!("## Answer {i}\n\nSome *markdown* with `code`.")),
            2 => tool_call(&format!("c{i}"), "bash", json!({"command":"ls"})),
            _ => tool_result(&format!("c{}", i - 1), "a\nb\nc", false),
        })
        .collect();
    let frame = snapshot(entries, Value::Null, "idle");
    let started = Instant::now();
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(frame);
    let text = screen(&mut app, 120, 40);
    let elapsed = started.elapsed();
    assert!(text.contains("question 9996"), "{text}");
    eprintln!("attach + first frame: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
}

#[test]
fn a_refused_message_comes_back_to_the_input_box() {
    let mut app = attached(vec![]);
    type_str(&mut app, "read ");
    app.on_terminal(TermEvent::Paste("p".into()));
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let Some(Outgoing::Request(run)) = app.take_outgoing().pop() else {
        panic!("no run sent");
    };
    assert!(app.composer().is_empty());
    let id = run.request_id.clone().unwrap();
    app.on_pod_event(event(json!({"type":"error","code":"file_ref_out_of_scope",
        "message":"outside the workspace","request_id":id})));
    assert_eq!(app.composer().segments(), {
        let Method::Run { segments } = run.method else {
            panic!()
        };
        segments
    });
    assert!(screen(&mut app, 80, 6).contains("[error file_ref_out_of_scope]"));

    type_str(&mut app, " again");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let sent = app.take_outgoing();
    let Some(Outgoing::Request(run)) = sent.into_iter().last() else {
        panic!("no run sent");
    };
    app.on_connection(ConnEvent::NotSent(run));
    assert!(
        app.composer().plain_text().is_none(),
        "the paste is back too"
    );
    assert!(!app.composer().is_empty());
}
