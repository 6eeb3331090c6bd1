//! The JSON Schema of the wire protocol, generated from the types of this
//! module so it cannot drift from what the pod sends and accepts.
//!
//! `docs/protocol.schema.json` is [`document`]'s output; a test fails when
//! the committed file differs, and the test harness validates every frame
//! its pods send and receive against it.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Value};

use super::{Event, Method, Segment, PROTOCOL_VERSION};

/// The whole protocol as one JSON Schema (draft 2020-12) document.
///
/// The root accepts a frame of either direction; `#/$defs/ServerFrame` and
/// `#/$defs/ClientFrame` are the two directions on their own, and
/// `#/$defs/LogLine` is one line of a session log file, `#/$defs/ExecResult`
/// the last line of `pod exec --json`. The schema follows
/// what the pod *accepts* when it reads (serde's deserialisation rules):
/// a field the pod fills in when it is missing is optional, because log
/// lines written by older versions travel to clients byte for byte.
pub fn document() -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let server = generator.subschema_for::<Event>();
    let client = generator.subschema_for::<Method>();
    generator.subschema_for::<super::LogLine>();
    // Not a frame: the last line of `pod exec --json`.
    generator.subschema_for::<super::ExecResult>();
    let mut defs = generator.take_definitions(true);
    defs.insert(
        "ServerFrame".into(),
        json!({
            "description": "A frame the pod sends: one JSON object per line.",
            "allOf": [server],
        }),
    );
    defs.insert(
        "ClientFrame".into(),
        json!({
            "description": "A frame a client sends: a method, plus the `request_id` every \
                method may carry (echoed by the `response` or `error` it causes).",
            "allOf": [client],
            "properties": { "request_id": { "type": "string" } },
        }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("pod wire protocol, version {PROTOCOL_VERSION}"),
        "description": "Every frame of both directions. This describes what this version \
            sends and accepts; newer pods speaking the same protocol version may add \
            frame types, fields, entry kinds and enumerated values, which clients ignore \
            or treat generically (docs/protocol.md, Versions).",
        "anyOf": [
            { "$ref": "#/$defs/ServerFrame" },
            { "$ref": "#/$defs/ClientFrame" },
        ],
        "$defs": defs,
    })
}

/// A segment is kept as the JSON object the client sent, so its schema is
/// written out: an object with a string `type`, the fields each known type
/// needs, and any other fields allowed (they are kept verbatim).
impl JsonSchema for Segment {
    fn schema_name() -> Cow<'static, str> {
        "Segment".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let known = |kind: &str, required: &[&str], properties: Value| {
            json!({
                "if": { "properties": { "type": { "const": kind } } },
                "then": { "required": required, "properties": properties },
            })
        };
        let string = json!({ "type": "string" });
        json_schema!({
            "description": "One piece of user input, kept exactly as sent. Known types need \
                their fields; a segment of an unknown type is kept verbatim and shown to the \
                model as a placeholder.",
            "type": "object",
            "required": ["type"],
            "properties": { "type": { "type": "string" } },
            "allOf": [
                known("text", &["text"], json!({ "text": string })),
                known("paste", &["id", "text"], json!({
                    "id": { "type": "integer", "minimum": 0 },
                    "text": string,
                })),
                known("file_ref", &["path"], json!({ "path": string })),
                known("knowledge_ref", &["slug"], json!({ "slug": string })),
                known("workflow_invoke", &["slug"], json!({ "slug": string, "args": string })),
                known("image", &["blob", "media_type"], json!({
                    "blob": string,
                    "media_type": string,
                    "name": string,
                })),
            ],
        })
    }
}

/// `session_start.forked_from`: a fork point, or null — or, in logs written
/// before forks had a `seq`, the bare id of the session forked from.
pub(super) fn legacy_fork_point(generator: &mut SchemaGenerator) -> Schema {
    let point = generator.subschema_for::<super::ForkPoint>();
    json_schema!({
        "anyOf": [
            point,
            { "type": "string", "format": "uuid", "description": "legacy: a bare session id" },
            { "type": "null" },
        ],
    })
}
