//! `pod send` against a real `pod serve` with the script provider: what a
//! script sees on stdout and stderr, and the exit code that tells it how the
//! turn ended.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use harness::{slow_text_reply, Pod, POD};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};

fn text(output: &[u8]) -> String {
    String::from_utf8_lossy(output).into_owned()
}

/// `pod send --text TEXT ARGS…`, run to its end.
fn send(pod: &Pod, message: &str, args: &[&str]) -> Output {
    pod.command("send")
        .args(["--text", message])
        .args(args)
        .output()
        .unwrap()
}

/// `pod send --text TEXT ARGS…`, running in the background.
fn spawn_send(pod: &Pod, message: &str, args: &[&str]) -> Child {
    pod.command("send")
        .args(["--text", message])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn interrupt(child: &Child) {
    kill_process(Pid::from_child(child), Signal::Int).unwrap();
}

/// Parses `--json` output, one frame a line.
fn frames(output: &Output) -> Vec<Value> {
    text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The script line of one model reply.
fn reply(events: Value) -> String {
    json!({ "events": events }).to_string()
}

#[test]
fn text_of_different_model_calls_is_separated_and_tool_calls_are_shown_on_stderr() {
    let script = [
        reply(json!([{"text": "Let me look "}, {"text": "first."},
            {"tool_call": {"id": "c1", "name": "grep", "arguments": {"pattern": "TODO"}}}])),
        reply(json!([{"text": "Now I know."}])),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let output = send(&pod, "look", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // stdout is not a terminal here: it holds the answer alone.
    assert_eq!(text(&output.stdout), "Let me look first.\n\nNow I know.\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr.lines().any(|l| l == "⚙ grep TODO"),
        "the tool call is on a line of its own: {stderr}"
    );
}

/// A `web_fetch` call's progress line shows the URL as the fetch would
/// request it, as its approval does (issue 36), not as the model wrote it;
/// one that does not parse is shown as written, its control characters as
/// visible escapes, never raw.
#[test]
fn a_fetch_is_shown_by_the_url_its_approval_shows() {
    let script = [
        reply(json!([{"tool_call": {"id": "c1", "name": "web_fetch",
            "arguments": {"url": " HTTP://LocalHost:80/a/../b c\u{1b}[2J"}}},
            {"tool_call": {"id": "c2", "name": "web_fetch",
            "arguments": {"url": "http://ex\u{1b}]0;owned\u{7}ample.com/"}}}])),
        reply(json!([{"text": "Fetched."}])),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let output = send(&pod, "fetch", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l == "⚙ web_fetch http://localhost/b%20c%1B[2J"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l == r"⚙ web_fetch http://ex\e]0;owned\x07ample.com/"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn json_is_the_response_then_its_own_turn_only() {
    let script = [slow_text_reply(6, 50), reply(json!([{"text": "mine"}]))].join("\n");
    let pod = Pod::builder().script(&script).start();
    // Another client's turn is running: ours queues behind it.
    let mut other = pod.client();
    other.until_type("snapshot");
    other.run("first");
    other.until_type("turn_start");
    let output = send(&pod, "second", &["--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let frames = frames(&output);

    let first = &frames[0];
    assert_eq!(first["type"], "response", "{first}");
    assert_eq!(first["queued"], 1, "{first}");
    let request_id = first["request_id"].as_str().unwrap();
    assert_eq!(frames[1]["type"], "turn_start");
    assert_eq!(frames[1]["request_id"], request_id);
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "entry");
    assert_eq!(last["entry"]["kind"], "turn_end");
    assert_eq!(last["entry"]["request_id"], request_id);

    assert!(frames.iter().all(|f| f["type"] != "snapshot"));
    let texts: Vec<&str> = frames
        .iter()
        .filter(|f| f["type"] == "text_delta")
        .filter_map(|f| f["text"].as_str())
        .collect();
    assert_eq!(texts, ["mine"], "nothing of the other client's turn");
    let turn_starts = frames.iter().filter(|f| f["type"] == "turn_start").count();
    assert_eq!(turn_starts, 1);
}

/// The pod cannot read a frame over its limit, so its error names no
/// request: `pod send` still knows it was its run, and says what to do.
#[test]
fn a_message_over_the_frame_limit_is_refused_not_waited_for() {
    let pod = Pod::builder().args(["--max-frame-bytes", "1000"]).start();
    let mut child = spawn_send(&pod, &"a".repeat(2000), &[]);
    let exited = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !exited {
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    assert!(exited, "pod send still waited after 10 s");
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--max-frame-bytes") && stderr.contains("--file"),
        "{stderr}"
    );
}

#[test]
fn an_empty_message_is_bad_usage_and_starts_nothing() {
    let pod = Pod::builder().start();
    let output = send(&pod, " \n", &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("nothing to send"));
    let mut client = pod.client();
    let snapshot = client.until_type("snapshot");
    assert_eq!(
        snapshot["entries"].as_array().unwrap().len(),
        1,
        "only session_start"
    );
}

/// `pod send … | head -1`: once the reader is gone, it stops waiting
/// (exit 5) without an error about the pipe.
#[test]
fn a_reader_that_goes_away_ends_it_quietly() {
    let pod = Pod::builder().script(&slow_text_reply(20, 20)).start();
    let mut child = spawn_send(&pod, "talk", &[]);
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(!stderr.contains("pipe"), "{stderr}");
}

#[test]
fn no_wait_returns_once_the_run_is_accepted() {
    let pod = Pod::builder().script(&slow_text_reply(40, 100)).start();
    let started = std::time::Instant::now();
    let output = send(&pod, "later", &["--no-wait", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let frames = frames(&output);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["type"], "response");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "it did not wait"
    );
}

#[test]
fn ctrl_c_cancels_its_running_turn_and_exits_4() {
    let pod = Pod::builder().script(&slow_text_reply(100, 100)).start();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let child = spawn_send(&pod, "talk slowly", &[]);
    watcher.until_type("text_delta");
    interrupt(&child);
    let turn_end = watcher.until_entry("turn_end");
    assert_eq!(turn_end["entry"]["reason"], "cancelled");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("cancelling your message"), "{stderr}");
    assert!(stderr.contains("the turn was cancelled"), "{stderr}");
    assert!(text(&output.stdout).starts_with("w0 "));
}

#[test]
fn sigterm_and_sighup_cancel_its_running_turn_as_ctrl_c_does() {
    for signal in [Signal::Term, Signal::Hup] {
        let pod = Pod::builder().script(&slow_text_reply(100, 100)).start();
        let mut watcher = pod.client();
        watcher.until_type("snapshot");
        let child = spawn_send(&pod, "talk slowly", &[]);
        watcher.until_type("text_delta");
        kill_process(Pid::from_child(&child), signal).unwrap();
        let turn_end = watcher.until_entry("turn_end");
        assert_eq!(turn_end["entry"]["reason"], "cancelled", "{signal:?}");
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(4), "{}", text(&output.stderr));
    }
}

#[test]
fn a_second_ctrl_c_stops_waiting_and_exits_5() {
    let pod = Pod::builder().script(&slow_text_reply(100, 100)).start();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let mut child = spawn_send(&pod, "talk slowly", &[]);
    watcher.until_type("text_delta");
    // A pod that does not act on the cancel (stopped): only the second
    // Ctrl+C can end the wait.
    let pod_pid = Pid::from_raw(pod.pid() as i32).unwrap();
    kill_process(pod_pid, Signal::Stop).unwrap();
    interrupt(&child);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("cancelling your message") {
        assert_ne!(stderr.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    interrupt(&child);
    let status = child.wait().unwrap();
    stderr.read_to_string(&mut seen).unwrap();
    kill_process(pod_pid, Signal::Cont).unwrap();
    assert_eq!(status.code(), Some(5), "{seen}");
    assert!(seen.contains("stopped waiting"), "{seen}");
    // The cancel reaches the pod once it runs again: the turn ends.
    let turn_end = watcher.until_entry("turn_end");
    assert_eq!(turn_end["entry"]["reason"], "cancelled");
}

#[test]
fn ctrl_c_while_queued_removes_the_run_and_leaves_the_other_turn_running() {
    let script = [slow_text_reply(30, 100), reply(json!([{"text": "never"}]))].join("\n");
    let pod = Pod::builder().script(&script).start();
    let mut other = pod.client();
    other.until_type("snapshot");
    other.run("first");
    other.until_type("turn_start");
    let child = spawn_send(&pod, "second", &[]);
    other.until(|f| f["type"] == "status" && f["queued"] == 1);
    interrupt(&child);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(4), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("removed"));
    let turn_end = other.until_entry("turn_end");
    assert_eq!(
        turn_end["entry"]["reason"], "completed",
        "the other turn went on"
    );
    assert!(pod.log_lines().iter().all(
        |l| l["entry"]["kind"] != "user_input" || l["entry"]["segments"][0]["text"] != "second"
    ));
}

/// First hour, item 15: a message queued behind another turn says so, and
/// with stdout and stderr merged (`2>&1`) the answer and the tool lines
/// never glue together.
#[test]
fn a_queued_message_says_so_and_merged_output_keeps_its_lines() {
    let script = [
        slow_text_reply(30, 50),
        reply(json!([{"text": "Running it."},
            {"tool_call": {"id": "c1", "name": "grep", "arguments": {"pattern": "TODO"}}}])),
        reply(json!([{"text": "Done."}])),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let mut other = pod.client();
    other.until_type("snapshot");
    other.run("first");
    other.until_type("turn_start");
    let mut command = pod.command("send");
    command.args(["--text", "second"]);
    let (reader, writer) = std::io::pipe().unwrap();
    let child = command
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    drop(command);
    let mut merged = String::new();
    BufReader::new(reader).read_to_string(&mut merged).unwrap();
    let status = { child }.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{merged}");
    assert!(
        merged.contains("pod: your message is queued behind 1 run; it starts when that ends"),
        "{merged}"
    );
    assert!(
        merged.lines().any(|l| l == "Running it.") && merged.lines().any(|l| l == "⚙ grep TODO"),
        "lines glued together: {merged:?}"
    );
}

#[test]
fn a_model_error_exits_1_with_the_code_and_message() {
    let script =
        reply(json!([{"http_error": {"status": 401, "message": "Incorrect API key provided"}}]));
    let pod = Pod::builder().script(&script).start();
    let output = send(&pod, "hi", &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "the turn ended with error: provider_http: script: HTTP 401 Unauthorized: \
             Incorrect API key provided"
        ),
        "{stderr}"
    );
}

#[test]
fn max_steps_exits_1_and_says_so() {
    let call = reply(json!([{"tool_call": {"name": "list_dir", "arguments": {"path": "."}}}]));
    let pod = Pod::builder()
        .script(&call)
        .args(["--max-steps", "1"])
        .start();
    let output = send(&pod, "loop", &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("max_steps"));
}

#[test]
fn a_refused_run_exits_1() {
    let pod = Pod::start();
    let output = send(&pod, "x", &["--file", "../../etc/passwd"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("refused"));
}

#[test]
fn no_pod_exits_3_naming_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody-home.sock");
    let output = std::process::Command::new(POD)
        .args(["send", "--text", "hi", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("no pod is listening on {}", socket.display())),
        "{stderr}"
    );
    assert!(stderr.contains("pod serve"), "{stderr}");
}

#[test]
fn the_pod_shutting_down_mid_turn_exits_5() {
    let pod = Pod::builder().script(&slow_text_reply(100, 100)).start();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let child = spawn_send(&pod, "talk slowly", &[]);
    watcher.until_type("text_delta");
    watcher.send(json!({"type": "shutdown"}));
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(5), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("shut down before the turn ended"));
    assert!(
        text(&output.stdout).ends_with('\n'),
        "the partial answer ends its line"
    );
}

#[test]
fn retries_are_reported_on_stderr() {
    let script = [
        reply(json!([{"http_error": {"status": 429, "message": "slow down"}}])),
        reply(json!([{"text": "answered"}])),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let output = send(&pod, "hi", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "answered\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("HTTP 429 Too Many Requests: slow down"),
        "{stderr}"
    );
    assert!(stderr.contains("retrying in"), "{stderr}");
    assert!(stderr.contains("(1/4)"), "{stderr}");
}

/// A pod whose model wants to run `echo approved-ran`, then answers
/// `after`, then (a second turn) `second answer`; in approval mode `ask`.
fn asking_pod() -> Pod {
    let script = [
        reply(json!([{"tool_call": {"id": "c1", "name": "bash",
            "arguments": {"command": "echo approved-ran"}}}])),
        reply(json!([{"text": "after"}])),
        reply(json!([{"text": "second answer"}])),
    ]
    .join("\n");
    Pod::builder()
        .script(&script)
        .args(["--approval", "ask"])
        .start()
}

#[test]
fn a_turn_waiting_for_approval_is_shown_and_answered_with_pod_approve() {
    let pod = asking_pod();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let child = spawn_send(&pod, "run it", &[]);
    watcher.until_entry("approval_request");

    let pending = pod.command("pending").output().unwrap();
    assert_eq!(pending.status.code(), Some(0));
    let listed = text(&pending.stdout);
    assert!(
        listed.contains("c1") && listed.contains("echo approved-ran"),
        "{listed}"
    );

    let approved = pod.command("approve").output().unwrap();
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        text(&approved.stderr)
    );
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "after\n");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("waiting for approval"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "`pod --socket {} approve c1`",
            pod.socket.display()
        )),
        "the hint reaches the pod it was given: {stderr}"
    );
    let decision = watcher.until_entry("approval_decision");
    assert_eq!(decision["entry"]["decision"], "allow");
    assert_eq!(decision["entry"]["client"], "pod approve");
}

#[test]
fn pod_deny_sends_the_message_and_a_second_answer_is_refused() {
    let pod = asking_pod();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let child = spawn_send(&pod, "run it", &[]);
    watcher.until_entry("approval_request");
    let denied = pod
        .command("deny")
        .args(["c", "--message", "not now"])
        .output()
        .unwrap();
    assert_eq!(denied.status.code(), Some(0), "{}", text(&denied.stderr));
    let decision = watcher.until_entry("approval_decision");
    assert_eq!(decision["entry"]["decision"], "deny");
    assert_eq!(decision["entry"]["message"], "not now");
    assert_eq!(decision["entry"]["client"], "pod deny");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let again = pod.command("approve").arg("c1").output().unwrap();
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn a_run_queued_behind_a_waiting_turn_says_so_once() {
    let pod = asking_pod();
    let mut other = pod.client();
    other.until_type("snapshot");
    other.run("first");
    other.until_entry("approval_request");
    let child = spawn_send(&pod, "second", &[]);
    other.until(|f| f["type"] == "status" && f["queued"] == 1);
    let approved = pod.command("approve").arg("c1").output().unwrap();
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        text(&approved.stderr)
    );
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&output.stdout), "second answer\n");
    assert_eq!(
        stderr
            .matches("queued behind a turn that is waiting for approval")
            .count(),
        1,
        "{stderr}"
    );
}

#[test]
fn approve_with_nothing_pending_exits_1_and_pending_says_so() {
    let pod = Pod::start();
    let pending = pod.command("pending").output().unwrap();
    assert_eq!(pending.status.code(), Some(0));
    assert_eq!(text(&pending.stdout), "nothing pending\n");
    for command in ["approve", "deny"] {
        let output = pod.command(command).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{command}");
        assert!(text(&output.stderr).contains("nothing is pending"));
    }
}

#[test]
fn approve_without_a_pod_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("none.sock");
    for command in ["approve", "deny", "pending"] {
        let output = std::process::Command::new(POD)
            .arg(command)
            .arg("--socket")
            .arg(&socket)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{command}");
        assert!(text(&output.stderr).contains("no pod is listening"));
    }
}

