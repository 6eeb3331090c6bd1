//! What keys and frames do to the TUI's state and to the requests it sends,
//! without a terminal or a pod.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

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

/// The requests sent since the last call, with their ids.
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
    app.take_outgoing()
        .into_iter()
        .map(|o| match o {
            Outgoing::Request(r) => serde_json::to_value(&r.method).unwrap(),
            Outgoing::Reconnect => json!("reconnect"),
            Outgoing::Open(name) => json!({"open": name}),
            Outgoing::Back => json!("back"),
        })
        .collect()
}

/// What was sent besides the menus' `list_completions` and the `hello`
/// of each connection.
fn actions(app: &mut App) -> Vec<Value> {
    methods(app)
        .into_iter()
        .filter(|m| m["type"] != "list_completions" && m["type"] != "hello")
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

/// The `list_completions` sent since the last look: request id → prefix.
fn completion_requests(app: &mut App) -> Vec<(String, String)> {
    app.take_outgoing()
        .into_iter()
        .filter_map(|o| match o {
            Outgoing::Request(r) => {
                let method = serde_json::to_value(&r.method).unwrap();
                (method["type"] == "list_completions").then(|| {
                    (
                        r.request_id.clone().unwrap_or_default(),
                        method["prefix"].as_str().unwrap_or_default().to_owned(),
                    )
                })
            }
            Outgoing::Reconnect | Outgoing::Open(_) | Outgoing::Back => None,
        })
        .collect()
}

/// First hour, item 9: a typed `@path` sent with Enter before any menu
/// could answer is still a file reference, and what is typed meanwhile is
/// kept for the next message; a Tab in the same burst is not lost.
#[test]
fn a_typed_file_reference_and_a_fast_tab_are_never_lost() {
    let mut app = attached(vec![]);
    type_str(&mut app, "explain @main.py");
    completion_requests(&mut app);
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    type_str(&mut app, "next");
    let asked = completion_requests(&mut app);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].1, "main.py");
    app.on_pod_event(event(json!({"type":"response","request_id":asked[0].0,
        "completions":["main.py"]})));
    assert_eq!(
        actions(&mut app),
        [json!({"type":"run","segments":[
            {"type":"text","text":"explain "},{"type":"file_ref","path":"main.py"}]})]
    );
    assert_eq!(app.composer().plain_text().as_deref(), Some("next"));

    // A word that names no file stays text.
    let mut app = attached(vec![]);
    type_str(&mut app, "use @property");
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let asked = completion_requests(&mut app);
    let last = asked.last().unwrap();
    app.on_pod_event(event(json!({"type":"response","request_id":last.0,
        "completions":["property_test.py"]})));
    assert_eq!(
        actions(&mut app),
        [json!({"type":"run","segments":[{"type":"text","text":"use @property"}]})]
    );

    let mut app = attached(vec![]);
    type_str(&mut app, "@calc/o");
    key(&mut app, KeyCode::Tab, KeyModifiers::NONE);
    let asked = completion_requests(&mut app);
    let last = asked.last().unwrap();
    assert_eq!(last.1, "calc/o");
    app.on_pod_event(event(json!({"type":"response","request_id":last.0,
        "completions":["calc/ops.py"]})));
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"run","segments":[{"type":"file_ref","path":"calc/ops.py"}]})]
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

fn enter(app: &mut App) {
    key(app, KeyCode::Enter, KeyModifiers::NONE);
}

/// Types `line` and presses Enter; returns what was sent.
fn command(app: &mut App, line: &str) -> Vec<Value> {
    type_str(app, line);
    enter(app);
    actions(app)
}

