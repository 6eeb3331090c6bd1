//! What the TUI draws: one snapshot test per block kind and state, drawn
//! with ratatui's `TestBackend`. Accept changes with
//! `INSTA_UPDATE=always cargo test --test tui_render` and read the `.snap`
//! files before committing them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod tui_common;

use std::time::Instant;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use insta::assert_snapshot;
use pod::tui::connection::ConnEvent;
use pod::tui::App;
use ratatui::style::Color;
use serde_json::{json, Value};
use tui_common::*;

fn key(app: &mut App, code: KeyCode, modifiers: KeyModifiers) {
    app.on_terminal(TermEvent::Key(KeyEvent::new(code, modifiers)));
}

#[test]
fn user_input_segments() {
    let mut app = attached(vec![user_input(json!([
        {"type":"text","text":"please read "},
        {"type":"file_ref","path":"src/main.rs"},
        {"type":"text","text":" and this:\n"},
        {"type":"paste","id":1,"text":"line 1\nline 2\nline 3"},
        {"type":"text","text":" then "},
        {"type":"knowledge_ref","slug":"style"},
        {"type":"text","text":" "},
        {"type":"workflow_invoke","slug":"review","args":"src/"},
        {"type":"text","text":" "},
        {"type":"hologram","x":1}
    ]))]);
    let buffer = buffer(&mut app, 60, 10);
    let at = find(&buffer, "[Clipboard #1 | 20 chars, 3 lines]").expect("paste label");
    assert_eq!(buffer[at].fg, Color::Magenta);
    let at = find(&buffer, "@src/main.rs").expect("file ref");
    assert_eq!(buffer[at].fg, Color::Cyan);
    assert_snapshot!(screen(&mut app, 60, 10));
}

#[test]
fn assistant_markdown() {
    let md = "# Plan\n\nSome *emphasis*, **strong** and `code`.\n\n\
              - first item that is long enough to wrap around\n- second\n  1. nested\n\n\
              ```rust\nfn main() {}\n```\n\n> a quote";
    let mut app = attached(vec![assistant_text(md)]);
    assert_snapshot!(screen(&mut app, 40, 20));
}

#[test]
fn reasoning_is_dimmed() {
    let mut app = attached(vec![json!({"kind":"assistant_items",
        "items":[{"type":"reasoning","text":"Thinking about the answer."}]})]);
    let buffer = buffer(&mut app, 40, 6);
    let at = find(&buffer, "Thinking").expect("reasoning");
    assert_eq!(buffer[at].fg, Color::DarkGray);
    assert_snapshot!(screen(&mut app, 40, 6));
}

fn tool_session() -> App {
    attached(vec![
        tool_call("c1", "bash", json!({"command":"ls -la","timeout":5})),
        tool_result("c1", "total 3\nCargo.toml\nsrc", false),
        tool_call("c2", "read_file", json!({"path":"missing.rs"})),
        tool_result("c2", "no such file: missing.rs", true),
        tool_call("c3", "grep", json!({"pattern":"fn main"})),
    ])
}

#[test]
fn a_background_job_is_marked_as_one() {
    let mut app = attached(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command":"npm run dev","background":true}),
        ),
        tool_result("c1", "started background job 1", false),
        tool_call("c2", "bash", json!({"command":"npm test"})),
    ]);
    let text = screen(&mut app, 70, 12);
    assert!(
        text.contains("⚙ bash background job · npm run dev"),
        "{text}"
    );
    assert!(!text.contains("background job · npm test"), "{text}");
}

#[test]
fn tool_calls_collapsed_running_and_error() {
    let mut app = tool_session();
    let buffer = buffer(&mut app, 50, 14);
    let at = find(&buffer, "error: no such file").expect("error result");
    assert_eq!(buffer[at].fg, Color::Red);
    assert_snapshot!(screen(&mut app, 50, 14));
}

#[test]
fn tool_call_expanded() {
    let mut app = tool_session();
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert_snapshot!(screen(&mut app, 50, 22));
}

#[test]
fn notices_and_unknown_entries() {
    let mut app = attached(vec![
        json!({"kind":"hook_injected_items","items":[{"source":"notify","text":"CI is green"}]}),
        json!({"kind":"turn_end","reason":"cancelled","usage":null}),
        json!({"kind":"turn_end","reason":"error","usage":null}),
        json!({"kind":"turn_end","reason":"max_steps","usage":null}),
        json!({"kind":"turn_end","reason":"interrupted","usage":null}),
        json!({"kind":"fork_marker","x":1}),
    ]);
    app.on_pod_event(event(
        json!({"type":"notification","level":"warn","source":"compactor","message":"context is 85% full"}),
    ));
    app.on_pod_event(event(
        json!({"type":"error","code":"storage_error","message":"the disk is full"}),
    ));
    app.on_pod_event(event(json!({"type":"hologram"})));
    assert_snapshot!(screen(&mut app, 60, 18));
}

#[test]
fn compaction_notices_and_divider() {
    let mut app = attached(vec![assistant_text("before")]);
    app.on_pod_event(event(json!({"type":"compact_start","reason":"manual"})));
    app.on_pod_event(event(
        json!({"type":"compact_failed","error":"summary was empty"}),
    ));
    app.on_pod_event(event(
        json!({"type":"compact_start","reason":"auto_post_turn"}),
    ));
    app.on_pod_event(event(
        json!({"type":"compact_done","new_session_id":NEW_SESSION}),
    ));
    app.on_pod_event(event(
        json!({"type":"entry","session_id":NEW_SESSION,"seq":0,
        "entry":{"kind":"session_start","session_id":NEW_SESSION,"created_at":"x",
                 "compacted_from":SESSION,"forked_from":null}}),
    ));
    app.on_pod_event(event(
        json!({"type":"entry","session_id":NEW_SESSION,"seq":1,
        "entry":{"kind":"hook_injected_items","items":[
            {"source":"compact_summary","text":"We talked about the plan."}]}}),
    ));
    let text = screen(&mut app, 90, 16);
    assert!(text.contains("[compact] starting"));
    assert!(text.contains("[compact error] summary was empty"));
    assert!(text.contains("[compact] done (new session c0ffee00)"));
    assert!(text.contains("session c0ffee00 │"), "status bar follows");
    assert_snapshot!(text);
}

