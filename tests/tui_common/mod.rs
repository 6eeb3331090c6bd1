//! Shared helpers for the TUI tests: building an attached `App` from JSON
//! frames, and drawing it into a `TestBackend`.

// Each test crate compiles this module on its own and uses only some of it.
#![allow(dead_code)]

use std::time::Instant;

use pod::protocol::Event;
use pod::tui::connection::ConnEvent;
use pod::tui::App;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;
use serde_json::{json, Value};

pub const SESSION: &str = "0b5e551d-0000-4000-8000-000000000001";
pub const NEW_SESSION: &str = "c0ffee00-0000-4000-8000-000000000002";

pub fn event(v: Value) -> Event {
    serde_json::from_value(v).unwrap()
}

pub fn start() -> Value {
    json!({"seq":0,"entry":{"kind":"session_start","session_id":SESSION,
        "created_at":"2026-01-01T00:00:00Z","compacted_from":null,"forked_from":null}})
}

/// A snapshot frame holding `entries` after a `session_start`, numbered from 1.
pub fn snapshot(entries: Vec<Value>, in_flight: Value, state: &str) -> Event {
    snapshot_with_status(entries, in_flight, json!({"state":state,"queued":0}))
}

/// A snapshot frame whose `status` is `status`.
pub fn snapshot_with_status(entries: Vec<Value>, in_flight: Value, status: Value) -> Event {
    let mut lines = vec![start()];
    for (i, entry) in entries.into_iter().enumerate() {
        lines.push(json!({"seq": i + 1, "entry": entry}));
    }
    event(json!({"type":"snapshot","protocol_version":1,
        "greeting":{"pod":"default","version":"0.1.0","session_id":SESSION,
                    "provider":"offline","model":"offline","workspace":"/w","pid":1,
                    "approval":"ask",
                    "sandbox":{"mode":"workspace-write","available":true,"network":true},
                    "mcp_servers":[{"name":"git","state":"ready","tools":12},
                                   {"name":"web","state":"failed","tools":0,"error":"exited with status 1"}]},
        "status":status,"session_id":SESSION,
        "entries":lines,"in_flight":in_flight}))
}

/// An app attached to a pod whose snapshot has this `status`.
pub fn attached_with_status(entries: Vec<Value>, status: Value) -> App {
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot_with_status(entries, Value::Null, status));
    app.take_outgoing();
    app
}

/// An app connected to a pod whose snapshot holds `entries`.
pub fn attached(entries: Vec<Value>) -> App {
    attached_with(entries, Value::Null, "idle")
}

/// The workflow listing every snapshot asks for is dropped, so that tests
/// see only what they cause.
pub fn attached_with(entries: Vec<Value>, in_flight: Value, state: &str) -> App {
    let mut app = App::new("default", Instant::now());
    app.on_connection(ConnEvent::Connected);
    app.on_pod_event(snapshot(entries, in_flight, state));
    app.take_outgoing();
    app
}

/// The next entry frame of the snapshot's session.
pub fn entry(seq: u64, entry: Value) -> Event {
    event(json!({"type":"entry","session_id":SESSION,"seq":seq,"entry":entry}))
}

pub fn draw(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| pod::tui::render::draw(f, app)).unwrap();
    terminal
}

/// The screen as text, one quoted line per row.
pub fn screen(app: &mut App, width: u16, height: u16) -> String {
    draw(app, width, height).backend().to_string()
}

pub fn buffer(app: &mut App, width: u16, height: u16) -> Buffer {
    draw(app, width, height).backend().buffer().clone()
}

/// The position of the first cell where `needle` starts.
pub fn find(buffer: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let area = buffer.area;
    for y in 0..area.height {
        let row: String = (0..area.width)
            .map(|x| buffer[(x, y)].symbol().to_owned())
            .collect();
        if let Some(byte) = row.find(needle) {
            let x = row[..byte].chars().count();
            return Some((u16::try_from(x).unwrap(), y));
        }
    }
    None
}

pub fn user_input(segments: Value) -> Value {
    json!({"kind":"user_input","at":"2026-01-01T00:00:00Z","segments":segments})
}

pub fn assistant_text(text: &str) -> Value {
    json!({"kind":"assistant_items","items":[{"type":"text","text":text}]})
}

pub fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"kind":"assistant_items","items":[
        {"type":"tool_call","call_id":id,"name":name,"arguments":arguments}]})
}

pub fn tool_result(id: &str, output: &str, is_error: bool) -> Value {
    json!({"kind":"tool_results","results":[
        {"call_id":id,"output":output,"is_error":is_error}]})
}

pub fn approval_request(id: &str, tool: &str, summary: &str, preview: &str) -> Value {
    json!({"kind":"approval_request","call_id":id,"tool":tool,"summary":summary,
        "preview":preview,"reason":"mode:ask"})
}