#[test]
fn session_and_mode_commands_send_their_methods() {
    let mut app = attached(vec![]);
    assert_eq!(command(&mut app, "/new"), [json!({"type":"new_session"})]);
    assert_eq!(command(&mut app, "/fork"), [json!({"type":"fork"})]);
    assert_eq!(
        command(&mut app, "/model gpt-5"),
        [json!({"type":"set_model","model":"gpt-5"})]
    );
    assert_eq!(
        command(&mut app, "/approval auto"),
        [json!({"type":"set_approval","mode":"auto"})]
    );
    assert!(app.composer().is_empty());

    assert!(command(&mut app, "/approval sometimes").is_empty());
    assert_eq!(
        app.composer().plain_text().as_deref(),
        Some("/approval sometimes"),
        "a bad mode stays in the input box to be fixed"
    );
}

/// First hour, item 7: a pause can be undone from the TUI, and while
/// paused the status bar says how.
#[test]
fn pause_and_resume_from_the_tui() {
    let mut app = attached_with(vec![], Value::Null, "running");
    assert_eq!(command(&mut app, "/pause"), [json!({"type":"pause"})]);
    app.on_pod_event(event(json!({"type":"status","state":"paused","queued":0})));
    assert!(
        screen(&mut app, 120, 3).contains("paused · Ctrl+P or /resume goes on"),
        "{}",
        screen(&mut app, 120, 3)
    );
    assert_eq!(command(&mut app, "/resume"), [json!({"type":"resume"})]);
    key(&mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"resume"})],
        "Ctrl+P resumes a paused turn"
    );
    app.on_pod_event(event(json!({"type":"status","state":"running","queued":0})));
    key(&mut app, KeyCode::Char('p'), KeyModifiers::CONTROL);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"pause"})],
        "and pauses a running one"
    );
}

/// First hour, item 5: a refusal of the user's own command shows at the
/// bottom, where they look, saying which command and what to do — not as a
/// notice above the answer still streaming.
#[test]
fn a_refused_command_is_said_at_the_bottom() {
    let mut app = attached_with(
        vec![],
        json!({"type":"text","text":"streaming…"}),
        "running",
    );
    type_str(&mut app, "/new");
    enter(&mut app);
    let sent = app.take_outgoing();
    let id = sent
        .iter()
        .find_map(|o| match o {
            Outgoing::Request(r) if matches!(r.method, Method::NewSession) => r.request_id.clone(),
            _ => None,
        })
        .unwrap();
    let blocks = app.conversation().blocks().len();
    app.on_pod_event(event(json!({"type":"error","code":"busy","request_id":id,
        "message":"the pod is busy; try again when it is idle"})));
    assert_eq!(
        app.conversation().blocks().len(),
        blocks,
        "no notice in the transcript"
    );
    let bottom = screen(&mut app, 120, 3);
    assert!(
        bottom.contains("/new refused (Esc cancels the running turn): the pod is busy"),
        "{bottom}"
    );
}