#[test]
fn draft_is_replaced_by_its_entry() {
    let mut app = attached_with(
        vec![user_input(json!([{"type":"text","text":"hi"}]))],
        json!({"type":"text","text":"Hello "}),
        "running",
    );
    app.on_pod_event(event(json!({"type":"text_delta","text":"unique-word"})));
    let streaming = screen(&mut app, 40, 8);
    assert_eq!(streaming.matches("unique-word").count(), 1);
    assert_snapshot!("draft_streaming", streaming);
    app.on_pod_event(entry(2, assistant_text("Hello unique-word")));
    let done = screen(&mut app, 40, 8);
    assert_eq!(done.matches("unique-word").count(), 1);
    assert_snapshot!("draft_replaced", done);
}

#[test]
fn tool_call_draft_then_entry() {
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_pod_event(event(
        json!({"type":"tool_call_start","call_id":"c9","name":"bash"}),
    ));
    app.on_pod_event(event(
        json!({"type":"tool_call_args_delta","call_id":"c9","delta":"{\"command\":\"make"}),
    ));
    assert!(screen(&mut app, 40, 6).contains("⚙ bash {\"command\":\"make"));
    app.on_pod_event(entry(1, tool_call("c9", "bash", json!({"command":"make"}))));
    let text = screen(&mut app, 40, 6);
    assert_eq!(text.matches("bash").count(), 1);
    assert!(text.contains("running…"));
}

#[test]
fn narrow_terminal_wraps() {
    let mut app = attached(vec![
        user_input(json!([{"type":"text","text":"a question that wraps"},
                          {"type":"paste","id":1,"text":"x\ny"}])),
        assistant_text("An answer with **several** words to wrap."),
        tool_call("c1", "bash", json!({"command":"cargo test --all"})),
    ]);
    assert_snapshot!(screen(&mut app, 20, 20));
}

#[test]
fn tiny_terminals_never_panic() {
    let mut app = tool_session();
    app.on_terminal(TermEvent::Paste("pasted\ntext".into()));
    for width in 0..12 {
        for height in 0..8 {
            draw(&mut app, width, height);
        }
    }
    assert_snapshot!(screen(&mut app, 12, 3));
}

#[test]
fn status_bar_running_with_queue_and_usage() {
    let mut app = attached_with(
        vec![json!({"kind":"turn_end","reason":"completed",
            "usage":{"input_tokens":12345,"output_tokens":678}})],
        Value::Null,
        "running",
    );
    app.on_pod_event(event(json!({"type":"status","state":"running","queued":2})));
    let text = screen(&mut app, 120, 3);
    assert!(text.contains("12.3k in · 678 out"));
    assert_snapshot!(text);
}

/// #30 item 7: cached input is billed at a fraction, so the usage part
/// says how much of the input came from the prompt cache.
#[test]
fn status_bar_usage_shows_cached_input() {
    let app_with = |usage: Value| {
        let mut app = attached_with(
            vec![json!({"kind":"turn_end","reason":"completed","usage":usage})],
            Value::Null,
            "idle",
        );
        screen(&mut app, 120, 3)
    };
    let text = app_with(json!({"input_tokens":20000,"output_tokens":40,"cache_read_tokens":18000}));
    assert!(text.contains("20.0k in (18.0k cached) · 40 out"), "{text}");
}

#[test]
fn status_bar_reconnecting_and_offline() {
    let mut app = attached(vec![]);
    app.on_connection(ConnEvent::Retrying {
        retry_in: std::time::Duration::from_millis(1500),
        error: "the pod closed the connection".into(),
    });
    let text = screen(&mut app, 100, 6);
    assert!(text.contains("reconnecting in 2s"), "{text}");
    assert!(text.contains("[disconnected] the pod closed the connection"));
    let mut fresh = App::new("mypod", Instant::now());
    fresh.on_connection(ConnEvent::Retrying {
        retry_in: std::time::Duration::from_secs(2),
        error: "no pod".into(),
    });
    assert_snapshot!(screen(&mut fresh, 60, 3));
}

#[test]
fn composer_shows_paste_label_and_file_ref() {
    let mut app = attached(vec![]);
    for c in "see ".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    app.on_terminal(TermEvent::Paste("a\nb\nc".into()));
    key(&mut app, KeyCode::Enter, KeyModifiers::ALT);
    for c in "and @sr".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    let request_id = app.composer().completion().unwrap().request_id.clone();
    app.on_pod_event(event(json!({"type":"response","request_id":request_id,
        "completions":["src/lib.rs","src/main.rs"]})));
    let popup = screen(&mut app, 50, 10);
    assert!(popup.contains("@src/lib.rs"), "{popup}");
    assert_snapshot!("composer_completion_popup", popup);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    key(&mut app, KeyCode::Tab, KeyModifiers::NONE);
    let buffer = buffer(&mut app, 50, 10);
    assert_eq!(
        buffer[find(&buffer, "[Clipboard #1").unwrap()].fg,
        Color::Magenta
    );
    assert_snapshot!("composer_with_atoms", screen(&mut app, 50, 10));
}

#[test]
fn resizing_reflows() {
    let mut app = attached(vec![assistant_text(
        "one two three four five six seven eight nine ten",
    )]);
    let wide = screen(&mut app, 60, 6);
    assert!(wide.contains("one two three four five six seven eight nine ten"));
    let narrow = screen(&mut app, 20, 8);
    assert!(narrow.contains("one two three four "), "{narrow}");
    assert!(narrow.contains("five six seven eight"), "{narrow}");
    assert_eq!(screen(&mut app, 60, 6), wide);
}

