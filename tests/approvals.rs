//! Approvals through a real `pod serve`: bash calls whose command writes a
//! marker file, so "it ran" and "it did not run" are facts on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::path::Path;
use std::time::Duration;

use harness::{bash_step, Client, Pod};
use serde_json::{json, Value};

/// A script whose every reply is plain text: for a restarted pod whose
/// resumed turn's next model call must not call tools again.
fn done() -> String {
    json!({"events":[{"text":"done"}]}).to_string()
}

/// The pod of `dir` started again, in mode `ask`, on `script`.
fn restart_asking(dir: tempfile::TempDir, script: &str) -> Pod {
    Pod::builder()
        .in_dir(dir)
        .script(script)
        .args(["--approval", "ask"])
        .start()
}

fn ask_pod(script: &str) -> Pod {
    Pod::builder()
        .script(script)
        .args(["--approval", "ask"])
        .start()
}

/// Starts a run and waits until the pod waits for a person.
fn run_until_waiting(c: &mut Client, text: &str) -> Value {
    c.until_type("snapshot");
    c.run(text);
    c.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    })
}

fn approve(c: &mut Client, call_id: &str, decision: &str, extra: Value) -> Value {
    let mut frame = json!({"type":"approve","call_id":call_id,"decision":decision,
        "request_id":format!("a-{call_id}")});
    if let (Value::Object(f), Value::Object(e)) = (&mut frame, extra) {
        f.extend(e);
    }
    c.send(frame);
    c.until_with("the approve answer", |v| {
        v["request_id"] == format!("a-{call_id}").as_str()
    })
}

fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["entry"]["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn marker(pod: &Pod, name: &str) -> bool {
    pod.workspace.join(name).exists()
}

fn results(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .map(|l| l["entry"]["results"][0].clone())
        .collect()
}

#[test]
fn ask_runs_nothing_until_approved_then_runs_and_completes() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    let status = run_until_waiting(&mut c, "make a marker");
    assert_eq!(status["pending_approvals"], json!(["c1"]));
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker(&pod, "marker"), "ran before it was approved");
    let request = pod
        .log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "approval_request")
        .expect("an approval_request entry");
    assert_eq!(request["entry"]["summary"], "touch marker");
    assert_eq!(request["entry"]["preview"], "touch marker");
    assert_eq!(request["entry"]["reason"], "mode:ask");

    let answer = approve(&mut c, "c1", "allow", json!({}));
    assert_eq!(answer["type"], "response", "{answer}");
    assert_eq!(answer["ok"], true);
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(marker(&pod, "marker"));
    let decision = pod
        .log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .unwrap();
    assert_eq!(decision["entry"]["by"], "user");
    assert_eq!(decision["entry"]["decision"], "allow");
    assert_eq!(decision["entry"]["scope"], "once");
}

#[test]
fn deny_runs_nothing_tells_the_model_and_the_turn_completes() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    approve(&mut c, "c1", "deny", json!({"message":"not today"}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(!marker(&pod, "marker"));
    let result = &results(&pod.log_lines())[0];
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("denied by the user"), "{output}");
    assert!(output.contains("not today"), "{output}");
}

#[test]
fn a_client_connecting_while_waiting_sees_the_request_in_its_snapshot() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    let snapshot = pod.client().until_type("snapshot");
    assert_eq!(snapshot["status"]["state"], "waiting");
    assert_eq!(snapshot["status"]["pending_approvals"], json!(["c1"]));
    assert!(snapshot["status"]["turn"]["turn_id"].is_string());
    let entries = snapshot["entries"].as_array().unwrap();
    assert_eq!(
        entries.last().unwrap()["entry"]["kind"],
        "approval_request",
        "{snapshot}"
    );
}