/// First hour, item 13: Ctrl+C on a draft while nothing runs does not
/// promise to cancel a turn.
#[test]
fn ctrl_c_on_a_draft_while_idle_says_what_the_next_press_does() {
    let mut app = attached(vec![]);
    type_str(&mut app, "half a thought");
    key(&mut app, KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(app.composer().is_empty());
    let bottom = screen(&mut app, 120, 3);
    assert!(
        bottom.contains("draft cleared; Ctrl+C twice quits"),
        "{bottom}"
    );
    assert!(!bottom.contains("cancels the turn"), "{bottom}");
}

/// A rewind is said once: by its `rewind` entry, not again by the answer
/// to the request (found by a new-user trial of the rewind picker).
#[test]
fn a_rewind_is_shown_once() {
    let mut app = attached(vec![]);
    type_str(&mut app, "/undo");
    app.take_outgoing();
    app.on_pod_event(entry(
        1,
        json!({"kind":"rewind","before_seq":1,"session_id":null,"checkpoint":"a","checkpoint_before":"b",
            "files_restored":[{"path":"x.txt","action":"written"}],"conflicts":[],"not_restored":[],
            "conversation":false}),
    ));
    app.on_pod_event(event(
        json!({"type":"response","request_id":"tui-9","ok":true,
        "session_id":"0b5e551d-0000-0000-0000-000000000000",
        "files_restored":[{"path":"x.txt","action":"written"}],"conflicts":[],"not_restored":[]}),
    ));
    let text = screen(&mut app, 100, 20);
    assert_eq!(text.matches("x.txt").count(), 1, "{text}");
}

#[test]
fn local_commands_send_nothing() {
    let mut app = attached(vec![assistant_text("earlier")]);
    assert!(command(&mut app, "/model").is_empty());
    assert!(command(&mut app, "/status").is_empty());
    let notices: Vec<String> = app
        .conversation()
        .blocks()
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].contains("offline/offline"), "{notices:?}");
    for line in [
        "state     idle",
        "session   0b5e551d",
        "sandbox",
        "MCP       git ready, 12 tools; web failed (exited with status 1)",
    ] {
        assert!(notices[1].contains(line), "{line} not in {}", notices[1]);
    }

    assert!(command(&mut app, "/help").is_empty());
    assert!(app.overlay().is_some());
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert!(app.overlay().is_none());
    key(&mut app, KeyCode::Char('?'), KeyModifiers::NONE);
    assert!(
        app.overlay().is_some(),
        "? on an empty input box opens the help"
    );
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert!(actions(&mut app).is_empty());
    type_str(&mut app, "why?");
    assert_eq!(app.composer().plain_text().as_deref(), Some("why?"));
    key(&mut app, KeyCode::Char('u'), KeyModifiers::CONTROL);

    assert!(command(&mut app, "/x").is_empty());
    assert_eq!(app.composer().plain_text().as_deref(), Some("/x"));
    key(&mut app, KeyCode::Char('u'), KeyModifiers::CONTROL);

    assert!(command(&mut app, "/clear").is_empty());
    let blocks = app.conversation().blocks();
    assert_eq!(blocks.len(), 1, "only the notice that says what /clear did");
    assert!(
        format!("{:?}", blocks[0]).contains("/new starts a fresh one"),
        "{blocks:?}"
    );
    assert!(command(&mut app, "/quit").is_empty());
    assert!(app.should_quit());
}

#[test]
fn workflows_are_known_from_the_pod_and_called_with_args() {
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot(vec![], Value::Null, "idle"));
    let sent = app.take_outgoing();
    let Some(Outgoing::Request(listing)) = sent.get(1) else {
        panic!("no workflow listing on attach: {sent:?}")
    };
    let Some(Outgoing::Request(hello)) = sent.first() else {
        panic!("no hello on connecting: {sent:?}")
    };
    let Method::Hello { client } = &hello.method else {
        panic!("the first request is not hello: {hello:?}")
    };
    assert!(client.starts_with("tui@"), "{client}");
    assert!(
        client.ends_with(&format!("#{}", std::process::id())),
        "each TUI labels itself distinctly: {client}"
    );
    assert_eq!(
        serde_json::to_value(&listing.method).unwrap(),
        json!({"type":"list_completions","kind":"workflow","prefix":""})
    );
    app.on_pod_event(event(json!({"type":"response",
        "request_id":listing.request_id,"completions":["review"],
        "items":[{"value":"review","kind":"workflow","detail":"Review a change"}]})));
    assert_eq!(
        command(&mut app, "/review  src/main.rs "),
        [json!({"type":"run","segments":[
            {"type":"workflow_invoke","slug":"review","args":"src/main.rs"}]})]
    );
    assert_eq!(
        command(&mut app, "//review is a command"),
        [json!({"type":"run","segments":[{"type":"text","text":"/review is a command"}]})]
    );
    assert_eq!(
        command(&mut app, "/etc/hosts is a path"),
        [json!({"type":"run","segments":[{"type":"text","text":"/etc/hosts is a path"}]})]
    );
}

fn session(id: &str, title: &str, current: bool) -> Value {
    json!({"session_id":id,"created_at":"2026-01-01T00:00:00Z",
        "updated_at":"2026-01-01T00:00:00Z","entries":4,"title":title,
        "compacted_from":null,"forked_from":null,"current":current})
}

