//! `pod acp` driven as an editor drives it: by the official ACP TypeScript
//! SDK (`tests/acp/editor.mjs`, the client editors embed), against the
//! built binary, which starts its own pod on the script provider.
//!
//! Without Node or the SDK (`npm ci` in tests/acp) these tests skip with a
//! message, unless `CI` is set: then they fail, as `.ci/run` installs both.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::{bash_step, eventually, read_lines, slow_text_reply, POD};
use serde_json::{json, Value};

/// A workspace, a data directory and a socket for one pod, stopped when
/// the test ends.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new(script: &str) -> Place {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("script.jsonl"), script).unwrap();
        Place { dir }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws").canonicalize().unwrap()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `program` (`pod` by default) aimed at this place's pod, as the
    /// editor's own commands are.
    fn command(&self) -> Command {
        self.command_of(Path::new(POD))
    }

    fn command_of(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.workspace())
            .env("POD_DATA_DIR", self.data_dir())
            .env("POD_SOCKET", self.dir.path().join("pod.sock"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env_remove("POD_NAME")
            .env_remove("POD_WORKSPACE")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        command
    }

    /// Runs one scenario of the editor; its facts, by name. `answers`: how
    /// the editor answers each permission request in turn.
    fn editor(&self, scenario: &str, answers: &str) -> Option<serde_json::Map<String, Value>> {
        self.editor_with(scenario, answers, &[])
    }

    /// As [`Place::editor`], with more of the editor's environment.
    fn editor_with(
        &self,
        scenario: &str,
        answers: &str,
        env: &[(&str, &str)],
    ) -> Option<serde_json::Map<String, Value>> {
        let node = node()?;
        let mut command = self.command_of(&node);
        command.envs(env.iter().copied());
        command
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/editor.mjs"))
            .arg(scenario)
            .env("POD_BIN", POD)
            .env("WORKSPACE", self.workspace())
            .env("SCRIPT", self.dir.path().join("script.jsonl"))
            .env("ANSWERS", answers);
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "the editor failed in {scenario}:\n{}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut facts = serde_json::Map::new();
        for line in stdout.lines() {
            let Ok(Value::Object(fact)) = serde_json::from_str(line) else {
                panic!("the editor printed {line:?}");
            };
            facts.extend(fact);
        }
        Some(facts)
    }

    /// The session's log, parsed.
    fn log(&self, session: &Value) -> Vec<Value> {
        let session = session.as_str().unwrap();
        read_lines(&self.data_dir().join(format!("sessions/{session}.jsonl")))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = self.command().arg("stop").output();
    }
}

/// Node, when it and the SDK are installed; else `None` with a message,
/// or a failure under CI.
fn node() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/acp/node_modules/@agentclientprotocol/sdk/package.json");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    match (node, sdk.is_file()) {
        (true, true) => Some(PathBuf::from("node")),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but node or the ACP SDK is missing (.ci/run runs `npm ci` in tests/acp)"
        ),
        _ => {
            eprintln!("skipped: needs node and `npm ci` in tests/acp; CI runs this test");
            None
        }
    }
}

fn updates_of(facts: &serde_json::Map<String, Value>, name: &str) -> Vec<Value> {
    facts[name].as_array().unwrap().clone()
}

fn statuses(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .filter_map(|u| u["status"].as_str())
        .collect()
}