#[test]
fn control_characters_never_reach_the_terminal() {
    let mut app = attached(vec![
        tool_call("c1", "bash", json!({"command":"printf '\\x1b[2J'"})),
        tool_result("c1", "\u{1b}[2Jcleared?\u{7}", false),
    ]);
    let buffer = buffer(&mut app, 40, 6);
    for cell in buffer.content() {
        assert!(!cell.symbol().contains('\u{1b}'), "escape in a cell");
        assert!(!cell.symbol().contains('\u{7}'), "bell in a cell");
    }
    // The escape sequence is dropped whole; the bell shows as what it is.
    assert!(find(&buffer, "└ cleared?\\x07").is_some());
    assert!(find(&buffer, "[2Jcleared").is_none());
}

#[test]
fn mid_turn_attach_shows_the_running_tool_call() {
    let mut app = attached_with(
        vec![user_input(json!([{"type":"text","text":"build it"}]))],
        json!({"type":"tool_call","call_id":"c1","name":"bash","arguments_so_far":"{\"command\":\"cargo b"}),
        "running",
    );
    let text = screen(&mut app, 50, 8);
    assert!(text.contains("› build it"));
    assert!(text.contains("⚙ bash {\"command\":\"cargo b"), "{text}");
}

/// The `/` menu: built-in commands first, then the pod's workflows, each
/// with its description.
#[test]
fn slash_menu() {
    let mut app = attached(vec![]);
    key(&mut app, KeyCode::Char('/'), KeyModifiers::NONE);
    key(&mut app, KeyCode::Char('s'), KeyModifiers::NONE);
    let request_id = app.composer().completion().unwrap().request_id.clone();
    app.on_pod_event(event(json!({"type":"response","request_id":request_id,
        "completions":["security-review"],
        "items":[{"value":"security-review","kind":"workflow",
                  "detail":"Review a change for security problems"}]})));
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    let buffer = buffer(&mut app, 70, 10);
    let at = find(&buffer, "/sessions").expect("the selected built-in");
    assert_eq!(buffer[at].bg, Color::Blue);
    assert!(find(&buffer, "Review a change for security").is_some());
    assert_snapshot!(screen(&mut app, 70, 10));
}