#[test]
fn the_session_picker_resumes_and_forks() {
    const OTHER: &str = "aaaaaaaa-0000-4000-8000-000000000003";
    let mut app = attached(vec![]);
    let sent = command(&mut app, "/sessions");
    assert_eq!(sent, [json!({"type":"list_sessions"})]);
    let open = |app: &mut App| {
        type_str(app, "/sessions");
        enter(app);
        let Some(Outgoing::Request(r)) = app.take_outgoing().pop() else {
            panic!("no list_sessions")
        };
        app.on_pod_event(event(json!({"type":"response","request_id":r.request_id,
            "sessions":[session(SESSION, "current one", true), session(OTHER, "older", false)]})));
        assert!(app.overlay().is_some());
    };
    open(&mut app);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    enter(&mut app);
    assert!(app.overlay().is_none());
    assert_eq!(
        actions(&mut app),
        [json!({"type":"resume_session","session_id":OTHER})]
    );

    open(&mut app);
    key(&mut app, KeyCode::Char('f'), KeyModifiers::NONE);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"fork"})],
        "the current one forks at once"
    );

    open(&mut app);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    key(&mut app, KeyCode::Char('f'), KeyModifiers::NONE);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"resume_session","session_id":OTHER})]
    );
    let mut resumed = serde_json::to_value(snapshot(vec![], Value::Null, "idle")).unwrap();
    resumed["session_id"] = json!(OTHER);
    resumed["entries"][0]["entry"]["session_id"] = json!(OTHER);
    app.on_pod_event(event(resumed));
    assert_eq!(
        actions(&mut app),
        [json!({"type":"fork"})],
        "another session is forked once it is current"
    );
}

/// This client's queued messages are listed under the conversation until
/// their turn starts, and Esc on an empty input box takes the last back.
#[test]
fn queued_messages_are_listed_and_can_be_taken_back() {
    let mut app = attached_with(vec![], Value::Null, "running");
    let queue = |app: &mut App, text: &str| {
        type_str(app, text);
        enter(app);
        let Some(Outgoing::Request(run)) = app.take_outgoing().pop() else {
            panic!("no run sent")
        };
        let id = run.request_id.unwrap();
        app.on_pod_event(event(json!({"type":"response","request_id":id,"queued":1})));
        id
    };
    let first = queue(&mut app, "first");
    let second = queue(&mut app, "second one");
    let text = screen(&mut app, 60, 10);
    assert!(text.contains("queued: first "), "{text}");
    assert!(
        text.contains("queued: second one · Esc takes it back"),
        "{text}"
    );

    app.on_pod_event(event(
        json!({"type":"turn_start","turn_id":"t2","request_id":first}),
    ));
    assert!(!screen(&mut app, 60, 10).contains("queued: first"));

    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    let Some(Outgoing::Request(cancel)) = app.take_outgoing().pop() else {
        panic!("no cancel sent")
    };
    assert_eq!(
        serde_json::to_value(&cancel.method).unwrap(),
        json!({"type":"cancel","run":second})
    );
    app.on_pod_event(event(json!({"type":"response",
        "request_id":cancel.request_id,"removed":true})));
    assert_eq!(app.composer().plain_text().as_deref(), Some("second one"));
    assert!(app.queued().is_empty());
    assert!(!screen(&mut app, 60, 10).contains("queued:"));

    key(&mut app, KeyCode::Char('u'), KeyModifiers::CONTROL);
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"cancel"})],
        "with nothing queued, Esc cancels the running turn"
    );
}