/// The segments of the session's only message.
fn first_message(pod: &Pod) -> Value {
    pod.log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "user_input")
        .expect("a user_input")["entry"]["segments"]
        .clone()
}

/// `echo msg | pod send`: with no text given and a pipe on stdin, the pipe
/// is the message (issue 36), not a usage error.
#[test]
fn a_pipe_on_stdin_is_the_message_when_no_text_is_given() {
    let pod = Pod::builder()
        .script(&reply(json!([{"text": "ok"}])))
        .start();
    let mut child = pod
        .command("send")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"from a pipe\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "ok");
    assert_eq!(
        first_message(&pod),
        json!([{"type":"text","text":"from a pipe\n"}])
    );
}

/// `@path` in `pod send`'s text attaches the file as the TUI does: a
/// `file_ref` in place, sentence punctuation kept as text; a word that
/// names no file of the workspace, or one in backquotes, stays text.
#[test]
fn an_at_path_in_the_text_is_a_file_ref() {
    let pod = Pod::builder()
        .script(&reply(json!([{"text": "ok"}])))
        .start();
    std::fs::create_dir_all(pod.workspace.join("src")).unwrap();
    std::fs::write(pod.workspace.join("src/ops.rs"), "fn main() {}\n").unwrap();
    let output = send(
        &pod,
        "look at @src/ops.rs, not @nobody or `@src/ops.rs`",
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        first_message(&pod),
        json!([
            {"type":"text","text":"look at "},
            {"type":"file_ref","path":"src/ops.rs"},
            {"type":"text","text":", not @nobody or `@src/ops.rs`"},
        ])
    );
}

/// `pod send "@README.md"` from the workspace (or `@a.rs` from one of its
/// directories) sends the path relative to the workspace, as the TUI does,
/// so every client draws it as typed, not as this machine's absolute path
/// (issue 36).
#[test]
fn an_at_path_from_inside_the_workspace_is_sent_relative_to_it() {
    let pod = Pod::builder()
        .script(&reply(json!([{"text": "ok"}])))
        .start();
    std::fs::write(pod.workspace.join("README.md"), "# hi\n").unwrap();
    std::fs::create_dir_all(pod.workspace.join("src")).unwrap();
    std::fs::write(pod.workspace.join("src/a.rs"), "fn a() {}\n").unwrap();
    let output = pod
        .command("send")
        .args(["--text", "read @README.md and @a.rs"])
        .current_dir(pod.workspace.join("src"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let segments = first_message(&pod);
    // README.md is not in src/: it resolves against the workspace, as given.
    assert_eq!(
        segments,
        json!([
            {"type":"text","text":"read "},
            {"type":"file_ref","path":"README.md"},
            {"type":"text","text":" and "},
            {"type":"file_ref","path":"src/a.rs"},
        ])
    );
}