#[test]
fn help_screen() {
    let mut app = attached(vec![assistant_text("hidden behind the help")]);
    key(&mut app, KeyCode::Char('?'), KeyModifiers::NONE);
    // Tall enough for the whole help (it scrolls on a shorter terminal).
    let text = screen(&mut app, 80, 70);
    assert!(!text.contains("hidden behind"), "{text}");
    // `A` (allow always) was missing from the approval keys (QA, "the
    // first hour" item 16).
    for needle in [
        "Ctrl+O",
        "/approval",
        "#name",
        "Esc closes",
        "y / a / A / n / N",
        "allow always",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    assert_snapshot!(text);
    key(&mut app, KeyCode::Esc, KeyModifiers::NONE);
    assert!(screen(&mut app, 80, 70).contains("hidden behind the help"));
}

const TABLE: &str = "Results:\n\n\
| crate | version | why |\n\
|:------|--------:|-----|\n\
| syntect | 5.3 | highlighting code blocks by language |\n\
| pulldown-cmark | 0.12 | parsing the assistant's Markdown into events |\n\
| `ratatui` | 0.29 | drawing |\n";

#[test]
fn table() {
    let mut app = attached(vec![assistant_text(TABLE)]);
    let buffer = buffer(&mut app, 60, 14);
    assert!(buffer[find(&buffer, "crate").unwrap()]
        .modifier
        .contains(ratatui::style::Modifier::BOLD));
    assert_snapshot!(screen(&mut app, 60, 14));
}

#[test]
fn narrow_table() {
    let mut app = attached(vec![assistant_text(TABLE)]);
    assert_snapshot!(screen(&mut app, 40, 20));
}

/// Too narrow for three columns: one `key: value` block per row.
#[test]
fn very_narrow_table_becomes_blocks() {
    let mut app = attached(vec![assistant_text(TABLE)]);
    let text = screen(&mut app, 24, 20);
    assert!(text.contains("crate: syntect"), "{text}");
    assert!(!text.contains('┼'), "{text}");
    assert_snapshot!(text);
}

/// Colours are part of what is asserted: the keyword, the string, the
/// comment and the function name each have their own.
#[test]
fn highlighted_code_block() {
    let md = "```rust\n// greet\nfn main() {\n    println!(\"hi {}\", 42);\n}\n```\n\nSee [the docs](https://docs.rs/syntect) or <https://example.com>.";
    let mut app = attached(vec![assistant_text(md)]);
    let buffer = buffer(&mut app, 50, 12);
    let fg = |needle: &str| buffer[find(&buffer, needle).unwrap()].fg;
    assert_eq!(fg("fn main"), Color::Magenta);
    assert_eq!(fg("main()"), Color::Blue);
    assert_eq!(fg("hi {}"), Color::Green);
    assert_eq!(fg("// greet"), Color::DarkGray);
    assert_eq!(fg("42"), Color::Yellow);
    assert!(find(&buffer, "the docs (https://docs.rs/syntect)").is_some());
    assert!(
        find(&buffer, "https://example.com (").is_none(),
        "an autolink shows once"
    );
    assert_snapshot!(styled(&buffer));
}

/// Each row with its text and, after it, the colours used on it, so a
/// snapshot shows both.
fn styled(buffer: &ratatui::buffer::Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let mut text = String::new();
        let mut runs: Vec<(Color, String)> = Vec::new();
        for x in 0..buffer.area.width {
            let cell = &buffer[(x, y)];
            text.push_str(cell.symbol());
            if cell.fg != Color::Reset {
                match runs.last_mut() {
                    Some((c, s)) if *c == cell.fg => s.push_str(cell.symbol()),
                    _ => runs.push((cell.fg, cell.symbol().to_owned())),
                }
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
        for (color, s) in runs {
            out.push_str(&format!("    {color:?}: {s}\n"));
        }
    }
    out
}

#[test]
fn project_instructions_are_collapsed_until_opened() {
    let mut app = attached(vec![
        user_input(json!([{"type":"text","text":"hi"}])),
        json!({"kind":"hook_injected_items","items":[{"source":"project_instructions",
            "text":"AGENTS.md\n# Rules\n\n- run `cargo fmt`\n- keep commits small"}]}),
    ]);
    let collapsed = screen(&mut app, 50, 8);
    assert!(
        collapsed.contains("▸ project instructions AGENTS.md · 4 lines"),
        "{collapsed}"
    );
    assert!(!collapsed.contains("cargo fmt"));
    key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert_snapshot!(screen(&mut app, 50, 12));
}

#[test]
fn session_picker() {
    let ago = |secs: u64| {
        humantime::format_rfc3339_millis(
            std::time::SystemTime::now() - std::time::Duration::from_secs(secs),
        )
        .to_string()
    };
    let mut app = attached(vec![]);
    for c in "/sessions".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let request_id = app
        .take_outgoing()
        .into_iter()
        .find_map(|o| match o {
            pod::tui::connection::Outgoing::Request(r)
                if r.method == pod::protocol::Method::ListSessions =>
            {
                r.request_id
            }
            _ => None,
        })
        .expect("list_sessions");
    // Newest first, as the pod answers: a rewind of the current session
    // (same title), the current one, a fork of it.
    app.on_pod_event(event(json!({"type":"response","request_id":request_id,"sessions":[
        {"session_id":"bbbbbbbb-0000-4000-8000-000000000004","created_at":ago(100),
         "updated_at":ago(60),"entries":30,
         "title":"refactor the parser so that errors carry their position","compacted_from":null,
         "forked_from":{"session_id":SESSION,"seq":29},"current":false,"rewound":true},
        {"session_id":SESSION,"created_at":ago(7200),"updated_at":ago(300),"entries":42,
         "title":"refactor the parser so that errors carry their position","compacted_from":NEW_SESSION,
         "forked_from":null,"current":true},
        {"session_id":"aaaaaaaa-0000-4000-8000-000000000003","created_at":ago(200_000),
         "updated_at":ago(180_000),"entries":1,"title":null,"compacted_from":null,
         "forked_from":{"session_id":SESSION,"seq":4},"current":false}]})));
    // The selection moves in the order drawn: the branches of the current
    // session under it, the newest first.
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    let drawn = buffer(&mut app, 70, 9);
    assert_eq!(drawn[find(&drawn, "bbbbbbbb").unwrap()].bg, Color::Blue);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    let buffer = buffer(&mut app, 70, 9);
    assert_eq!(buffer[find(&buffer, "aaaaaaaa").unwrap()].bg, Color::Blue);
    let text = screen(&mut app, 70, 9);
    assert!(
        text.contains("1 entry") && !text.contains("1 entries"),
        "{text}"
    );
    assert_snapshot!(text);
}

#[test]
fn status_command_notice() {
    let mut app = attached(vec![]);
    for c in "/status".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    assert_snapshot!(screen(&mut app, 80, 14));
}

/// A code block still streaming in is drawn plainly (highlighting it again
/// on every frame would be too slow); once its fence closes it is coloured,
/// and no row moves.
#[test]
fn streaming_code_is_highlighted_once_closed() {
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_pod_event(event(
        json!({"type":"text_delta","text":"```rust\nfn main() {}\n"}),
    ));
    let open = buffer(&mut app, 40, 8);
    let at = find(&open, "fn main").expect("streamed code");
    assert_eq!(open[at].fg, Color::Yellow);
    app.on_pod_event(event(json!({"type":"text_delta","text":"```"})));
    let closed = buffer(&mut app, 40, 8);
    assert_eq!(find(&closed, "fn main"), Some(at), "nothing moved");
    assert_eq!(closed[at].fg, Color::Magenta);
}

/// A `bash` call this client saw start: the tail of its streamed output
/// under it, dim, and how long it has run; the status bar times the turn.
#[test]
fn running_tool_with_streamed_output() {
    let t0 = Instant::now();
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_tick(t0);
    app.on_pod_event(event(
        json!({"type":"turn_start","turn_id":"t1","request_id":null}),
    ));
    app.on_pod_event(entry(
        1,
        user_input(json!([{"type":"text","text":"build it"}])),
    ));
    app.on_pod_event(entry(
        2,
        tool_call("c1", "bash", json!({"command":"cargo build"})),
    ));
    for i in 1..=6 {
        app.on_pod_event(event(
            json!({"type":"tool_output_delta","call_id":"c1","text":format!("Compiling crate{i}\n")}),
        ));
    }
    app.on_tick(t0 + std::time::Duration::from_secs(12));
    let buffer = buffer(&mut app, 60, 14);
    let at = find(&buffer, "Compiling crate6").expect("the newest line");
    assert!(buffer[at].modifier.contains(ratatui::style::Modifier::DIM));
    let text = screen(&mut app, 60, 14);
    assert!(!text.contains("crate2"), "only the tail:\n{text}");
    assert!(text.contains("running… 12s"), "{text}");
    assert!(text.contains("running 12s"), "the turn's time:\n{text}");
    assert_snapshot!(text);

    app.on_pod_event(entry(
        3,
        tool_result("c1", "Finished\n[exit code: 0]", false),
    ));
    app.on_pod_event(entry(
        4,
        json!({"kind":"turn_end","reason":"completed","usage":null,
        "turn_id":"t1","request_id":null}),
    ));
    let done = screen(&mut app, 60, 14);
    assert!(!done.contains("Compiling"), "{done}");
    assert!(done.contains("done in 12s"), "{done}");
}

/// A model call being retried shows why and when, and drops the partial
/// block its hints built; the next text replaces the line.
#[test]
fn retry_line() {
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_pod_event(event(json!({"type":"text_delta","text":"Partial answ"})));
    app.on_pod_event(event(json!({"type":"retry","attempt":2,"max_attempts":4,
        "delay_ms":2000,"error":"HTTP 429 Too Many Requests\nretry-after: 2"})));
    let text = screen(&mut app, 60, 8);
    assert!(
        text.contains("HTTP 429 Too Many Requests · retrying in 2s (2/4)"),
        "{text}"
    );
    assert!(
        !text.contains("Partial"),
        "the partial block is void:\n{text}"
    );
    assert_snapshot!(text);
    app.on_pod_event(event(json!({"type":"text_delta","text":"Fresh"})));
    let text = screen(&mut app, 60, 8);
    assert!(!text.contains("retrying"), "{text}");
    assert!(text.contains("Fresh"), "{text}");
}

/// The context gauge: how full the last request was, yellow past 70%,
/// red past 80%.
#[test]
fn context_gauge() {
    let mut app = attached(vec![]);
    let mut gauge_at = |tokens: u64| {
        app.on_pod_event(event(json!({"type":"status","state":"idle","queued":0,
            "context_tokens":tokens,"context_window":128000})));
        let buffer = buffer(&mut app, 120, 3);
        let at = find(&buffer, "% of 128k").expect("the gauge");
        (screen(&mut app, 120, 3), buffer[at].fg)
    };
    let (text, fine) = gauge_at(55_040);
    assert!(text.contains("43% of 128k"), "{text}");
    assert_eq!(gauge_at(92_000).1, Color::Yellow);
    assert_eq!(gauge_at(110_000).1, Color::LightRed);
    assert_ne!(fine, Color::Yellow);
    assert_snapshot!(text);
}

/// A turn that failed after part of its answer, seen by a client that
/// attached afterwards: the error is in place, after the partial text,
/// because it comes from the `turn_end` entry; no duration, since this
/// client did not see the turn start.
#[test]
fn error_after_partial_answer_from_a_snapshot() {
    let mut app = attached(vec![
        user_input(json!([{"type":"text","text":"explain the parser"}])),
        assistant_text("The parser reads tokens and"),
        json!({"kind":"turn_end","reason":"error","usage":null,"turn_id":"t1","request_id":null,
            "error":{"code":"provider_http","message":"HTTP 500 Internal Server Error: \"upstream exploded\""}}),
    ]);
    let text = screen(&mut app, 60, 12);
    let partial = text.find("tokens and").expect("partial text");
    let error = text.find("provider_http").expect("the error");
    assert!(partial < error, "{text}");
    assert!(!text.contains(" after "), "{text}");
    assert_snapshot!(text);
}

/// `session_switched` then the new session's snapshot: the view is
/// rebuilt from it, with a divider saying what happened.
#[test]
fn session_switch_dividers() {
    let mut app = attached(vec![assistant_text("old conversation")]);
    let switch_to = |app: &mut App, reason: &str, start: Value| {
        app.on_pod_event(event(json!({"type":"session_switched",
            "new_session_id":NEW_SESSION,"reason":reason})));
        let mut frame = serde_json::to_value(snapshot(vec![], Value::Null, "idle")).unwrap();
        frame["session_id"] = json!(NEW_SESSION);
        frame["entries"][0]["entry"] = start;
        app.on_pod_event(event(frame));
        screen(app, 70, 6)
    };
    let start = |forked_from: Value| {
        json!({"kind":"session_start","session_id":NEW_SESSION,"created_at":"x",
            "compacted_from":null,"forked_from":forked_from})
    };
    let new = switch_to(&mut app, "new", start(Value::Null));
    assert!(!new.contains("old conversation"), "{new}");
    assert!(new.contains("── new session c0ffee00 ──"), "{new}");
    assert_snapshot!("session_switch_new", new);
    let fork = switch_to(
        &mut app,
        "fork",
        start(json!({"session_id":SESSION,"seq":14})),
    );
    assert!(
        fork.contains("forked from 0b5e551d at 14 · session c0ffee00"),
        "{fork}"
    );
    assert_snapshot!("session_switch_fork", fork);
    let resumed = switch_to(&mut app, "resume", start(Value::Null));
    assert!(
        resumed.contains("── resumed session c0ffee00 ──"),
        "{resumed}"
    );
    let reconnected = screen(&mut app, 70, 6);
    assert_eq!(reconnected, resumed);
}

/// Compaction says how much smaller the context became.
#[test]
fn compaction_reports_its_sizes() {
    let mut app = attached(vec![]);
    app.on_pod_event(event(
        json!({"type":"compact_done","new_session_id":NEW_SESSION,
        "tokens_before":98200,"tokens_after":4100}),
    ));
    let text = screen(&mut app, 90, 6);
    assert!(text.contains("context 98200 → 4100 tokens"), "{text}");
}

/// Smaller things a user reads: `1 line`, a search's pattern, a failed
/// command's exit code, the workspace and sandbox above the input box.
#[test]
fn tool_lines_read_naturally() {
    let mut app = attached(vec![
        tool_call("c1", "grep", json!({"pattern":"fn main","path":"src"})),
        tool_result("c1", "src/main.rs:1:fn main() {}", false),
        tool_call("c2", "bash", json!({"command":"cargo build"})),
        tool_result(
            "c2",
            "error[E0308]: mismatched types\nerror: could not compile\n[exit code: 101]",
            true,
        ),
        tool_call("c3", "bash", json!({"command":"false"})),
        tool_result("c3", "[exit code: 1]", true),
    ]);
    let text = screen(&mut app, 60, 14);
    assert!(text.contains("⚙ grep fn main in src"), "{text}");
    assert!(
        text.contains("└ exit 101 · error: could not compile (2 lines)"),
        "{text}"
    );
    assert!(text.contains("└ exit 1 "), "{text}");
    assert_snapshot!(text);
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Up, KeyModifiers::ALT);
    key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert!(screen(&mut app, 60, 20).contains("├ 1 line"));
}

/// QA, "the first hour" item 8: a summary states the outcome first, then
/// the line that matters — a cancelled command is not an `error:` of its
/// first line, a test run shows its verdict (the last line, not its first
/// test), `read_file`'s line numbers stay out — and colours are colours,
/// collapsed and expanded, every other escape sequence gone.
#[test]
fn tool_summaries_state_the_outcome_first() {
    let t0 = Instant::now();
    let mut app = attached_with(vec![], Value::Null, "running");
    app.on_tick(t0);
    let unittest = "test_a (t.T) ... ok\ntest_b (t.T) ... FAIL\n\n======\nFAIL: test_b\n\
                    ------\nRan 2 tests in 0.001s\n\nFAILED (failures=1)\n[exit code: 1]";
    let cargo = "running 3 tests\ntest a ... ok\ntest b ... ok\ntest c ... ok\n\n\
                 test result: ok. 3 passed; 0 failed\n\n[exit code: 0]";
    let entries = [
        tool_call("c1", "bash", json!({"command":"echo compiling; sleep 30"})),
        tool_result("c1", "compiling\n[cancelled: the command was killed]", true),
        tool_call("c2", "bash", json!({"command":"python -m unittest"})),
        tool_result("c2", unittest, true),
        tool_call("c3", "bash", json!({"command":"cargo test"})),
        tool_result("c3", cargo, false),
        tool_call("c4", "read_file", json!({"path":"src/lib.rs"})),
        tool_result("c4", "     1\tuse std::io;\n     2\t\n     3\tfn main() {}\n", false),
        tool_call("c5", "bash", json!({"command":"ls --color"})),
        tool_result("c5", "\u{1b}[31mred\u{1b}[0m \u{1b}]8;;http://x\u{1b}\\plain\u{1b}]8;;\u{1b}\\\n[exit code: 0]", false),
    ];
    for (seq, e) in entries.into_iter().enumerate() {
        if seq == 1 {
            app.on_tick(t0 + std::time::Duration::from_secs(4));
        }
        app.on_pod_event(entry(seq as u64 + 1, e));
    }
    let collapsed = buffer(&mut app, 70, 22);
    let text = screen(&mut app, 70, 22);
    assert!(text.contains("└ cancelled after 4s "), "{text}");
    assert!(!text.contains("error: compiling"), "{text}");
    assert!(
        text.contains("└ exit 1 · FAILED (failures=1) (9 lines)"),
        "{text}"
    );
    assert!(
        text.contains("└ 6 lines · test result: ok. 3 passed; 0 failed"),
        "{text}"
    );
    assert!(text.contains("└ 3 lines · use std::io; "), "{text}");
    assert!(text.contains("└ red plain "), "{text}");
    assert!(!text.contains("\\e"), "no escape shows:\n{text}");
    let at = find(&collapsed, "red plain").expect("coloured");
    assert_eq!(collapsed[at].fg, Color::Red);
    assert_eq!(collapsed[(at.0 + 4, at.1)].fg, Color::Reset);
    assert_snapshot!(text);
    key(&mut app, KeyCode::Char('o'), KeyModifiers::CONTROL);
    let expanded = buffer(&mut app, 70, 22);
    let at = find(&expanded, "│ red plain").expect("expanded, coloured");
    assert_eq!(expanded[(at.0 + 2, at.1)].fg, Color::Red);
    assert!(find(&expanded, "\\e").is_none());
}

/// The sandbox shows red when nothing confines `bash`.
#[test]
fn an_unenforced_sandbox_is_red() {
    let mut frame = serde_json::to_value(snapshot(vec![], Value::Null, "idle")).unwrap();
    frame["greeting"]["sandbox"] =
        json!({"mode":"workspace-write","available":false,"network":true});
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(event(frame));
    let buffer = buffer(&mut app, 80, 4);
    let at = find(&buffer, "sandbox: workspace-write NOT enforced").expect("the warning");
    assert_eq!(buffer[at].fg, Color::Red);
}

/// The composer breaks lines between words, not inside them.
#[test]
fn composer_wraps_at_words() {
    let mut app = attached(vec![]);
    for c in "please refactor the tokenizer module carefully".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    let text = screen(&mut app, 24, 6);
    assert!(text.contains("› please refactor the "), "{text}");
    assert!(text.contains("  tokenizer module "), "{text}");
    assert!(text.contains("  carefully"), "{text}");
}

/// Attached in the middle of a turn: its running time comes from its
/// input's timestamp; its end records no duration (this client did not
/// see it start).
#[test]
fn a_turn_joined_mid_way_is_timed_from_its_input() {
    let at = humantime::format_rfc3339_millis(
        std::time::SystemTime::now() - std::time::Duration::from_secs(95),
    )
    .to_string();
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot_with_status(
        vec![json!({"kind":"user_input","at":at,"turn_id":"t7",
            "segments":[{"type":"text","text":"long job"}]})],
        Value::Null,
        json!({"state":"running","queued":0,"turn":{"turn_id":"t7","request_id":null}}),
    ));
    let text = screen(&mut app, 100, 4);
    assert!(text.contains("running 1m 3"), "{text}");
    app.on_pod_event(entry(
        2,
        json!({"kind":"turn_end","reason":"completed","usage":null,
        "turn_id":"t7","request_id":null}),
    ));
    assert!(!screen(&mut app, 100, 6).contains("done in"));
}

