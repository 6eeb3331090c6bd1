//! `docs/protocol-transcript.md` is what a real pod sends: this test plays
//! the transcript's story against `pod serve` (the `script` provider, real
//! sockets), normalises what changes from run to run (ids, times, pids,
//! paths, token estimates, long texts) and compares the frames with the
//! doc's frame blocks. Every frame also passes the schema.
//!
//! Regenerate the frame blocks (the prose around them is hand-written):
//! `POD_UPDATE_TRANSCRIPT=1 cargo test --test protocol_transcript`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use harness::{schema, Pod};
use regex::Regex;
use serde_json::Value;

const DOC_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol-transcript.md");
const OPEN: &str = "<!-- frames: ";
const CLOSE: &str = "<!-- /frames -->";

/// The lag limit the transcript's pod runs with: small, so that a client
/// that stops reading falls behind within one reply.
const LAG_LIMIT: &str = "65536";
/// Text chunks of the reply that makes a client fall behind.
const LAG_CHUNKS: usize = 48;
const LAG_CHUNK_BYTES: usize = 8192;

/// The transcript so far: named sections of frame lines, as sent.
#[derive(Default)]
struct Transcript {
    sections: Vec<(String, Vec<String>)>,
}

impl Transcript {
    fn section(&mut self, name: &str) {
        self.sections.push((name.to_owned(), Vec::new()));
    }

    /// Records a line. Consecutive `text_delta`s to one peer are recorded
    /// as one, merged as the pod itself merges deltas it sends together:
    /// how a text is split into frames depends on timing, what it adds up
    /// to does not.
    fn line(&mut self, line: String) {
        let lines = &mut self.sections.last_mut().expect("a section is open").1;
        if let (Some(last), Some((peer, text))) = (lines.last_mut(), text_delta(&line)) {
            if let Some((last_peer, last_text)) = text_delta(last) {
                if peer == last_peer {
                    let merged =
                        serde_json::json!({"type": "text_delta", "text": last_text + &text});
                    *last = format!("{peer}← {merged}");
                    return;
                }
            }
        }
        lines.push(line);
    }
}

/// The peer and text of a recorded `text_delta` line.
fn text_delta(line: &str) -> Option<(String, String)> {
    let (peer, frame) = line.split_once("← ")?;
    let frame: Value = serde_json::from_str(frame).ok()?;
    if frame["type"] != "text_delta" {
        return None;
    }
    Some((peer.to_owned(), frame["text"].as_str()?.to_owned()))
}

/// A client on a real socket that keeps every frame's text as it came.
struct Peer {
    label: &'static str,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Peer {
    fn connect(label: &'static str, socket: &Path) -> Peer {
        let stream = UnixStream::connect(socket).expect("connect to the pod");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        Peer {
            label,
            reader: BufReader::new(stream.try_clone().expect("clone the socket")),
            writer: stream,
        }
    }

    fn send(&mut self, t: &mut Transcript, frame: &str) {
        schema::check_sent(frame.as_bytes());
        self.send_unchecked(t, frame);
    }

    /// Sends a frame that is malformed on purpose.
    fn send_unchecked(&mut self, t: &mut Transcript, frame: &str) {
        t.line(format!("{}→ {frame}", self.label));
        self.writer
            .write_all(format!("{frame}\n").as_bytes())
            .expect("send a frame");
    }

    /// The next frame, validated; recorded unless `t` is `None`.
    fn recv(&mut self, t: Option<&mut Transcript>) -> Value {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => panic!("{}: the pod closed the connection", self.label),
            Ok(_) => {}
            Err(e) => panic!("{}: read failed: {e}", self.label),
        }
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: the pod sent a bad frame ({e}): {line}", self.label));
        schema::check_received(&frame);
        if let Some(t) = t {
            t.line(format!("{}← {}", self.label, line.trim_end()));
        }
        frame
    }

    /// Records frames up to and including the first that matches.
    fn until(&mut self, t: &mut Transcript, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.recv(Some(t));
            if pred(&frame) {
                return frame;
            }
        }
    }

    /// Reads (validating, not recording) up to the first frame that matches.
    fn skip_until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.recv(None);
            if pred(&frame) {
                return frame;
            }
        }
    }

    /// Reads until the end of the stream; returns the complete lines and
    /// whatever followed the last newline.
    fn read_to_end(&mut self) -> (Vec<String>, String) {
        let mut rest = Vec::new();
        let _ = self.reader.read_to_end(&mut rest);
        let text = String::from_utf8_lossy(&rest).into_owned();
        let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
        let torn = match lines.last() {
            Some(last) if !last.ends_with('\n') => lines.pop().unwrap_or_default(),
            _ => String::new(),
        };
        (lines, torn)
    }
}

fn is(ty: &'static str) -> impl Fn(&Value) -> bool {
    move |f| f["type"] == ty
}

