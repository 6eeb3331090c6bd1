//! Issue 12, item 16: segments are kept exactly as received — in the log,
//! in every frame, in `get_session` and after a restart — byte for byte:
//! numbers no `f64` holds, exponents, key order, duplicate keys, escapes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use harness::Pod;

/// Segments as a client might send them; none survives a parse into
/// `serde_json::Value` and back unchanged.
const SEGMENTS: &str = concat!(
    r#"{"type":"x","n":123456789012345678901234567890,"b":1e2,"a":1},"#,
    r#"{"type":"x","d":1,"d":2,"\u00e9":"caf\u00e9"},"#,
    r#"{"type":"text","text":"hi","z":{"k":1.50,"k":-0}}"#
);

/// A client that keeps frames as the text received, which is what this
/// test is about.
struct RawClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl RawClient {
    fn connect(socket: &Path) -> Self {
        let stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Self {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    fn send(&mut self, frame: &str) {
        self.writer.write_all(frame.as_bytes()).unwrap();
        self.writer.write_all(b"\n").unwrap();
    }

    /// The next frame's text whose parsed form matches `pred`.
    fn until(&mut self, what: &str, pred: impl Fn(&serde_json::Value) -> bool) -> String {
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).unwrap();
            assert!(n > 0, "connection closed while waiting for {what}");
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            if pred(&value) {
                return line;
            }
        }
    }
}

fn contains_segments(text: &str) -> bool {
    text.contains(&format!("\"segments\":[{SEGMENTS}]"))
}

#[test]
fn segments_come_back_byte_for_byte_everywhere() {
    let pod = Pod::start();
    let mut c = RawClient::connect(&pod.socket);
    let snapshot = c.until("snapshot", |v| v["type"] == "snapshot");
    let snapshot: serde_json::Value = serde_json::from_str(&snapshot).unwrap();
    let session_id = snapshot["session_id"].as_str().unwrap().to_owned();

    c.send(&format!(
        r#"{{"type":"run","request_id":"r","segments":[{SEGMENTS}]}}"#
    ));
    let entry = c.until("the user_input entry", |v| {
        v["type"] == "entry" && v["entry"]["kind"] == "user_input"
    });
    assert!(contains_segments(&entry), "entry frame: {entry}");

    let log =
        std::fs::read_to_string(pod.data_dir.join(format!("sessions/{session_id}.jsonl"))).unwrap();
    let line = log.lines().find(|l| l.contains("user_input")).unwrap();
    assert!(contains_segments(line), "log line: {line}");

    c.send(&format!(
        r#"{{"type":"get_session","request_id":"g","session_id":"{session_id}"}}"#
    ));
    let response = c.until("get_session's response", |v| {
        v["type"] == "response" && v["request_id"] == "g"
    });
    assert!(contains_segments(&response), "get_session: {response}");

    // A restarted pod reads the log and serves the same bytes.
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).start();
    let mut c = RawClient::connect(&pod.socket);
    let snapshot = c.until("snapshot", |v| v["type"] == "snapshot");
    assert!(
        contains_segments(&snapshot),
        "snapshot after restart: {snapshot}"
    );
}

#[test]
fn a_known_segment_with_a_field_given_twice_is_refused() {
    let pod = Pod::start();
    let mut c = RawClient::connect(&pod.socket);
    c.until("snapshot", |v| v["type"] == "snapshot");
    c.send(
        r#"{"type":"run","request_id":"dup","segments":[{"type":"file_ref","path":"a","path":"b"}]}"#,
    );
    let err = c.until("error", |v| v["type"] == "error");
    let err: serde_json::Value = serde_json::from_str(&err).unwrap();
    assert_eq!(err["code"], "invalid_params", "{err}");
    assert_eq!(err["request_id"], "dup");
    assert_eq!(pod.log_lines().len(), 1, "nothing was committed");
}