/// Attached while a text answer streams, after earlier turns: the running
/// time still comes from its input (docs/tui.md); the earlier turns' ends
/// in the snapshot do not stop its clock.
#[test]
fn a_streaming_turn_joined_mid_way_after_earlier_turns_is_timed() {
    let at = humantime::format_rfc3339_millis(
        std::time::SystemTime::now() - std::time::Duration::from_secs(7),
    )
    .to_string();
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot_with_status(
        vec![
            json!({"kind":"user_input","at":"2026-01-01T00:00:00Z","turn_id":"t7",
                "request_id":null,"segments":[{"type":"text","text":"hello"}]}),
            assistant_text("hi"),
            json!({"kind":"turn_end","reason":"completed","usage":null,
                "turn_id":"t7","request_id":null}),
            json!({"kind":"user_input","at":at,"turn_id":"t8","request_id":null,
                "segments":[{"type":"text","text":"explain"}]}),
        ],
        json!({"type":"text","text":"It works by"}),
        json!({"state":"running","queued":0,"turn":{"turn_id":"t8","request_id":null}}),
    ));
    app.on_pod_event(event(json!({"type":"text_delta","text":" folding"})));
    let text = screen(&mut app, 100, 10);
    assert!(text.contains("It works by folding"), "{text}");
    assert!(text.contains("running 7s"), "{text}");
}

