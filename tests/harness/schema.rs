//! Every frame a harness client receives or sends is checked against the
//! published `docs/protocol.schema.json`, so the schema a client author
//! reads is proven on every frame of the whole test suite.
//!
//! The validators are compiled once per test binary. Each binary keeps a
//! count of the frames it validated in `target/tmp/schema-validated/<test
//! binary>`: `cat target/tmp/schema-validated/* | paste -sd+ | bc` is the
//! suite's total.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use jsonschema::Validator;
use serde_json::{json, Value};

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.schema.json");

/// One direction: the validator of the published definition, and one per
/// frame `type` for a precise message when a frame fails.
struct Direction {
    whole: Validator,
    by_type: HashMap<String, Validator>,
}

struct Validators {
    server: Direction,
    client: Direction,
}

static VALIDATORS: OnceLock<Validators> = OnceLock::new();
static VALIDATED: AtomicU64 = AtomicU64::new(0);
static COUNT_FILE: Mutex<()> = Mutex::new(());

fn validators() -> &'static Validators {
    VALIDATORS.get_or_init(|| {
        let text = std::fs::read_to_string(SCHEMA_PATH)
            .unwrap_or_else(|e| panic!("cannot read {SCHEMA_PATH}: {e}"));
        let doc: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{SCHEMA_PATH} is not JSON: {e}"));
        Validators {
            server: direction(&doc, "ServerFrame", "Event"),
            client: direction(&doc, "ClientFrame", "Method"),
        }
    })
}

/// The validator of `#/$defs/{frame}`, and one per branch of the tagged
/// enum `#/$defs/{tagged}` (with the frame's own extra properties, such
/// as a client frame's `request_id`).
fn direction(doc: &Value, frame: &str, tagged: &str) -> Direction {
    let defs = &doc["$defs"];
    let compile = |root: Value| {
        let mut schema = root;
        schema["$defs"] = defs.clone();
        jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("docs/protocol.schema.json does not compile: {e}"))
    };
    let whole = compile(json!({ "$ref": format!("#/$defs/{frame}") }));
    let extra = defs[frame]["properties"].clone();
    let branches = defs[tagged]["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("#/$defs/{tagged} has no oneOf"));
    let by_type = branches
        .iter()
        .map(|branch| {
            let ty = branch["properties"]["type"]["const"]
                .as_str()
                .unwrap_or_else(|| panic!("a branch of {tagged} has no type const: {branch}"))
                .to_owned();
            let properties = if extra.is_object() {
                json!({ "properties": extra })
            } else {
                json!({})
            };
            (ty, compile(json!({ "allOf": [branch, properties] })))
        })
        .collect();
    Direction { whole, by_type }
}

impl Direction {
    fn error(&self, frame: &Value) -> Option<String> {
        if self.whole.is_valid(frame) {
            return None;
        }
        let ty = frame.get("type").and_then(Value::as_str);
        let Some(branch) = ty.and_then(|t| self.by_type.get(t)) else {
            return Some(format!("unknown or missing frame type {ty:?}"));
        };
        let errors: Vec<String> = branch
            .iter_errors(frame)
            .map(|e| format!("{} (at {})", e, e.instance_path()))
            .collect();
        Some(if errors.is_empty() {
            "fails the schema".into()
        } else {
            errors.join("; ")
        })
    }

    fn knows(&self, ty: &str) -> bool {
        self.by_type.contains_key(ty)
    }
}

/// Why a frame the pod sent fails the schema, or `None` when it passes.
pub fn server_frame_error(frame: &Value) -> Option<String> {
    validators().server.error(frame)
}

/// Why a frame a client sends fails the schema, or `None` when it passes.
pub fn client_frame_error(frame: &Value) -> Option<String> {
    validators().client.error(frame)
}

/// Panics, naming the frame and the schema error, when a received frame
/// fails the schema.
pub fn check_received(frame: &Value) {
    if let Some(error) = server_frame_error(frame) {
        panic!(
            "the pod sent a frame that fails docs/protocol.schema.json: {error}\nframe: {frame}"
        );
    }
    VALIDATED.fetch_add(1, Ordering::Relaxed);
}

/// Checks a frame a test sends, when it is a JSON object whose `type` is a
/// method: frames that are not are the bad-frame tests' deliberate garbage.
pub fn check_sent(bytes: &[u8]) {
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(frame @ Value::Object(_)) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let known = frame["type"]
            .as_str()
            .is_some_and(|t| validators().client.knows(t));
        if !known {
            continue;
        }
        if let Some(error) = client_frame_error(&frame) {
            panic!(
                "a test sent a frame that fails docs/protocol.schema.json: {error}\nframe: \
                 {frame}\n(send it with Client::send_unchecked if it is malformed on purpose)"
            );
        }
        VALIDATED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes this test binary's running count of validated frames (called
/// when a client is dropped: every validated frame belongs to a client, so
/// the last drop writes the binary's total).
pub fn record_count() {
    let Ok(_guard) = COUNT_FILE.lock() else {
        return;
    };
    let count = VALIDATED.load(Ordering::Relaxed);
    if count == 0 {
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("schema-validated");
    let name = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, _hash)) => name.to_owned(),
            None => stem,
        })
        .unwrap_or_else(|| "unknown".into());
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(name), format!("{count}\n"));
}