/// After a reconnect the status bar shows the connection, not a hint
/// left over from while it was lost.
#[test]
fn reconnecting_leaves_no_stale_hint() {
    let mut app = attached(vec![]);
    app.on_connection(ConnEvent::Retrying {
        retry_in: Duration::from_millis(100),
        error: "gone".into(),
    });
    type_str(&mut app, "hello");
    enter(&mut app);
    assert!(screen(&mut app, 120, 3).contains("not connected"));
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot(vec![], Value::Null, "idle"));
    let text = screen(&mut app, 120, 3);
    assert!(!text.contains("not connected"), "{text}");
    assert!(!text.contains("reconnecting"), "{text}");
    assert!(text.contains("● connected"), "{text}");
}

/// #24: Esc Esc on an empty composer opens the rewind picker — the
/// session's messages, newest first, with what each turn changed — and
/// choosing one, then `f`, rewinds its files only.
#[test]
fn esc_esc_opens_the_rewind_picker_and_a_choice_sends_the_rewind() {
    let change = json!([{"path":"src/lib.rs","change":"modified","added":3,"removed":1}]);
    let mut app = attached(vec![
        user_input(json!([{"type":"text","text":"fix the parser"}])),
        json!({"kind":"checkpoint","checkpoint":"a1","reason":"turn_start","changes":[],"at":"x"}),
        json!({"kind":"checkpoint","checkpoint":"b2","reason":"turn_end","changes":change,"at":"x"}),
        json!({"kind":"turn_end","reason":"completed","usage":null}),
        user_input(json!([{"type":"text","text":"now the docs"}])),
        json!({"kind":"turn_end","reason":"completed","usage":null}),
    ]);
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert!(actions(&mut app).is_empty(), "one Esc sends nothing");
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    let text = screen(&mut app, 80, 10);
    let newest = text.find("now the docs").expect(&text);
    let older = text.find("fix the parser").expect(&text);
    assert!(newest < older, "newest first:\n{text}");
    assert!(text.contains("1 file changed"), "{text}");
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert!(screen(&mut app, 80, 10).contains("f files"));
    key(&mut app, KeyCode::Char('f'), KeyModifiers::NONE);
    assert_eq!(
        actions(&mut app),
        [json!({"type":"rewind","before_seq":1,"files":true,"conversation":false})]
    );
    assert!(
        !screen(&mut app, 80, 10).contains("Rewind"),
        "the picker closed"
    );
}

/// #36.7: `/jobs` lists the background jobs and `/jobs N` shows the last
/// lines one has printed so far, read from the pod (`list_jobs`,
/// `get_job_output`).
#[test]
fn slash_jobs_lists_the_jobs_and_shows_one_jobs_output() {
    let job = json!({"job":3,"command":"npm run dev","started_at":"2026-01-02T10:00:00Z",
        "running":true,"exit_code":null,"signal":null});
    let mut app = attached(vec![]);
    type_str(&mut app, "/jobs");
    enter(&mut app);
    let asked = sent(&mut app);
    let (id, method) = asked
        .iter()
        .find(|(_, m)| m["type"] == "list_jobs")
        .expect("list_jobs sent");
    assert_eq!(*method, json!({"type":"list_jobs"}));
    app.on_pod_event(event(
        json!({"type":"response","request_id":id,"jobs":[job.clone()]}),
    ));
    let text = screen(&mut app, 80, 20);
    assert!(text.contains("3  running    npm run dev"), "{text}");

    let output: String = (1..=25).map(|i| format!("line {i}\n")).collect();
    type_str(&mut app, "/jobs 3");
    enter(&mut app);
    let asked = sent(&mut app);
    let (id, method) = asked
        .iter()
        .find(|(_, m)| m["type"] == "get_job_output")
        .expect("get_job_output sent");
    assert_eq!(*method, json!({"type":"get_job_output","job":3}));
    app.on_pod_event(event(
        json!({"type":"response","request_id":id,"jobs":[job],"output":output}),
    ));
    let text = screen(&mut app, 80, 30);
    assert!(text.contains("[job 3 · running] npm run dev"), "{text}");
    assert!(text.contains("line 25"), "{text}");
    assert!(text.contains("5 earlier lines"), "{text}");
    assert!(
        !text.contains("line 5 "),
        "the earlier lines are left out: {text}"
    );
}