/// The model's latest plan sits above the composer as a checklist, the
/// item in progress marked; Ctrl+T folds it to one line. Running jobs show
/// in the status bar.
#[test]
fn plan_above_the_composer_and_jobs_in_the_status_bar() {
    let old_plan = json!({"items":[{"text":"an old plan","status":"pending"}]});
    let plan = json!({"items":[
        {"text":"read the parser","status":"done"},
        {"text":"fix the off-by-one in \u{1b}[31mlex\u{1b}[0m","status":"in_progress"},
        {"text":"run the tests","status":"pending"}]});
    let mut app = attached_with_status(
        vec![
            user_input(json!([{"type":"text","text":"fix the lexer"}])),
            tool_call("p1", "update_plan", old_plan),
            tool_result("p1", "plan updated: 0 of 1 done; the user sees it.", false),
            tool_call("p2", "update_plan", plan),
            tool_result("p2", "plan updated: 1 of 3 done; the user sees it.", false),
        ],
        json!({"state":"idle","queued":0,"jobs":2}),
    );
    let text = screen(&mut app, 80, 16);
    assert!(text.contains("Plan 1/3 done"), "{text}");
    assert!(
        !text.contains("○ an old plan"),
        "only the latest plan: {text}"
    );
    assert!(
        text.contains("▸ fix the off-by-one in \\e[31mlex\\e[0m"),
        "{text}"
    );
    assert!(text.contains("2 jobs running"), "{text}");
    assert_snapshot!(text);
    key(&mut app, KeyCode::Char('t'), KeyModifiers::CONTROL);
    let folded = screen(&mut app, 80, 16);
    assert!(
        folded.contains("Plan 1/3 done · Ctrl+T shows it"),
        "{folded}"
    );
    assert!(!folded.contains("○ run the tests"), "{folded}");
}