#[test]
fn two_clients_approving_at_once_commit_one_decision() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    let mut a = pod.client();
    let mut b = pod.client();
    a.until_type("snapshot");
    b.until_type("snapshot");
    let frame =
        |id: &str| json!({"type":"approve","call_id":"c1","decision":"allow","request_id":id});
    a.send(frame("ra"));
    b.send(frame("rb"));
    let ra = a.until_with("answer", |v| v["request_id"] == "ra");
    let rb = b.until_with("answer", |v| v["request_id"] == "rb");
    let answers = [ra["type"].clone(), rb["type"].clone()];
    assert!(answers.contains(&json!("response")), "{ra} {rb}");
    assert!(answers.contains(&json!("error")), "{ra} {rb}");
    let error = if ra["type"] == "error" { ra } else { rb };
    assert_eq!(error["code"], "not_pending");
    c.until_entry("turn_end");
    let decisions = kinds(&pod.log_lines())
        .into_iter()
        .filter(|k| k == "approval_decision")
        .count();
    assert_eq!(decisions, 1);
}

#[test]
fn kill_9_while_waiting_then_restart_and_approve_runs_it_and_completes() {
    let mut pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    pod.kill9();
    let dir = pod.into_dir();
    let pod = restart_asking(dir, &done());
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    assert_eq!(
        snapshot["status"]["state"], "waiting",
        "{}",
        snapshot["status"]
    );
    assert!(!marker(&pod, "marker"));
    approve(&mut c, "c1", "allow", json!({}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed");
    assert!(marker(&pod, "marker"));
    let lines = pod.log_lines();
    assert_eq!(
        kinds(&lines),
        [
            "session_start",
            "user_input",
            "hook_injected_items",
            "assistant_items",
            "approval_request",
            "approval_decision",
            "checkpoint",
            "tool_results",
            "assistant_items",
            "checkpoint",
            "turn_end"
        ]
    );
    // The resumed turn ends with the ids of the turn it resumed.
    assert_eq!(end["entry"]["turn_id"], lines[1]["entry"]["turn_id"]);
}

#[test]
fn a_stop_while_waiting_keeps_the_request_pending_for_the_next_start() {
    let mut pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    c.send(json!({"type":"shutdown"}));
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
    let lines = pod.log_lines();
    assert_eq!(kinds(&lines).last().unwrap(), "approval_request");
    let dir = pod.into_dir();
    let pod = restart_asking(dir, &done());
    let mut c = pod.client();
    assert_eq!(c.until_type("snapshot")["status"]["state"], "waiting");
    approve(&mut c, "c1", "allow", json!({}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(marker(&pod, "marker"));
}

/// `pod stop` while a turn waits says what the contract does — the turn
/// resumes, still waiting, at the next start — and how to drop the call
/// instead; it never claims to cancel it (issue 36).
#[test]
fn pod_stop_while_waiting_says_the_turn_will_resume_and_it_does() {
    let mut pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "make a marker");
    let out = pod.command("stop").output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("waiting for approval")
            && said.contains("will resume, still waiting")
            && said.contains(&format!("`pod --socket {} deny`", pod.socket.display())),
        "the hint reaches the pod it was given (`--socket`): {said}"
    );
    assert!(!said.contains("cancels"), "{said}");
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
    let dir = pod.into_dir();
    let pod = restart_asking(dir, &done());
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    assert_eq!(snapshot["status"]["pending_approvals"], json!(["c1"]));
}

#[test]
fn a_session_allow_runs_the_same_command_unasked_after_a_restart() {
    let script = bash_step(&[("c1", "touch marker")]);
    let pod = ask_pod(&script);
    let mut c = pod.client();
    run_until_waiting(&mut c, "first");
    approve(&mut c, "c1", "allow", json!({"scope":"session"}));
    c.until_entry("turn_end");
    let decision = pod
        .log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .unwrap();
    assert_eq!(decision["entry"]["rule"], "bash:touch *");
    std::fs::remove_file(pod.workspace.join("marker")).unwrap();
    drop(c);
    let dir = pod.into_dir();
    let pod = restart_asking(dir, &script);
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("again");
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed");
    assert!(marker(&pod, "marker"), "the session rule did not survive");
    assert!(!c
        .frames
        .iter()
        .any(|f| f["type"] == "entry" && f["entry"]["kind"] == "approval_request"));
}

#[test]
fn a_deny_rule_blocks_even_in_auto() {
    let pod = Pod::builder()
        .script(&bash_step(&[("c1", "touch marker")]))
        .args(["--approval", "auto", "--deny", "bash:touch *"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(!marker(&pod, "marker"));
    let lines = pod.log_lines();
    let decision = lines
        .iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .expect("a policy decision");
    assert_eq!(decision["entry"]["by"], "policy");
    assert_eq!(decision["entry"]["rule"], "bash:touch *");
    assert_eq!(decision["entry"]["decision"], "deny");
    assert!(results(&lines)[0]["output"]
        .as_str()
        .unwrap()
        .contains("denied"));
}

#[test]
fn read_only_denies_writes_and_read_only_tools_never_ask() {
    let script = format!(
        "{}\n{}\n",
        json!({"events":[
            {"tool_call":{"id":"r1","name":"list_dir","arguments":{}}},
            {"tool_call":{"id":"w1","name":"write_file","arguments":{"path":"x.txt","content":"x"}}},
            {"tool_call":{"id":"b1","name":"bash","arguments":{"command":"touch marker"}}}]}),
        json!({"events":[{"text":"done"}]})
    );
    let pod = Pod::builder()
        .script(&script)
        .args(["--approval", "read-only"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(!marker(&pod, "marker"));
    assert!(!pod.workspace.join("x.txt").exists());
    let lines = pod.log_lines();
    assert!(!kinds(&lines).contains(&"approval_request".to_owned()));
    let rules: Vec<Value> = lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_decision")
        .map(|l| l["entry"]["rule"].clone())
        .collect();
    assert_eq!(rules, [json!("mode:read-only"), json!("mode:read-only")]);
    let results = results(&lines);
    assert_eq!(results[0]["is_error"], false, "list_dir ran");
    assert_eq!(results[1]["is_error"], true);

    // In `ask`, the read-only tools run without asking.
    let script = format!(
        "{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"r1","name":"list_dir","arguments":{}}}]}),
        json!({"events":[{"text":"done"}]})
    );
    let pod = ask_pod(&script);
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("look");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(!kinds(&pod.log_lines()).contains(&"approval_request".to_owned()));
}

#[test]
fn cancel_while_waiting_records_cancel_decisions_and_ends_cancelled() {
    let pod = ask_pod(&bash_step(&[("c1", "touch a"), ("c2", "touch b")]));
    let mut c = pod.client();
    let status = run_until_waiting(&mut c, "two");
    assert_eq!(status["pending_approvals"], json!(["c1", "c2"]));
    c.send(json!({"type":"cancel"}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "cancelled");
    let lines = pod.log_lines();
    let decisions: Vec<&Value> = lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_decision")
        .collect();
    assert_eq!(decisions.len(), 2);
    for d in decisions {
        assert_eq!(d["entry"]["by"], "cancel");
        assert_eq!(d["entry"]["decision"], "deny");
    }
    assert!(!marker(&pod, "a") && !marker(&pod, "b"));
}

/// A command that connects to the pod's socket and tries to approve `c2`.
fn self_approval(socket: &Path) -> String {
    format!(
        "python3 -c \"import socket,json; s=socket.socket(socket.AF_UNIX); s.connect('{}'); \
         f=s.makefile('rw'); f.readline(); \
         f.write(json.dumps({{'type':'approve','call_id':'c2','decision':'allow','request_id':'x'}})+'\\n'); \
         f.flush(); \
         print(next(l for l in f if json.loads(l).get('request_id')=='x'))\"",
        socket.display()
    )
}

#[test]
fn a_tool_cannot_approve_another_call_of_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/pod.sock");
    let script = bash_step(&[("c1", &self_approval(&socket)), ("c2", "touch marker")]);
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--approval", "ask", "--allow", "bash:python3 *"])
        // The door a tool would otherwise find shut: this is the check
        // behind it.
        .args(["--sandbox-unix-sockets", "on"])
        .start();
    assert_eq!(pod.socket, socket);
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("try it");
    let result = c.until_with("c1's result", |v| {
        v["type"] == "entry" && v["entry"]["kind"] == "tool_results"
    });
    let output = result["entry"]["results"][0]["output"].as_str().unwrap();
    assert!(output.contains("forbidden"), "{output}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker(&pod, "marker"), "the tool approved its sibling");
    let snapshot = pod.client().until_type("snapshot");
    assert_eq!(snapshot["status"]["pending_approvals"], json!(["c2"]));
    approve(&mut c, "c2", "deny", json!({}));
    c.until_entry("turn_end");
}

#[test]
fn an_allow_rule_does_not_cover_a_compound_line() {
    let pod = Pod::builder()
        .script(&bash_step(&[("c1", "git status; touch x")]))
        .args(["--approval", "ask", "--allow", "bash:git status*"])
        .start();
    let mut c = pod.client();
    let status = run_until_waiting(&mut c, "sneaky");
    assert_eq!(status["pending_approvals"], json!(["c1"]));
    assert!(!marker(&pod, "x"));
    approve(&mut c, "c1", "deny", json!({}));
    c.until_entry("turn_end");
}

#[test]
fn deny_with_session_scope_and_unknown_calls_are_refused() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    let answer = approve(&mut c, "c1", "deny", json!({"scope":"session"}));
    assert_eq!(answer["code"], "invalid_params");
    let answer = approve(&mut c, "nope", "allow", json!({}));
    assert_eq!(answer["code"], "not_pending");
    approve(&mut c, "c1", "allow", json!({}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
}

#[test]
fn set_approval_changes_the_mode_from_now_on() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    assert_eq!(c.until_type("snapshot")["status"]["approval"], "ask");
    c.send(json!({"type":"set_approval","mode":"auto","request_id":"m"}));
    let status = c.until_with("the new mode", |v| v["type"] == "status");
    assert_eq!(status["approval"], "auto");
    let late = pod.client().until_type("snapshot");
    assert_eq!(late["greeting"]["approval"], "auto", "a stale greeting");
    assert_eq!(late["status"]["approval"], "auto");
    c.run("go");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(marker(&pod, "marker"));
}

#[test]
fn an_approve_sent_as_soon_as_the_request_arrives_is_taken() {
    let pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    let request = c.until_entry("approval_request");
    assert_eq!(request["entry"]["call_id"], "c1");
    let answer = approve(&mut c, "c1", "allow", json!({}));
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
}

#[test]
fn rules_from_the_config_file_and_the_flags_are_combined() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pod.toml");
    std::fs::write(&config, "[permissions]\ndeny = [\"bash:touch *\"]\n").unwrap();
    let script = bash_step(&[("c1", "touch a"), ("c2", "mkdir b")]);
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--approval", "ask", "--allow", "bash:mkdir *"])
        .arg("--config")
        .arg(config.display().to_string())
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(
        !marker(&pod, "a"),
        "the config file's deny rule was ignored"
    );
    assert!(marker(&pod, "b"), "the flag's allow rule was ignored");
}

/// Approving `*` for the session adds a rule for `*` itself, not `bash:*`:
/// the next command is still asked. `pod pending` says what `--session`
/// would add before anyone answers.
#[test]
fn a_session_rule_escapes_the_commands_own_wildcards_and_is_shown_first() {
    let script = format!(
        "{}\n{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"*"}}}]}),
        json!({"events":[{"tool_call":{"id":"c2","name":"bash","arguments":{"command":"git status --short; touch marker"}}}]}),
        done()
    );
    let pod = ask_pod(&script);
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    let pending = harness::succeeded(pod.command("pending").output().unwrap());
    assert!(pending.contains("--session adds bash:\\* *"), "{pending}");
    // The pod put the rule on the request entry; `pod pending` prints that.
    let requests: Vec<Value> = pod
        .log_lines()
        .into_iter()
        .filter(|l| l["entry"]["kind"] == "approval_request")
        .map(|l| l["entry"]["session_rule"].clone())
        .collect();
    assert_eq!(requests, vec![json!("bash:\\* *")]);
    harness::succeeded(
        pod.command("approve")
            .args(["c1", "--session"])
            .output()
            .unwrap(),
    );
    c.until_with("c2 asked", |v| {
        v["type"] == "entry"
            && v["entry"]["kind"] == "approval_request"
            && v["entry"]["call_id"] == "c2"
    });
    assert!(!marker(&pod, "marker"), "`bash:*` was added");
    let pending = harness::succeeded(pod.command("pending").output().unwrap());
    assert!(
        pending.contains("--session adds bash:git status --short; touch marker"),
        "a compound line adds itself: {pending}"
    );
    approve(&mut c, "c2", "deny", json!({}));
    c.until_entry("turn_end");
}

/// Trust item 10: a reply whose two calls share an id (a script, or a model
/// told to by a file it read) commits them under distinct ids, so the call a
/// person approves is the call that runs.
#[test]
fn calls_sharing_an_id_are_told_apart_and_approving_one_runs_only_it() {
    let pod = ask_pod(&bash_step(&[("c1", "touch benign"), ("c1", "touch evil")]));
    let mut c = pod.client();
    let status = run_until_waiting(&mut c, "two calls, one id");
    assert_eq!(status["pending_approvals"], json!(["c1", "c1_2"]));
    let summaries: Vec<Value> = pod
        .log_lines()
        .into_iter()
        .filter(|l| l["entry"]["kind"] == "approval_request")
        .map(|l| json!([l["entry"]["call_id"], l["entry"]["summary"]]))
        .collect();
    assert_eq!(
        summaries,
        vec![json!(["c1", "touch benign"]), json!(["c1_2", "touch evil"])]
    );
    approve(&mut c, "c1", "allow", json!({}));
    approve(&mut c, "c1_2", "deny", json!({}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(marker(&pod, "benign"));
    assert!(!marker(&pod, "evil"), "the call that was denied ran");
}

/// Trust item 17: a `write_file` approved as a new file must not overwrite
/// a file someone created while the request waited: the diff the person
/// approved is no longer what the call would do, so it fails, saying why.
#[test]
fn an_approved_write_fails_when_the_file_changed_after_the_preview() {
    let events = json!({"events":[{"tool_call":{"id":"c1","name":"write_file",
        "arguments":{"path":"notes.txt","content":"from the model\n"}}}]});
    let script = format!("{events}\n{}\n", json!({"events":[{"text":"done"}]}));
    let pod = ask_pod(&script);
    let mut c = pod.client();
    run_until_waiting(&mut c, "write notes");
    std::fs::write(pod.workspace.join("notes.txt"), "the user's own notes\n").unwrap();
    approve(&mut c, "c1", "allow", json!({}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let result = &results(&pod.log_lines())[0];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("changed after the user approved"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(pod.workspace.join("notes.txt")).unwrap(),
        "the user's own notes\n"
    );
}

/// Trust item 22: a call that was still waiting for a person when the pod
/// was killed, whose turn is closed later (the pod restarted on a new
/// session, then the old one resumed), never ran: its result says so, not
/// "it may have run in part".
#[test]
fn a_call_never_approved_is_closed_as_never_run() {
    let mut pod = ask_pod(&bash_step(&[("c1", "touch marker")]));
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    let old = snapshot["session_id"].as_str().unwrap().to_owned();
    c.run("make a marker");
    c.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    });
    pod.kill9();
    let pod = Pod::builder()
        .in_dir(pod.into_dir())
        .script(&done())
        .args(["--approval", "ask", "--new-session"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"resume_session","session_id":old,"request_id":"r"}));
    c.until_entry("turn_end");
    let result = &results(&pod.session_lines(&old))[0];
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("never ran"), "{output}");
    assert!(!output.contains("may have run"), "{output}");
    assert!(!marker(&pod, "marker"));
}