/// `/review @src/ops.rs #style` as the composer sends it — the call, then
/// the refs — is drawn with its spaces, and its row in the rewind picker
/// says what it was instead of nothing (issue 36).
#[test]
fn a_workflow_call_with_refs_is_drawn_spaced_and_named_in_the_rewind_picker() {
    let mut app = attached(vec![
        user_input(json!([
            {"type":"workflow_invoke","slug":"review","args":""},
            {"type":"file_ref","path":"src/ops.rs"},
            {"type":"text","text":" "},
            {"type":"knowledge_ref","slug":"style"}
        ])),
        json!({"kind":"turn_end","reason":"completed","usage":null}),
    ]);
    let text = screen(&mut app, 80, 10);
    assert!(text.contains("/review @src/ops.rs #style"), "{text}");
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    let picker = screen(&mut app, 80, 10);
    assert!(picker.contains("Rewind"), "{picker}");
    assert!(picker.contains("  /review @src/ops.rs #style "), "{picker}");
}

/// `/agents NAME` (a slug or a full name) switches the connection into
/// that child of the pod in view, `/agents ..` back; the status line says
/// whose child the view is. A name the pod does not list goes nowhere.
#[test]
fn agents_switches_the_view_into_a_child_and_back() {
    let status = json!({"state":"running","queued":0,"agents":[
        {"name":"default.tests","state":"waiting","pending_approvals":["c1"],
         "session_id":NEW_SESSION,"usage":{"input_tokens":1200,"output_tokens":300}}],
        "tree_usage":{"input_tokens":1500,"output_tokens":400}});
    let mut app = attached_with_status(vec![], status.clone());
    assert_eq!(
        command(&mut app, "/agents tests"),
        [json!({"open": "default.tests"})]
    );
    assert_eq!(app.viewing(), ["default"]);
    assert_eq!(
        app.connection(),
        ConnectionState::Connecting,
        "until the child's snapshot"
    );
    let text = tui_common::screen(&mut app, 100, 6);
    assert!(
        text.contains("child of default · /agents goes back"),
        "{text}"
    );
    assert_eq!(command(&mut app, "/agents .."), [json!("back")]);
    assert!(app.viewing().is_empty());
    // Back at the parent, its snapshot rebuilds the view and lists the
    // children again: a full name opens one too.
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot_with_status(vec![], Value::Null, status));
    app.take_outgoing();
    assert_eq!(
        command(&mut app, "/agents default.tests"),
        [json!({"open": "default.tests"})]
    );
    command(&mut app, "/agents ..");
    assert_eq!(command(&mut app, "/agents nope"), Vec::<Value>::new());
    assert!(app.viewing().is_empty());
}

/// The snapshot of the pod `pod` (session `session`) holding `entries`.
fn pod_snapshot(
    pod: &str,
    session: &str,
    entries: Vec<Value>,
    status: Value,
) -> pod::protocol::Event {
    let mut lines = vec![
        json!({"seq":0,"entry":{"kind":"session_start","session_id":session,
        "created_at":"2026-01-01T00:00:00Z","compacted_from":null,"forked_from":null}}),
    ];
    for (i, entry) in entries.into_iter().enumerate() {
        lines.push(json!({"seq": i + 1, "entry": entry}));
    }
    event(json!({"type":"snapshot","protocol_version":1,
        "greeting":{"pod":pod,"version":"0.1.0","session_id":session,
                    "provider":"offline","model":"offline","workspace":"/w","pid":1,
                    "approval":"ask",
                    "sandbox":{"mode":"workspace-write","available":true,"network":true}},
        "status":status,"session_id":session,"entries":lines,"in_flight":null}))
}