fn is_entry(kind: &'static str) -> impl Fn(&Value) -> bool {
    move |f| f["type"] == "entry" && f["entry"]["kind"] == kind
}

fn is_state(state: &'static str) -> impl Fn(&Value) -> bool {
    move |f| f["type"] == "status" && f["state"] == state
}

fn script() -> String {
    let lines = [
        // The first turn: a reply with a tool call, then the answer.
        serde_json::json!({"events":[
            {"text":"I'll run "},{"text":"the tests."},
            {"tool_call":{"id":"call_1","name":"bash","arguments":{"command":"printf 'ok\\n'"}}},
            {"usage":{"input_tokens":412,"output_tokens":23}}]}),
        serde_json::json!({"events":[{"text":"They pass."},
            {"usage":{"input_tokens":460,"output_tokens":4}}]}),
        // The compaction's summary.
        serde_json::json!({"events":[{"text":"The user had the tests run; they pass."}]}),
        // A long reply a second client attaches to.
        serde_json::json!({"events":[{"text":"Working on it"},{"delay_ms":60000},{"text":"."}]}),
    ];
    // Paced, so that client A, which reads, keeps up whatever the pod's
    // batching, while client C, which does not, falls behind.
    let lag = serde_json::json!({"events": (0..LAG_CHUNKS)
        .flat_map(|i| [
            serde_json::json!({"text": format!("{i:0>8}").repeat(LAG_CHUNK_BYTES / 8)}),
            serde_json::json!({"delay_ms": 2}),
        ])
        .collect::<Vec<_>>()});
    let mut script: Vec<String> = lines.iter().map(Value::to_string).collect();
    // One reply per attempt at showing a lagged client.
    script.extend(std::iter::repeat_n(lag.to_string(), 3));
    script.join("\n") + "\n"
}