/// A finished plan stays above the composer for the turn that finished it,
/// and goes with the next message (issue 36); an unfinished one stays.
#[test]
fn a_finished_plan_goes_with_the_next_message() {
    let plan = |status: &str| json!({"items":[{"text":"fix the lexer","status":status}]});
    let session = |status: &str, next: bool| {
        let mut entries = vec![
            user_input(json!([{"type":"text","text":"fix the lexer"}])),
            tool_call("p1", "update_plan", plan(status)),
            tool_result("p1", "plan updated; the user sees it.", false),
            json!({"kind":"turn_end","reason":"completed","usage":null}),
        ];
        if next {
            entries.push(user_input(json!([{"type":"text","text":"now the docs"}])));
        }
        attached(entries)
    };
    let text = screen(&mut session("done", false), 80, 16);
    assert!(text.contains("Plan 1/1 done"), "{text}");
    let text = screen(&mut session("done", true), 80, 16);
    assert!(!text.contains("Plan 1/1"), "{text}");
    let text = screen(&mut session("in_progress", true), 80, 16);
    assert!(text.contains("Plan 0/1 done"), "{text}");
}

/// #30 item 11: a failed model call is told once — by its `turn_end` — not
/// also by the `model_error` frame sent as it happened (which a client
/// attaching later never gets, so it showed twice only live).
#[test]
fn a_model_error_is_shown_once_live() {
    let mut app = attached_with(
        vec![json!({"kind":"user_input","at":"x","segments":[{"type":"text","text":"hi"}]})],
        Value::Null,
        "running",
    );
    let message = "openai: HTTP 404 Not Found: model nope not found";
    app.on_pod_event(event(json!({"type":"error","code":"model_error",
        "message":format!("openai model call failed: {message}")})));
    app.on_pod_event(entry(
        2,
        json!({"kind":"turn_end","reason":"error","turn_id":"t","request_id":null,
            "usage":null,"error":{"code":"provider_http","message":message}}),
    ));
    let text = screen(&mut app, 120, 12);
    assert_eq!(text.matches("model nope not found").count(), 1, "{text}");
}