#[test]
fn a_prompt_streams_its_answer_into_a_new_session() {
    let place = Place::new(&json!({"events":[{"text":"hello "},{"text":"world"}]}).to_string());
    let Some(facts) = place.editor("stream", "") else {
        return;
    };
    assert_eq!(facts["stopReason"], "end_turn");
    assert_eq!(facts["text"], "hello world");
    assert!(facts["chunks"].as_u64().unwrap() >= 1);
    // The editor's own input is not echoed back to it.
    assert_eq!(facts["echoed"], "");
    assert_eq!(facts["meta"]["pod"]["newSession"], true);
    let modes: Vec<_> = facts["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["ask", "edits", "auto", "read-only"]);
    assert_eq!(facts["modes"]["currentModeId"], "ask");
    // The ACP session is the pod's, and the turn is in its log.
    let log = place.log(&facts["session"]);
    assert!(log.iter().any(|l| l["entry"]["kind"] == "turn_end"));
    assert_eq!(facts["exit"]["code"], 0);
}

#[test]
fn the_editor_allows_one_tool_call_and_denies_another() {
    let script = format!(
        "{}{}",
        bash_step(&[("c1", "touch allowed")]),
        bash_step(&[("c2", "touch denied")])
    );
    let place = Place::new(&script);
    let Some(facts) = place.editor("permissions", "allow_once,deny") else {
        return;
    };
    assert_eq!(facts["c1.stopReason"], "end_turn");
    assert_eq!(facts["c2.stopReason"], "end_turn");
    let asked = facts["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(
        asked[0]["options"],
        json!(["allow_once", "allow_session", "allow_always", "deny"])
    );
    let c1 = updates_of(&facts, "c1.updates");
    assert_eq!(c1[0]["sessionUpdate"], "tool_call");
    assert_eq!(c1[0]["kind"], "execute");
    // The first `tool_call` says what the call does: an editor that draws
    // it alone shows the command, not just "bash" (issue 40's trial).
    assert_eq!(c1[0]["title"], "touch allowed", "{c1:?}");
    assert_eq!(statuses(&c1).last(), Some(&"completed"), "{c1:?}");
    let c2 = updates_of(&facts, "c2.updates");
    assert_eq!(statuses(&c2).last(), Some(&"failed"), "{c2:?}");
    assert!(place.workspace().join("allowed").exists());
    assert!(!place.workspace().join("denied").exists());
}

#[test]
fn a_cancel_stops_the_turn_and_the_prompt_says_cancelled() {
    let place = Place::new(&slow_text_reply(400, 50));
    let Some(facts) = place.editor("cancel", "") else {
        return;
    };
    assert_eq!(facts["stopReason"], "cancelled");
    let log = place.log(&facts["session"]);
    let end = log
        .iter()
        .find(|l| l["entry"]["kind"] == "turn_end")
        .unwrap();
    assert_eq!(end["entry"]["reason"], "cancelled");
}

#[test]
fn loading_an_earlier_session_replays_it_before_the_answer() {
    let place = Place::new(&json!({"events":[{"text":"noted: apricot"}]}).to_string());
    let Some(facts) = place.editor("load", "") else {
        return;
    };
    assert_ne!(facts["second"], facts["session"]);
    assert_eq!(facts["replayedSessions"], json!([facts["session"]]));
    assert_eq!(facts["replayedUser"], "remember the word apricot");
    assert_eq!(facts["replayedAgent"], "noted: apricot");
    assert_eq!(facts["loadedModes"], "ask");
}

/// The session `long_session` writes: its id, and how many turns it holds.
const LONG: &str = "5b0e3c1a-7d2f-4e6b-9a81-3c4d5e6f7a8b";
const TURNS: usize = 300;

/// Writes session [`LONG`] into `data`: [`TURNS`] turns, each with an entry
/// of every kind `session/load` replays (and some it does not), each update
/// marked with its turn, texts that need escaping. Returns what an editor
/// must be shown, in order: each update's kind and its text or call id.
fn long_session(data: &Path) -> Vec<(String, String)> {
    let sessions = data.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let mut lines = vec![json!({"kind": "session_start", "session_id": LONG,
                                "created_at": "2026-12-07T00:00:00Z"})];
    let mut shown = Vec::new();
    let mut show = |kind: &str, what: String| shown.push((kind.to_owned(), what));
    for i in 0..TURNS {
        let said = format!("turn {i}: \"quoted\"\n\ttabbed ✓ \u{1}");
        lines.push(
            json!({"kind": "user_input", "at": "2026-12-07T00:00:00Z", "segments": [
            {"type": "text", "text": said}, {"type": "file_ref", "path": format!("src/{i}.rs")}]}),
        );
        show("user_message_chunk", said);
        show("user_message_chunk", format!("@src/{i}.rs"));
        lines.push(json!({"kind": "assistant_items", "items": [
            {"type": "reasoning", "text": format!("thinking {i}")},
            {"type": "text", "text": format!("answer {i} — done")},
            {"type": "tool_call", "call_id": format!("b{i}"), "name": "bash",
             "arguments": {"command": format!("echo {i}")}},
            {"type": "tool_call", "call_id": format!("e{i}"), "name": "edit_file",
             "arguments": {"path": "a.txt", "old_string": "x", "new_string": format!("y{i}")}},
            {"type": "tool_call", "call_id": format!("p{i}"), "name": "update_plan",
             "arguments": {"items": [{"text": format!("step {i}"), "status": "in_progress"}]}}]}));
        show("agent_thought_chunk", format!("thinking {i}"));
        show("agent_message_chunk", format!("answer {i} — done"));
        show("tool_call", format!("b{i}"));
        show("tool_call", format!("e{i}"));
        show("plan", format!("step {i}"));
        lines.push(
            json!({"kind": "approval_request", "call_id": format!("e{i}"),
                          "tool": "edit_file", "summary": "edit a.txt", "preview": "-x\n+y",
                          "reason": "ask"}),
        );
        lines.push(
            json!({"kind": "approval_decision", "call_id": format!("e{i}"),
                          "decision": "deny", "scope": "once", "by": "user"}),
        );
        show("tool_call_update", format!("e{i}"));
        lines.push(json!({"kind": "tool_results", "results": [
            {"call_id": format!("b{i}"), "output": format!("{i}\n"), "is_error": false},
            {"call_id": format!("e{i}"), "output": "denied", "is_error": true}]}));
        show("tool_call_update", format!("b{i}"));
        show("tool_call_update", format!("e{i}"));
        lines.push(json!({"kind": "turn_end", "reason": "completed"}));
    }
    let log: String = lines
        .into_iter()
        .enumerate()
        .map(|(seq, entry)| json!({"seq": seq, "entry": entry}).to_string() + "\n")
        .collect();
    std::fs::write(sessions.join(format!("{LONG}.jsonl")), log).unwrap();
    shown
}

/// What the editor was shown: each update's kind and its text or call id.
fn shown(replayed: &[Value]) -> Vec<(String, String)> {
    replayed
        .iter()
        .map(|u| {
            assert_eq!(u["on"], LONG, "an update of another session: {u}");
            let kind = u["sessionUpdate"].as_str().unwrap().to_owned();
            let what = match kind.as_str() {
                "plan" => &u["entries"][0]["content"],
                "tool_call" | "tool_call_update" => &u["toolCallId"],
                _ => &u["content"]["text"],
            };
            (kind, what.as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn loading_a_long_session_replays_every_entry_in_order_from_either_source() {
    let place = Place::new(&json!({"events":[{"text":"unused"}]}).to_string());
    let expected = long_session(&place.data_dir());
    // A new session first: the pod switches to the written one and `pod acp`
    // asks for its entries.
    let Some(asked) = place.editor_with("replay", "", &[("LOAD", LONG), ("FIRST", "1")]) else {
        return;
    };
    // A second editor's first call: the pod's current session is the written
    // one, replayed from the snapshot `pod acp` connects with.
    let first = place.editor_with("replay", "", &[("LOAD", LONG)]).unwrap();
    for facts in [&asked, &first] {
        assert_eq!(facts["loadedModes"], "ask");
        let replayed = updates_of(facts, "replayed");
        let got = shown(&replayed);
        assert_eq!(got.len(), expected.len(), "not every update was replayed");
        for (n, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "update {n} is not the log's");
        }
        // What each update says beyond its marker: the same from either source.
        let b7 = replayed.iter().find(|u| u["toolCallId"] == "b7").unwrap();
        assert_eq!(b7["title"], "echo 7");
        assert_eq!(b7["kind"], "execute");
        let e7 = replayed.iter().find(|u| u["toolCallId"] == "e7").unwrap();
        assert_eq!(
            e7["content"][0],
            json!({"type": "diff", "path": "a.txt", "oldText": "x", "newText": "y7"})
        );
    }
    assert_eq!(asked["replayed"], first["replayed"]);
}

#[test]
fn an_approval_from_another_client_withdraws_the_editors_request() {
    let place = Place::new(&bash_step(&[("c1", "touch approved")]));
    let Some(facts) = place.editor("elsewhere", "never") else {
        return;
    };
    assert_eq!(facts["stopReason"], "end_turn");
    assert_eq!(facts["withdrawn"], true);
    let c1 = updates_of(&facts, "c1.updates");
    assert_eq!(statuses(&c1).last(), Some(&"completed"), "{c1:?}");
    assert!(place.workspace().join("approved").exists());
}

#[test]
fn input_from_another_client_reaches_the_editor() {
    let place = Place::new(&json!({"events":[{"text":"seen"}]}).to_string());
    let Some(facts) = place.editor("others", "") else {
        return;
    };
    assert_eq!(facts["echoed"], "typed in the terminal");
    assert_eq!(facts["text"], "seen");
}

#[test]
fn a_pod_that_dies_fails_the_prompt_by_name_and_pod_acp_ends() {
    let place = Place::new(&slow_text_reply(400, 50));
    let Some(facts) = place.editor("dies", "") else {
        return;
    };
    let error = &facts["error"];
    assert_eq!(error["code"], -32603, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("is gone"), "{message}");
    assert!(message.contains("ws-"), "names the pod: {message}");
    assert_eq!(facts["exit"]["code"], 0);
}

#[test]
fn closing_stdin_mid_turn_ends_pod_acp_and_the_turn_goes_on() {
    let place = Place::new(&slow_text_reply(20, 50));
    let Some(facts) = place.editor("closes", "") else {
        return;
    };
    assert_eq!(facts["exit"]["code"], 0);
    eventually("the turn to complete", Duration::from_secs(20), || {
        place
            .log(&facts["session"])
            .iter()
            .any(|l| l["entry"]["kind"] == "turn_end" && l["entry"]["reason"] == "completed")
    });
}

/// Not through the SDK, which never sends a malformed frame: bytes as a
/// broken editor might write them.
#[test]
fn malformed_json_rpc_gets_its_error_and_the_connection_goes_on() {
    let place = Place::new("");
    let mut acp = place
        .command()
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = acp.stdin.take().unwrap();
    let mut stdout = BufReader::new(acp.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    };
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\"\n")
        .unwrap();
    assert_eq!(next()["error"]["code"], -32700);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let answer = next();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["protocolVersion"], 1);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"no/such\",\"params\":{}}\n")
        .unwrap();
    assert_eq!(next()["error"]["code"], -32601);
    drop(stdin);
    assert!(acp.wait().unwrap().success());
}

/// A turn that hands a task to a child pod `helper` and waits for it.
fn delegating_script() -> String {
    [
        json!({"events": [{"tool_call": {"id": "s1", "name": "spawn_agent",
            "arguments": {"task": "say hi", "name": "helper"}}}]}),
        json!({"events": [{"text": "the helper said hi"}]}),
        json!({"agent": "helper", "events": [{"text": "hi from the helper"}]}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect()
}

#[test]
fn an_editor_that_declares_subagents_sees_the_child_pod_as_a_child_session() {
    let place = Place::new(&delegating_script());
    let Some(facts) = place.editor_with("children", "allow_once,allow_once", &[("SUBAGENTS", "1")])
    else {
        return;
    };
    assert_eq!(facts["stopReason"], "end_turn");
    let started = place
        .log(&facts["session"])
        .into_iter()
        .find(|l| l["entry"]["kind"] == "agent_started")
        .expect("the turn started a child");
    let announced = facts["announced"].as_array().unwrap();
    let first = &announced[0];
    // Announced on the parent's session, as the child's session, before
    // anything of the child's.
    assert_eq!(first["on"], facts["session"], "{announced:?}");
    assert_eq!(first["sessionId"], started["entry"]["session_id"]);
    assert_eq!(first["title"], started["entry"]["name"]);
    assert_eq!(first["description"], "say hi");
    // The child's own session streams like the parent's.
    assert_eq!(facts["childUser"], "say hi");
    assert_eq!(facts["childText"], "hi from the helper");
    assert_eq!(facts["parentText"], "the helper said hi");
    // Its turn's end is its state.
    assert!(
        announced
            .iter()
            .any(|u| u["state"] == json!({"state": "idle", "stopReason": "end_turn"})),
        "{announced:?}"
    );
}

#[test]
fn an_editor_that_does_not_declare_subagents_is_never_sent_a_child_session() {
    let place = Place::new(&delegating_script());
    let Some(facts) = place.editor("children", "allow_once,allow_once") else {
        return;
    };
    assert_eq!(facts["stopReason"], "end_turn");
    assert!(place
        .log(&facts["session"])
        .iter()
        .any(|l| l["entry"]["kind"] == "agent_started"));
    assert_eq!(facts["announced"], json!([]));
    assert_eq!(facts["sessions"], json!([facts["session"]]));
    assert_eq!(facts["parentText"], "the helper said hi");
}
