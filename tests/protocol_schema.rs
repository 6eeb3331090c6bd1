//! `docs/protocol.schema.json` is what the protocol types generate, and it
//! tells good frames from bad ones.
//!
//! Regenerate the file after changing a protocol type:
//! `POD_UPDATE_SCHEMA=1 cargo test --test protocol_schema`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use serde_json::{json, Value};

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.schema.json");

fn generated() -> String {
    let mut text = serde_json::to_string_pretty(&pod::protocol::schema_document())
        .expect("a schema is plain JSON");
    text.push('\n');
    text
}

#[test]
fn committed_schema_is_what_the_types_generate() {
    let generated = generated();
    if std::env::var_os("POD_UPDATE_SCHEMA").is_some() {
        std::fs::write(SCHEMA_PATH, &generated).expect("write docs/protocol.schema.json");
        return;
    }
    let committed = std::fs::read_to_string(SCHEMA_PATH).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/protocol.schema.json is not what the protocol types generate; regenerate it \
         with `POD_UPDATE_SCHEMA=1 cargo test --test protocol_schema` and commit it"
    );
}

#[test]
fn the_schema_is_itself_valid_json_schema() {
    let schema: Value = serde_json::from_str(&generated()).unwrap();
    jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("invalid schema: {e}"));
}

fn server_error(frame: Value) -> Option<String> {
    harness::schema::server_frame_error(&frame)
}

fn client_error(frame: Value) -> Option<String> {
    harness::schema::client_frame_error(&frame)
}

#[test]
fn well_formed_frames_validate() {
    let id = "6f1c2a3b-0000-4000-8000-000000000001";
    for frame in [
        json!({"type":"status","state":"waiting","queued":0,"pending_approvals":["c1"],
               "approval":"ask","model":"m","context_tokens":10,"context_window":100,
               "turn":{"turn_id":"t1","request_id":null}}),
        json!({"type":"entry","session_id":id,"seq":3,"entry":{"kind":"turn_end",
               "reason":"completed","turn_id":"t1","request_id":"r1","usage":null}}),
        // A log line written before turn ids existed travels byte for byte.
        json!({"type":"entry","session_id":id,"seq":3,"entry":{"kind":"turn_end",
               "reason":"completed","usage":null}}),
        json!({"type":"entry","session_id":id,"seq":0,"entry":{"kind":"session_start",
               "session_id":id,"created_at":"2026-11-30T00:00:00.000Z","forked_from":id}}),
        json!({"type":"entry","session_id":id,"seq":1,"entry":{"kind":"user_input",
               "at":"2026-11-30T00:00:00.000Z",
               "segments":[{"type":"paste","id":1,"text":"x"},{"type":"hologram","v":[1]}]}}),
        json!({"type":"response","request_id":"r","queued":0}),
        json!({"type":"error","code":"busy","message":"m"}),
    ] {
        assert_eq!(server_error(frame.clone()), None, "{frame}");
    }
    for frame in [
        json!({"type":"run","segments":[{"type":"text","text":"hi"}],"request_id":"r1"}),
        json!({"type":"approve","call_id":"c1","decision":"allow","scope":"session"}),
        json!({"type":"pause"}),
        json!({"type":"fork","at_seq":4,"future_field":true}),
    ] {
        assert_eq!(client_error(frame.clone()), None, "{frame}");
    }
}

#[test]
fn malformed_frames_fail_validation_with_a_message_naming_the_field() {
    let id = "6f1c2a3b-0000-4000-8000-000000000001";
    for (frame, names) in [
        (json!({"type":"status","state":3,"queued":0}), "/state"),
        (
            json!({"type":"status","state":"dozing","queued":0}),
            "/state",
        ),
        (
            json!({"type":"entry","session_id":id,"entry":{"kind":"turn_end","reason":"completed","usage":null}}),
            "\"seq\" is a required property",
        ),
        (
            json!({"type":"entry","session_id":id,"seq":1,"entry":{"kind":"user_input","at":"t",
                   "segments":[{"type":"paste","text":"no id"}]}}),
            "/entry",
        ),
        (
            json!({"type":"text_delta"}),
            "\"text\" is a required property",
        ),
        (json!({"type":"teleport"}), "unknown or missing frame type"),
        (json!({"state":"idle"}), "unknown or missing frame type"),
    ] {
        let error = server_error(frame.clone());
        assert!(
            error.as_deref().is_some_and(|e| e.contains(names)),
            "{frame}: expected an error naming {names:?}, got {error:?}"
        );
    }
    for (frame, names) in [
        (json!({"type":"run"}), "\"segments\" is a required property"),
        (
            json!({"type":"run","segments":[{"text":"no type"}]}),
            "/segments/0",
        ),
        (
            json!({"type":"run","segments":[{"type":"text","text":"x"}],"request_id":7}),
            "/request_id",
        ),
        (json!({"type":"run","segments":[]}), "/segments"),
        (
            json!({"type":"approve","call_id":"c","decision":"maybe"}),
            "/decision",
        ),
    ] {
        let error = client_error(frame.clone());
        assert!(
            error.as_deref().is_some_and(|e| e.contains(names)),
            "{frame}: expected an error naming {names:?}, got {error:?}"
        );
    }
}