/// Plays the story; returns the transcript's sections.
fn play() -> Vec<(String, Vec<String>)> {
    let pod = Pod::builder()
        .script(&script())
        .args([
            // A fixed name: the derived one hashes the temporary workspace.
            "--name",
            "calc",
            "--approval",
            "ask",
            "--sandbox",
            "off",
            "--context-window",
            "100000000",
            "--max-client-lag-bytes",
            LAG_LIMIT,
        ])
        .start();
    std::fs::write(pod.workspace.join("AGENTS.md"), "Keep answers short.\n")
        .expect("write AGENTS.md");
    std::fs::create_dir_all(pod.workspace.join("src")).expect("create src/");
    std::fs::write(pod.workspace.join("src/main.rs"), "fn main() {}\n").expect("write main.rs");
    let socket = pod.socket.clone();
    let mut t = Transcript::default();

    t.section("connect");
    let mut a = Peer::connect("A", &socket);
    let snapshot = a.until(&mut t, is("snapshot"));
    let first_session = snapshot["session_id"]
        .as_str()
        .expect("a snapshot names its session")
        .to_owned();

    t.section("hello");
    a.send(
        &mut t,
        r#"{"type":"hello","client":"transcript@example","request_id":"h1"}"#,
    );
    a.until(&mut t, is("response"));

    t.section("run");
    a.send(
        &mut t,
        r#"{"type":"run","request_id":"r1","segments":[{"type":"text","text":"Run the tests"}]}"#,
    );
    a.until(&mut t, is_state("waiting"));

    t.section("approve");
    a.send(
        &mut t,
        r#"{"type":"approve","call_id":"call_1","decision":"allow","request_id":"a1"}"#,
    );
    a.until(&mut t, is_entry("tool_results"));

    t.section("turn_end");
    a.until(&mut t, is_state("idle"));

    t.section("compact");
    a.send(&mut t, r#"{"type":"compact","request_id":"c1"}"#);
    a.until(&mut t, is("compact_done"));
    a.until(&mut t, is_state("idle"));

    t.section("get_session");
    a.send(
        &mut t,
        &format!(r#"{{"type":"get_session","session_id":"{first_session}","request_id":"g1"}}"#),
    );
    a.until(&mut t, is("response"));

    t.section("fork");
    a.send(&mut t, r#"{"type":"fork","request_id":"f1"}"#);
    a.until(&mut t, is("response"));

    t.section("reconnect");
    a.send(
        &mut t,
        r#"{"type":"run","request_id":"r2","segments":[{"type":"text","text":"Start the long job"}]}"#,
    );
    a.until(&mut t, is("text_delta"));
    let mut b = Peer::connect("B", &socket);
    let snapshot = b.until(&mut t, is("snapshot"));
    assert_eq!(
        snapshot["status"]["turn"]["request_id"], "r2",
        "a client attaching mid-turn learns whose turn it is from status.turn"
    );
    let turn_id = snapshot["status"]["turn"]["turn_id"].clone();
    a.send(&mut t, r#"{"type":"cancel","run":"r2","request_id":"x1"}"#);
    let end = b.until(&mut t, is_entry("turn_end"));
    assert_eq!(
        (&end["entry"]["turn_id"], &end["entry"]["request_id"]),
        (&turn_id, &Value::from("r2")),
        "the turn_end a reconnected client sees names the turn status.turn named"
    );
    b.until(&mut t, is_state("idle"));
    a.skip_until(is_state("idle"));

    t.section("errors");
    a.send(
        &mut t,
        r#"{"type":"approve","call_id":"call_9","decision":"allow","request_id":"e1"}"#,
    );
    a.until(&mut t, is("error"));
    a.send_unchecked(&mut t, r#"{"type":"run","segments":[]}"#);
    a.until(&mut t, is("error"));
    let prefix = format!("{}/src/ma", pod.workspace.display());
    a.send(
        &mut t,
        &format!(
            r#"{{"type":"list_completions","kind":"file","prefix":"{prefix}","request_id":"l1"}}"#
        ),
    );
    a.until(&mut t, is("response"));

    t.section("lagged");
    show_a_lagged_client(&mut t, &mut a, &socket);

    t.section("shutdown");
    a.send(&mut t, r#"{"type":"shutdown","request_id":"s1"}"#);
    a.until(&mut t, is("shutdown"));
    let (after, torn) = a.read_to_end();
    assert!(
        after.is_empty() && torn.is_empty(),
        "frames after shutdown: {after:?} {torn:?}"
    );
    t.line("A: end of stream".into());
    schema::record_count();

    let mut sections = t.sections;
    normalise(&mut sections, &pod);
    sections
}

/// A client that stops reading while a long reply streams is cut off with
/// `lagged`. Whether the `lagged` frame reaches it depends on it reading
/// again within the pod's grace period; a slow machine can miss that, so
/// the story is tried up to three times.
fn show_a_lagged_client(t: &mut Transcript, a: &mut Peer, socket: &Path) {
    for attempt in 1..=3 {
        let mut c = Peer::connect("C", socket);
        c.skip_until(is("snapshot"));
        let mut quiet = Transcript::default();
        quiet.section("attempt");
        let run = r#"{"type":"run","request_id":"r3","segments":[{"type":"text","text":"Print the big file"}]}"#;
        a.send(&mut quiet, run);
        a.skip_until(is_entry("turn_end"));
        a.skip_until(is_state("idle"));
        let (lines, torn) = c.read_to_end();
        let last = lines.last().map(|l| l.trim_end().to_owned());
        let lagged = last
            .as_deref()
            .is_some_and(|l| l.contains(r#""code":"lagged""#));
        if !lagged || !torn.is_empty() {
            eprintln!(
                "attempt {attempt}: no clean `lagged` frame (torn: {}), again",
                torn.len()
            );
            continue;
        }
        for line in &lines {
            schema::check_received(&serde_json::from_str(line).expect("whole lines are JSON"));
        }
        t.line(format!("A→ {run}"));
        t.line("C← … (every frame up to the one it could not take in time)".into());
        t.line(format!("C← {}", last.unwrap_or_default()));
        t.line("C: end of stream".into());
        let mut c = Peer::connect("C", socket);
        let snapshot = c.recv(None);
        assert_eq!(snapshot["type"], "snapshot");
        let entries = snapshot["entries"].as_array().map_or(0, Vec::len);
        assert!(entries > 0);
        t.line(
            "C← {\"type\":\"snapshot\", … the whole current session, as on any connection}".into(),
        );
        return;
    }
    panic!("a lagged client never got its `lagged` frame in three attempts");
}

/// Replaces what differs between runs with placeholders: uuids and turn
/// ids (numbered by first appearance), times, the pod's pid and version, paths of the
/// temporary directory, token estimates, and texts too long to read.
fn normalise(sections: &mut [(String, Vec<String>)], pod: &Pod) {
    let uuid = Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("uuid regex");
    let turn = Regex::new(r"\bt-[0-9a-f]{12}\b").expect("turn id regex");
    let time = Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
        .expect("time regex");
    let numbers = Regex::new(r#""(pid|context_tokens|tokens_before|tokens_after)":\d+"#)
        .expect("number regex");
    let version = Regex::new(r#""version":"[^"]*""#).expect("version regex");
    // The machine's OS, shell, date and paths: the same on no two machines.
    let environment = Regex::new(r#""source":"environment","text":"(?:[^"\\]|\\.)*""#)
        .expect("environment regex");
    let workspace = pod
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| pod.workspace.clone());
    let paths = [
        (workspace.display().to_string(), "<workspace>"),
        (pod.workspace.display().to_string(), "<workspace>"),
        (pod.data_dir.display().to_string(), "<data-dir>"),
    ];
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut turns: HashMap<String, usize> = HashMap::new();
    for (_, lines) in sections.iter_mut() {
        for line in lines.iter_mut() {
            let plain = environment
                .replace_all(line, r#""source":"environment","text":"<environment>""#)
                .into_owned();
            let mut text = shorten_long_strings(&plain);
            for (path, placeholder) in &paths {
                text = text.replace(path.as_str(), placeholder);
            }
            text = uuid
                .replace_all(&text, |c: &regex::Captures| {
                    let next = ids.len() + 1;
                    let n = *ids.entry(c[0].to_owned()).or_insert(next);
                    format!("<uuid-{n}>")
                })
                .into_owned();
            text = turn
                .replace_all(&text, |c: &regex::Captures| {
                    let next = turns.len() + 1;
                    let n = *turns.entry(c[0].to_owned()).or_insert(next);
                    format!("<turn-{n}>")
                })
                .into_owned();
            text = time.replace_all(&text, "<time>").into_owned();
            text = numbers
                .replace_all(&text, |c: &regex::Captures| {
                    let key = &c[1];
                    let placeholder = if key == "pid" { "<pid>" } else { "<tokens>" };
                    format!("\"{key}\":{placeholder}")
                })
                .into_owned();
            *line = version
                .replace_all(&text, r#""version":"<version>""#)
                .into_owned();
        }
    }
}

/// JSON string literals longer than this are shown as their length.
const LONG_STRING: usize = 160;

/// Replaces each JSON string literal of more than [`LONG_STRING`] bytes in
/// `line` with `"<N bytes>"`.
fn shorten_long_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        let mut end = line.len();
        let mut escaped = false;
        for (i, c) in chars.by_ref() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        let literal = &line[start..end];
        if literal.len() - 2 > LONG_STRING {
            out.push_str(&format!("\"<{} bytes>\"", literal.len() - 2));
        } else {
            out.push_str(literal);
        }
    }
    out
}

/// The doc with every frame block replaced by the transcript's section of
/// the same name. Fails on a section the doc lacks, or a block the
/// transcript does not fill.
fn fill(doc: &str, sections: &[(String, Vec<String>)]) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = doc;
    let mut used = Vec::new();
    while let Some(at) = rest.find(OPEN) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let name_end = from
            .find(" -->")
            .ok_or_else(|| format!("unclosed marker near {:?}", &from[..40.min(from.len())]))?;
        let name = &from[OPEN.len()..name_end];
        let close = from
            .find(CLOSE)
            .ok_or_else(|| format!("frame block {name:?} has no {CLOSE}"))?;
        let lines = sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, lines)| lines)
            .ok_or_else(|| format!("the doc has a frame block {name:?} the test does not play"))?;
        used.push(name.to_owned());
        out.push_str(&from[..name_end + 4]);
        out.push_str("\n```text\n");
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("```\n");
        out.push_str(CLOSE);
        rest = &from[close + CLOSE.len()..];
    }
    out.push_str(rest);
    for (name, _) in sections {
        if !used.contains(name) {
            return Err(format!("the doc has no frame block for section {name:?}"));
        }
    }
    Ok(out)
}

#[test]
fn the_transcript_is_what_a_real_pod_sends() {
    let sections = play();
    let doc = std::fs::read_to_string(DOC_PATH).expect("read docs/protocol-transcript.md");
    let filled =
        fill(&doc, &sections).unwrap_or_else(|e| panic!("docs/protocol-transcript.md: {e}"));
    if std::env::var_os("POD_UPDATE_TRANSCRIPT").is_some() {
        std::fs::write(DOC_PATH, &filled).expect("write docs/protocol-transcript.md");
        return;
    }
    if filled != doc {
        let first = doc
            .lines()
            .zip(filled.lines())
            .enumerate()
            .find(|(_, (d, f))| d != f)
            .map(|(i, (d, f))| format!("line {}:\n  doc: {d}\n  pod: {f}", i + 1))
            .unwrap_or_else(|| "the docs differ in length".into());
        panic!(
            "docs/protocol-transcript.md differs from what the pod sends ({first}); if the \
             change is meant, regenerate it with \
             `POD_UPDATE_TRANSCRIPT=1 cargo test --test protocol_transcript` and commit it"
        );
    }
}

#[test]
fn long_strings_are_shortened_and_escapes_respected() {
    let long = "x".repeat(LONG_STRING + 1);
    let line = format!(r#"{{"a":"{long}","b":"q\"{long}","c":"short"}}"#);
    assert_eq!(
        shorten_long_strings(&line),
        format!(
            r#"{{"a":"<{} bytes>","b":"<{} bytes>","c":"short"}}"#,
            LONG_STRING + 1,
            LONG_STRING + 4
        )
    );
}