/// QA, "the first hour" item 8: a denied edit's diff must not look like a
/// change that was made, and the transcript shows the edit's whole lines
/// (the approval's diff), not the bare `old_string` the model sent
/// (`return a - b`, a substring of `    return a - b`).
#[test]
fn a_denied_edit_is_not_shown_as_applied() {
    let edit = |id: &str, from: &str, to: &str| {
        tool_call(
            id,
            "edit_file",
            json!({"path":"calc.py","old_string":from,"new_string":to}),
        )
    };
    let preview = |from: &str, to: &str| {
        format!("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def f(a, b):\n-    {from}\n+    {to}\n")
    };
    let decision = |id: &str, decision: &str| {
        json!({"kind":"approval_decision","call_id":id,"decision":decision,
            "scope":"once","by":"user","client":"tui@host"})
    };
    let mut app = attached(vec![
        edit("e1", "return a - b", "return a + b"),
        approval_request(
            "e1",
            "edit_file",
            "edit calc.py (+1 −1)",
            &preview("return a - b", "return a + b"),
        ),
        decision("e1", "deny"),
        tool_result(
            "e1",
            "[denied by the user: this tool call was not run]",
            true,
        ),
        edit("e2", "return a * b", "return a / b"),
        approval_request(
            "e2",
            "edit_file",
            "edit calc.py (+1 −1)",
            &preview("return a * b", "return a / b"),
        ),
        decision("e2", "allow"),
        tool_result(
            "e2",
            "edited calc.py: replaced 1 occurrence at line 2",
            false,
        ),
    ]);
    let buffer = buffer(&mut app, 60, 24);
    let text = screen(&mut app, 60, 24);
    assert!(
        text.contains("│ -    return a - b"),
        "indentation kept:\n{text}"
    );
    assert!(text.contains("│ ✗ not applied"), "{text}");
    assert_eq!(text.matches("not applied").count(), 1, "{text}");
    let denied = find(&buffer, "+    return a + b").expect("the denied diff");
    assert_ne!(buffer[denied].fg, Color::Green, "not drawn as an addition");
    let applied = find(&buffer, "+    return a / b").expect("the applied diff");
    assert_eq!(buffer[applied].fg, Color::Green);
    assert_snapshot!(text);
}

/// QA, "the first hour" item 16: the `/` menu shows eight rows; a last row
/// says there are more (and where the selection is), and the workspace's
/// workflows are tagged and coloured apart from the built-in commands.
#[test]
fn the_slash_menu_says_it_scrolls_and_marks_workflows() {
    let mut app = attached(vec![]);
    key(&mut app, KeyCode::Char('/'), KeyModifiers::NONE);
    let request_id = app.composer().completion().unwrap().request_id.clone();
    app.on_pod_event(event(json!({"type":"response","request_id":request_id,
        "completions":["deploy","review"],
        "items":[{"value":"deploy","kind":"workflow","detail":"Deploy to staging"},
                 {"value":"review","kind":"workflow","detail":"Review the diff"}]})));
    let total = app.composer().completion().unwrap().items.len();
    assert!(total > 8, "more candidates than rows: {total}");
    let text = screen(&mut app, 80, 16);
    let more = format!("↓ {} more · 1/{total}", total - 8);
    assert!(text.contains(&more), "{more} missing:\n{text}");
    // Up from the first wraps to the last: a workflow.
    key(&mut app, KeyCode::Up, KeyModifiers::NONE);
    let text = screen(&mut app, 80, 16);
    let above = format!("↑ {} more · {total}/{total}", total - 8);
    assert!(text.contains(&above), "{above} missing:\n{text}");
    assert!(
        text.contains("/deploy       workflow · Deploy to staging"),
        "{text}"
    );
    assert!(
        text.contains("/review       workflow · Review the diff"),
        "{text}"
    );
    let buffer = buffer(&mut app, 80, 16);
    let at = find(&buffer, "/deploy").expect("the unselected workflow");
    assert_eq!(buffer[at].fg, Color::Cyan);
    let at = find(&buffer, "/quit").expect("a built-in");
    assert_ne!(buffer[at].fg, Color::Cyan, "a built-in is not");
    assert_snapshot!(text);
}

fn with_children() -> App {
    attached_with_status(
        vec![
            json!({"kind":"agent_started","name":"default.tests","session_id":NEW_SESSION,
                "call_id":"s1","task":"run the test suite\nand report what fails","at":"2026-01-01T00:00:01Z"}),
            json!({"kind":"agent_turn_end","name":"default.docs","session_id":NEW_SESSION,
                "reason":"completed","usage":{"input_tokens":1200,"output_tokens":300},
                "text":"Updated the README.\n\n1\n2\n3\n4\n5\n6\n7","at":"2026-01-01T00:00:02Z"}),
        ],
        json!({"state":"running","queued":0,"agents":[
            {"name":"default.tests","state":"waiting","pending_approvals":["c1"],
             "session_id":NEW_SESSION,"usage":{"input_tokens":1200,"output_tokens":300}},
            {"name":"default.docs","state":"idle","pending_approvals":[],
             "session_id":NEW_SESSION,"usage":{"input_tokens":800,"output_tokens":90}}],
            "tree_usage":{"input_tokens":2500,"output_tokens":500}}),
    )
}

/// A parent's view: each child's start and turn end as a block naming it,
/// and the band above the composer with every child's state, waiting
/// approvals and usage, and the tree's usage.
#[test]
fn child_pods_in_the_parents_view() {
    let mut app = with_children();
    let buffer = buffer(&mut app, 70, 24);
    let at = find(&buffer, "⎇ default.tests waiting for 1 approval").expect("the band");
    assert_eq!(buffer[at].fg, Color::Yellow);
    assert_snapshot!(screen(&mut app, 70, 24));
}

/// `/agents` lists the children to open one.
#[test]
fn the_agents_picker() {
    let mut app = with_children();
    for c in "/agents".chars() {
        key(&mut app, KeyCode::Char(c), KeyModifiers::NONE);
    }
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    key(&mut app, KeyCode::Down, KeyModifiers::NONE);
    let buffer = buffer(&mut app, 70, 14);
    let chosen = find(&buffer, "⎇ default.docs · idle").expect("the second child");
    let other = find(&buffer, "⎇ default.tests · waiting").expect("the first child");
    assert_ne!(
        buffer[chosen].bg, buffer[other].bg,
        "the selection stands out"
    );
    assert_snapshot!(screen(&mut app, 70, 14));
    app.take_outgoing();
    key(&mut app, KeyCode::Enter, KeyModifiers::NONE);
    let opened: Vec<String> = app
        .take_outgoing()
        .into_iter()
        .filter_map(|o| match o {
            pod::tui::connection::Outgoing::Open(name) => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(opened, ["default.docs"]);
}
