//! The view model: from snapshot and frames to blocks, with no terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::time::Instant;

use pod::protocol::{Event, InFlight};
use pod::tui::conversation::{Applied, BlockKind, Conversation};
use serde_json::{json, Value};
use uuid::Uuid;

fn event(v: Value) -> Event {
    serde_json::from_value(v).unwrap()
}

fn snapshot(id: Uuid, entries: Value, in_flight: Value) -> Event {
    event(json!({"type":"snapshot","protocol_version":1,
        "greeting":{"pod":"p","version":"0","session_id":id,"provider":"offline",
                    "model":"offline","workspace":"/w","pid":1},
        "status":{"state":"running","queued":0},"session_id":id,
        "entries":entries,"in_flight":in_flight}))
}

fn start(id: Uuid) -> Value {
    json!({"seq":0,"entry":{"kind":"session_start","session_id":id,
        "created_at":"2026-01-01T00:00:00Z","compacted_from":null,"forked_from":null}})
}

fn texts(c: &Conversation) -> Vec<String> {
    c.blocks()
        .iter()
        .filter_map(|b| match &b.kind {
            BlockKind::Assistant { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn in_flight_then_deltas_then_entry_shows_the_text_once() {
    let id = Uuid::new_v4();
    let mut c = Conversation::new();
    c.apply(
        &snapshot(
            id,
            json!([start(id), {"seq":1,"entry":{"kind":"user_input","at":"x",
            "segments":[{"type":"text","text":"hi"}]}}]),
            json!({"type":"text","text":"Hel"}),
        ),
        Instant::now(),
    );
    assert_eq!(c.in_flight(), Some(&InFlight::Text { text: "Hel".into() }));
    c.apply(
        &event(json!({"type":"text_delta","text":"lo"})),
        Instant::now(),
    );
    assert_eq!(
        c.in_flight(),
        Some(&InFlight::Text {
            text: "Hello".into()
        })
    );
    let applied = c.apply(
        &event(json!({"type":"entry","session_id":id,"seq":2,
        "entry":{"kind":"assistant_items","items":[{"type":"text","text":"Hello"}]}})),
        Instant::now(),
    );
    assert_eq!(applied, Applied::Changed);
    assert_eq!(c.in_flight(), None);
    assert_eq!(texts(&c), ["Hello"]);
    let dup = c.apply(
        &event(json!({"type":"entry","session_id":id,"seq":2,
        "entry":{"kind":"assistant_items","items":[{"type":"text","text":"Hello"}]}})),
        Instant::now(),
    );
    assert_eq!(dup, Applied::Unchanged);
    assert_eq!(texts(&c), ["Hello"]);
}

#[test]
fn a_gap_asks_for_a_resync() {
    let id = Uuid::new_v4();
    let mut c = Conversation::new();
    c.apply(
        &snapshot(id, json!([start(id)]), Value::Null),
        Instant::now(),
    );
    let r = c.apply(
        &event(json!({"type":"entry","session_id":id,"seq":3,
        "entry":{"kind":"turn_end","reason":"completed","usage":null}})),
        Instant::now(),
    );
    assert!(matches!(r, Applied::Resync(_)));
}

#[test]
fn compaction_keeps_old_blocks_and_follows_the_new_session() {
    let id = Uuid::new_v4();
    let new = Uuid::new_v4();
    let mut c = Conversation::new();
    c.apply(
        &snapshot(id, json!([start(id)]), Value::Null),
        Instant::now(),
    );
    c.apply(
        &event(json!({"type":"compact_start","reason":"manual"})),
        Instant::now(),
    );
    c.apply(
        &event(json!({"type":"compact_done","new_session_id":new})),
        Instant::now(),
    );
    let r = c.apply(
        &event(json!({"type":"entry","session_id":new,"seq":0,
        "entry":{"kind":"session_start","session_id":new,"created_at":"x",
                 "compacted_from":id,"forked_from":null}})),
        Instant::now(),
    );
    assert_eq!(r, Applied::Changed);
    assert_eq!(c.session_id(), Some(new));
    assert_eq!(c.blocks().len(), 4);
}

#[test]
fn tool_results_attach_to_their_call_and_toggle() {
    let id = Uuid::new_v4();
    let mut c = Conversation::new();
    c.apply(
        &snapshot(
            id,
            json!([start(id),
            {"seq":1,"entry":{"kind":"assistant_items","items":[
                {"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"ls"}}]}},
            {"seq":2,"entry":{"kind":"tool_results","results":[
                {"call_id":"c1","output":"a\nb","is_error":false}]}}]),
            Value::Null,
        ),
        Instant::now(),
    );
    assert_eq!(c.blocks().len(), 2);
    let BlockKind::Tool(t) = &c.blocks()[1].kind else {
        panic!()
    };
    assert_eq!(t.result.as_ref().unwrap().output, "a\nb");
    c.toggle_block();
    assert!(matches!(&c.blocks()[1].kind, BlockKind::Tool(t) if t.expanded));
    assert_eq!(c.select_block(true), Some(1));
}