/// Parent → child A → parent → child B: each view shows its own pod's log
/// and nothing laid out for another view (the trial of issue 39 saw the
/// parent's session header and its entries in a child's view, because the
/// row layouts of the view left behind were served again).
#[test]
fn a_child_view_shows_only_its_own_rows_after_switching_between_views() {
    const ALPHA: &str = "a1a1a1a1-0000-4000-8000-000000000003";
    const BETA: &str = "b2b2b2b2-0000-4000-8000-000000000004";
    let child = |name: &str, session: &str| {
        json!({"name":name,"state":"idle","pending_approvals":[],"session_id":session,
               "usage":{"input_tokens":0,"output_tokens":0}})
    };
    let parent_status = json!({"state":"idle","queued":0,
        "agents":[child("default.alpha", ALPHA), child("default.beta", BETA)],
        "tree_usage":{"input_tokens":0,"output_tokens":0}});
    let idle = json!({"state":"idle","queued":0});
    let parent_log = || {
        vec![
            user_input(json!([{"type":"text","text":"Delegate both tasks"}])),
            assistant_text("I will delegate both."),
        ]
    };
    let mut app = attached_with_status(parent_log(), parent_status.clone());
    let parent = screen(&mut app, 100, 20);
    assert!(parent.contains("I will delegate both."), "{parent}");

    let open = |app: &mut App, to: &str, snapshot: pod::protocol::Event| {
        command(app, to);
        app.on_connection(ConnEvent::Connected);
        app.on_pod_event(snapshot);
        app.take_outgoing();
        screen(app, 100, 20)
    };
    let alpha_log = vec![
        user_input(json!([{"type":"text","text":"Write notes.txt"}])),
        assistant_text("Wrote notes.txt."),
    ];
    let alpha = open(
        &mut app,
        "/agents alpha",
        pod_snapshot("default.alpha", ALPHA, alpha_log, idle.clone()),
    );
    assert!(alpha.contains("session a1a1a1a1"), "{alpha}");
    assert!(alpha.contains("Wrote notes.txt."), "{alpha}");
    assert!(!alpha.contains("delegate"), "{alpha}");

    let back = open(
        &mut app,
        "/agents ..",
        pod_snapshot("default", SESSION, parent_log(), parent_status),
    );
    assert!(back.contains("I will delegate both."), "{back}");
    assert!(!back.contains("notes.txt"), "{back}");

    let beta_log = vec![
        user_input(json!([{"type":"text","text":"Summarise README.md"}])),
        assistant_text("Reading the README: a calculator."),
    ];
    let beta = open(
        &mut app,
        "/agents beta",
        pod_snapshot("default.beta", BETA, beta_log, idle),
    );
    assert!(beta.contains("session b2b2b2b2"), "{beta}");
    assert!(beta.contains("Summarise README.md"), "{beta}");
    assert!(beta.contains("Reading the README: a calculator."), "{beta}");
    for stale in ["0b5e551d", "a1a1a1a1", "delegate", "notes.txt"] {
        assert!(!beta.contains(stale), "{stale:?} is another view's: {beta}");
    }
}

/// A child's approval request is in the child's log, not the parent's
/// view: the parent's status is where it first shows, and a person who
/// looked away is told, once per request.
#[test]
fn a_childs_new_approval_request_alerts_a_person_who_looked_away() {
    let status = |pending: Value| {
        event(
            json!({"type":"status","state":"waiting","queued":0,"agents":[
            {"name":"default.tests","state":"waiting","pending_approvals":pending,
             "session_id":NEW_SESSION,"usage":{"input_tokens":0,"output_tokens":0}}],
            "tree_usage":{"input_tokens":0,"output_tokens":0}}),
        )
    };
    let mut app = attached(vec![]);
    app.on_terminal(TermEvent::FocusLost);
    app.on_pod_event(status(json!([])));
    assert!(app.take_alerts().is_empty());
    app.on_pod_event(status(json!(["c1"])));
    let alerts = app.take_alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(alerts[0].contains("default.tests: call c1"), "{alerts:?}");
    app.on_pod_event(status(json!(["c1"])));
    assert!(app.take_alerts().is_empty(), "once per request");
}
