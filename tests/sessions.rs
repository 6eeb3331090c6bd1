//! Sessions as a user reaches them: `list_sessions`, `pod sessions`,
//! `pod serve --session`, `pod log PREFIX`, and the switching methods
//! (`new_session`, `fork`, `resume_session`) on a real `pod serve`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use std::process::Command;
use std::time::Duration;

use harness::{succeeded, Client, Pod, POD};
use serde_json::{json, Value};
use support::{data_frames, Reply, Server};

fn attach(pod: &Pod) -> Client {
    let mut c = pod.client();
    c.until_type("snapshot");
    c
}

fn turn(c: &mut Client, text: &str) {
    c.run(text);
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed", "{end}");
}

fn current_session(pod: &Pod) -> String {
    pod.log_lines()[0]["entry"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn request(c: &mut Client, frame: Value) -> Value {
    let id = frame["request_id"].as_str().unwrap().to_owned();
    c.send(frame);
    c.until_with("the answer", |f| {
        (f["type"] == "response" || f["type"] == "error") && f["request_id"] == id.as_str()
    })
}

fn list_sessions(c: &mut Client) -> Vec<Value> {
    let response = request(c, json!({"type":"list_sessions","request_id":"ls"}));
    assert_eq!(response["type"], "response", "{response}");
    response["sessions"].as_array().unwrap().clone()
}

/// A pod dir holding two sessions: `old` (one turn, its input on two lines)
/// and the current one, newer (one turn).
fn two_sessions() -> (tempfile::TempDir, String, String) {
    let pod = Pod::start();
    let mut c = attach(&pod);
    turn(&mut c, "first question\nsecond line");
    let old = current_session(&pod);
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).arg("--new-session").start();
    let mut c = attach(&pod);
    turn(&mut c, "another");
    let new = current_session(&pod);
    (pod.into_dir(), old, new)
}

/// `pod serve` with these extra arguments, expected to refuse to start;
/// returns its stderr.
fn serve_refused(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(POD)
        .arg("serve")
        .arg("--socket")
        .arg(dir.join("run/refused.sock"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .args(args)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    assert!(!output.status.success(), "pod serve {args:?} started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn list_sessions_describes_every_session_newest_first() {
    let (dir, old, new) = two_sessions();
    let pod = Pod::builder().in_dir(dir).start();
    let mut c = attach(&pod);
    let sessions = list_sessions(&mut c);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0]["session_id"], new.as_str());
    assert_eq!(sessions[0]["current"], true);
    assert_eq!(sessions[0]["title"], "another");
    assert_eq!(sessions[0]["entries"], pod.session_lines(&new).len() as u64);
    assert_eq!(sessions[1]["session_id"], old.as_str());
    assert_eq!(sessions[1]["current"], false);
    assert_eq!(sessions[1]["title"], "first question second line");
    assert_eq!(sessions[1]["entries"], pod.session_lines(&old).len() as u64);
    for s in &sessions {
        assert_eq!(s["compacted_from"], Value::Null);
        assert_eq!(s["forked_from"], Value::Null);
        assert!(s["updated_at"].as_str().unwrap() >= s["created_at"].as_str().unwrap());
    }

    // Appends show at the next listing.
    turn(&mut c, "more");
    let sessions = list_sessions(&mut c);
    assert_eq!(sessions[0]["entries"], pod.session_lines(&new).len() as u64);
    assert_eq!(sessions[0]["title"], "another");
}

#[test]
fn pod_sessions_prints_a_table_and_json_without_a_pod() {
    let (dir, old, new) = two_sessions();
    let pod = Pod::builder().in_dir(dir).start();
    let mut c = attach(&pod);
    let listed = list_sessions(&mut c);
    let dir = pod.into_dir();
    let data = dir.path().join("data");
    let sessions = |json: bool| {
        let mut cmd = Command::new(POD);
        // In the project's directory: `pod sessions` lists its sessions.
        cmd.arg("sessions")
            .arg("--data-dir")
            .arg(&data)
            .current_dir(dir.path().join("ws"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"));
        if json {
            cmd.arg("--json");
        }
        succeeded(cmd.output().unwrap())
    };
    let json: Value = serde_json::from_str(&sessions(true)).unwrap();
    assert_eq!(
        json,
        Value::Array(listed),
        "the same objects as list_sessions"
    );

    let table = sessions(false);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].contains("ENTRIES"), "{table}");
    assert!(lines[1].starts_with(&format!("* {}", &new[..8])), "{table}");
    assert!(
        lines[1].contains("s ago") && lines[1].ends_with("another"),
        "{table}"
    );
    assert!(lines[2].starts_with(&format!("  {}", &old[..8])), "{table}");
    assert!(lines[2].ends_with("first question second line"), "{table}");
}

#[test]
fn serve_session_starts_on_a_prefix_and_log_takes_one() {
    let (dir, old, _new) = two_sessions();
    let before = std::fs::read(dir.path().join(format!("data/sessions/{old}.jsonl"))).unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .args(["--session", &old[..6]])
        .start();
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    assert_eq!(snapshot["session_id"], old.as_str());
    assert_eq!(
        snapshot["entries"].as_array().unwrap().len(),
        before.split(|&b| b == b'\n').count() - 1
    );
    assert_eq!(current_session(&pod), old, "the pointer moved to it");
    let listed = list_sessions(&mut c);
    let current: Vec<&Value> = listed.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["session_id"], old.as_str());

    let log = succeeded(pod.command("log").arg(&old[..5]).output().unwrap());
    assert!(log.starts_with(&format!("── session {old}")), "{log}");
    assert!(log.contains("first question"), "{log}");
    let output = pod.command("log").arg("zzzz").output().unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a session id"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // It goes on in that session, and a restart stays there.
    turn(&mut c, "back again");
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).start();
    assert_eq!(current_session(&pod), old);
}

#[test]
fn serve_session_errors_name_the_problem() {
    let (dir, old, _new) = two_sessions();
    let sessions = dir.path().join("data/sessions");
    let err = serve_refused(dir.path(), &["--session", "ffff"]);
    assert!(err.contains("no session \"ffff\""), "{err}");
    for twin in ["abcd0001", "abcd0002"] {
        std::fs::copy(
            sessions.join(format!("{old}.jsonl")),
            sessions.join(format!("{twin}-0000-4000-8000-000000000000.jsonl")),
        )
        .unwrap();
    }
    let err = serve_refused(dir.path(), &["--session", "abcd"]);
    assert!(
        err.contains("matches 2 sessions (abcd0001, abcd0002)"),
        "{err}"
    );

    // A session another pod is writing is refused, not shared.
    let pod = Pod::builder().in_dir(dir).args(["--session", &old]).start();
    let err = serve_refused(pod.dir.path(), &["--name", "other", "--session", &old[..8]]);
    assert!(err.contains("being written by another pod"), "{err}");
}

// ---------------------------------------------------------------------------
// The switching methods end to end. They need the Worker's handlers for
// `new_session` / `fork` / `resume_session` (idle check, swapping its
// conversation); `SessionLog`'s side is tested in
// `src/pod/session_log/switch/tests.rs`.

/// `session_switched` then, at once, the snapshot of the new session.
/// Every undo makes a session (issue 36): `pod sessions` shows them as one
/// conversation and its branches — each rewind and fork under the session it
/// came from, marked, the shared title once — and `--json` says which
/// sessions a rewind made.
#[test]
fn pod_sessions_groups_rewinds_and_forks_under_their_session() {
    let pod = Pod::start();
    let mut c = attach(&pod);
    turn(&mut c, "fix the parser");
    let first = current_session(&pod);
    turn(&mut c, "and the lexer");
    succeeded(pod.command("undo").output().unwrap());
    let undone = expect_switch(&mut c, "rewind").0;
    turn(&mut c, "the lexer, carefully");
    succeeded(pod.command("undo").output().unwrap());
    let undone_again = expect_switch(&mut c, "rewind").0;
    c.send(json!({"type":"fork","request_id":"f"}));
    let forked = expect_switch(&mut c, "fork").0;

    let listed = |json: bool| {
        let mut cmd = pod.command("sessions");
        if json {
            cmd.arg("--json");
        }
        succeeded(cmd.output().unwrap())
    };
    let json: Vec<Value> = serde_json::from_str(&listed(true)).unwrap();
    let rewound = |id: &str| {
        json.iter()
            .find(|s| s["session_id"] == id)
            .unwrap_or_else(|| panic!("{id} listed: {json:?}"))["rewound"]
            .clone()
    };
    assert_eq!(rewound(&first), false);
    assert_eq!(rewound(&undone), true);
    assert_eq!(rewound(&undone_again), true);
    assert_eq!(rewound(&forked), false, "a fork is not a rewind");

    let table = listed(false);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    let row = |id: &str| {
        *lines
            .iter()
            .find(|l| l[2..].starts_with(&id[..8]))
            .unwrap_or_else(|| panic!("{id} in\n{table}"))
    };
    assert!(
        lines[1].starts_with(&format!("  {}", &first[..8])),
        "{table}"
    );
    assert!(lines[1].ends_with("  fix the parser"), "{table}");
    assert_eq!(table.matches("fix the parser").count(), 1, "{table}");
    assert!(
        row(&undone).contains(&format!("rewind of {}@", &first[..8])),
        "{table}"
    );
    assert!(row(&undone).ends_with("└ (rewind)"), "{table}");
    assert!(
        row(&undone_again).contains(&format!("rewind of {}@", &undone[..8])),
        "{table}"
    );
    assert!(row(&undone_again).ends_with("  └ (rewind)"), "{table}");
    assert!(row(&forked).starts_with("* "), "{table}");
    assert!(
        row(&forked).contains(&format!("fork of {}@", &undone_again[..8])),
        "{table}"
    );
    assert!(row(&forked).ends_with("    └ (fork)"), "{table}");
}

fn expect_switch(c: &mut Client, reason: &str) -> (String, Value) {
    let switched = c.until_type("session_switched");
    assert_eq!(switched["reason"], reason);
    let new = switched["new_session_id"].as_str().unwrap().to_owned();
    let snapshot = c.next().unwrap();
    assert_eq!(snapshot["type"], "snapshot", "{snapshot}");
    assert_eq!(snapshot["session_id"], new.as_str());
    assert_eq!(snapshot["greeting"]["session_id"], new.as_str());
    (new, snapshot)
}

#[test]

fn new_session_switches_every_client_and_leaves_the_old_log_alone() {
    let pod = Pod::start();
    let mut a = attach(&pod);
    let mut b = attach(&pod);
    turn(&mut a, "hello");
    let old = current_session(&pod);
    let before = std::fs::read(pod.data_dir.join(format!("sessions/{old}.jsonl"))).unwrap();
    a.send(json!({"type":"new_session","request_id":"n"}));
    for c in [&mut a, &mut b] {
        let (new, snapshot) = expect_switch(c, "new");
        assert_ne!(new, old);
        assert_eq!(snapshot["entries"].as_array().unwrap().len(), 1);
        assert_eq!(snapshot["entries"][0]["entry"]["forked_from"], Value::Null);
    }
    let new = current_session(&pod);
    assert_eq!(
        std::fs::read(pod.data_dir.join(format!("sessions/{old}.jsonl"))).unwrap(),
        before
    );
    let mut late = pod.client();
    assert_eq!(late.until_type("snapshot")["session_id"], new.as_str());
    turn(&mut a, "in the new one");
    // session_start, user_input, environment (a new session's first turn), text, turn_end.
    assert_eq!(pod.session_lines(&new).len(), 5);
}

#[test]

fn fork_at_an_earlier_turn_end_and_resume_the_original() {
    let pod = Pod::start();
    let mut a = attach(&pod);
    turn(&mut a, "one");
    turn(&mut a, "two");
    let old = current_session(&pod);
    let old_lines = pod.session_lines(&old);
    let first_end = old_lines
        .iter()
        .position(|l| l["entry"]["kind"] == "turn_end")
        .unwrap();
    a.send(json!({"type":"fork","at_seq":first_end,"request_id":"f"}));
    let (forked, snapshot) = expect_switch(&mut a, "fork");
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), first_end + 1);
    let lines = pod.session_lines(&forked);
    assert_eq!(
        lines[0]["entry"]["forked_from"],
        json!({"session_id": old, "seq": first_end})
    );
    assert_eq!(lines[1..], old_lines[1..=first_end]);
    assert_eq!(pod.session_lines(&old), old_lines);

    let err = request(&mut a, json!({"type":"fork","at_seq":1,"request_id":"bad"}));
    assert_eq!(err["code"], "invalid_params");

    a.send(json!({"type":"resume_session","session_id":&old[..6],"request_id":"r"}));
    let (resumed, snapshot) = expect_switch(&mut a, "resume");
    assert_eq!(resumed, old);
    assert_eq!(
        snapshot["entries"].as_array().unwrap().len(),
        old_lines.len()
    );
    let err = request(
        &mut a,
        json!({"type":"resume_session","session_id":"ffff","request_id":"nf"}),
    );
    assert_eq!(err["code"], "session_not_found");
}

#[test]

fn switching_while_a_turn_runs_is_busy() {
    let pod = Pod::builder()
        .script(&format!("{}\n", harness::slow_text_reply(50, 20)))
        .start();
    let mut a = attach(&pod);
    a.run("go");
    a.until_type("text_delta");
    for (i, method) in [
        json!({"type":"new_session"}),
        json!({"type":"fork"}),
        json!({"type":"resume_session","session_id":"abcd"}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut method = method;
        method["request_id"] = json!(format!("b{i}"));
        let err = request(&mut a, method);
        assert_eq!(err["type"], "error");
        assert_eq!(err["code"], "busy", "{err}");
    }
    a.until_entry("turn_end");
}

#[test]

fn the_turn_after_a_fork_sends_exactly_the_forked_history() {
    let reply = |text: &str| {
        Reply::sse(&data_frames(&[
            &json!({"choices":[{"index":0,"delta":{"role":"assistant","content":text},"finish_reason":"stop"}]}).to_string(),
            "[DONE]",
        ]))
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::start(vec![reply("A1"), reply("A2"), reply("A3")]));
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", server.url),
        ])
        .start();
    let mut a = attach(&pod);
    turn(&mut a, "one");
    let first_end = pod.log_lines().len() - 1;
    turn(&mut a, "two");
    a.send(json!({"type":"fork","at_seq":first_end,"request_id":"f"}));
    expect_switch(&mut a, "fork");
    turn(&mut a, "three");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let messages: Vec<(String, String)> = requests[2].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            // The first turn's environment entry rides with its input.
            let content = m["content"].as_str().unwrap_or_default();
            let typed = content
                .split("\n\n[environment] ")
                .next()
                .unwrap_or_default();
            (m["role"].as_str().unwrap().to_owned(), typed.to_owned())
        })
        .collect();
    let expected = [("user", "one"), ("assistant", "A1"), ("user", "three")];
    assert_eq!(
        messages,
        expected.map(|(r, c)| (r.to_owned(), c.to_owned())),
        "the forked history, nothing of turn two"
    );
    drop(rt);
}

#[test]

fn kill_9_between_the_new_log_and_the_pointer_resumes_a_consistent_session() {
    for (step, moves) in [("new_session_written", false), ("pointer_moved", true)] {
        let mut pod = Pod::builder()
            .env("POD_FAULT", &format!("crash_at={step}"))
            .start();
        let mut a = attach(&pod);
        turn(&mut a, "one");
        let old = current_session(&pod);
        let old_lines = pod.session_lines(&old);
        a.send(json!({"type":"fork","request_id":"f"}));
        while a.next().is_some() {}
        assert!(!pod.wait_exit(Duration::from_secs(20)).success());
        let dir = pod.into_dir();
        let pod = Pod::builder().in_dir(dir).start();
        let current = current_session(&pod);
        assert_eq!(current != old, moves, "{step}");
        assert_eq!(
            pod.session_lines(&old),
            old_lines,
            "{step}: old log touched"
        );
        let lines = pod.session_lines(&current);
        assert_eq!(lines[1..], old_lines[1..], "{step}: a complete session");
        let mut b = attach(&pod);
        turn(&mut b, "still there?");
    }
}

#[test]
fn set_model_names_the_model_of_the_next_request_and_survives_a_restart() {
    let script = json!({"events":[{"echo_model":{}}]}).to_string();
    let pod = Pod::builder().script(&script).start();
    let mut c = attach(&pod);
    let answer = request(
        &mut c,
        json!({"type":"set_model","model":"big-model","request_id":"m"}),
    );
    assert_eq!(answer["ok"], true, "{answer}");
    let change = c.until_entry("model_change");
    assert_eq!(change["entry"]["model"], "big-model");
    assert_eq!(change["entry"]["provider"], "script");
    let status = c.until_with("the new model", |v| {
        v["type"] == "status" && v["model"] == "big-model"
    });
    assert_eq!(status["model"], "big-model");
    let late = pod.client().until_type("snapshot");
    assert_eq!(late["greeting"]["model"], "big-model", "a stale greeting");
    c.run("which model?");
    c.until_entry("turn_end");
    let text = |pod: &Pod| {
        pod.log_lines()
            .iter()
            .rev()
            .find(|l| l["entry"]["kind"] == "assistant_items")
            .map(|l| l["entry"]["items"][0]["text"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert!(text(&pod).contains("big-model"), "{}", text(&pod));
    drop(c);
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    assert_eq!(snapshot["status"]["model"], "big-model");
    c.run("and now?");
    c.until_entry("turn_end");
    assert!(text(&pod).contains("big-model"), "{}", text(&pod));
}

/// `new_session` starts an *empty* session, on the pod's configured model
/// (no `model_change` in it says otherwise), even after a `set_model`; a
/// fork records the model in effect at its fork point, and the change the
/// pod then makes back to its configured model is a `model_change` after
/// the copies — so each log says truthfully which model produced what.
#[test]
fn a_new_session_after_set_model_is_empty_and_a_fork_records_its_model() {
    let script = json!({"events":[{"echo_model":{}}]}).to_string();
    let pod = Pod::builder().script(&script).start();
    let mut c = attach(&pod);
    turn(&mut c, "one");
    let at_first_end = pod.log_lines().len() - 1;
    let answer = request(
        &mut c,
        json!({"type":"set_model","model":"big-model","request_id":"m"}),
    );
    assert_eq!(answer["ok"], true, "{answer}");
    c.until_entry("model_change");
    turn(&mut c, "two");

    c.send(json!({"type":"new_session","request_id":"n"}));
    let (new, snapshot) = expect_switch(&mut c, "new");
    assert_eq!(snapshot["status"]["model"], "script", "{snapshot}");
    assert_eq!(snapshot["status"]["state"], "idle", "{snapshot}");
    assert_eq!(snapshot["status"]["turn"], Value::Null, "{snapshot}");
    let start = &snapshot["entries"][0]["entry"];
    assert_eq!(
        (&start["provider"], &start["model"]),
        (&json!("script"), &json!("script"))
    );
    let answer = request(&mut c, json!({"type":"list_sessions","request_id":"l"}));
    assert_eq!(answer["sessions"][0]["session_id"], new.as_str());
    let kinds: Vec<_> = pod
        .session_lines(&new)
        .iter()
        .map(|l| l["entry"]["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        [json!("session_start")],
        "the new session is not empty"
    );

    // Back to the first session, now on big-model, forked before the change.
    let old = answer["sessions"][1]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.send(json!({"type":"resume_session","session_id":old,"request_id":"r"}));
    expect_switch(&mut c, "resume");
    c.send(json!({"type":"fork","at_seq":at_first_end,"request_id":"f"}));
    let (forked, _) = expect_switch(&mut c, "fork");
    let lines = pod.session_lines(&forked);
    assert_eq!(
        lines[0]["entry"]["model"], "script",
        "the model at the fork point"
    );
    assert_eq!(
        lines.len(),
        at_first_end + 1,
        "nothing changes the model back"
    );
}

/// After `/model X` (`set_model`) and a restart, the start line names the
/// model the session goes on with, as `pod status` does (issue 36), not
/// the configured one.
#[test]
fn after_a_model_switch_and_a_restart_the_start_line_and_status_agree() {
    let mut pod = Pod::start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"set_model","model":"other-model"}));
    c.until_entry("model_change");
    c.send(json!({"type":"shutdown"}));
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
    let mut pod = Pod::builder().in_dir(pod.into_dir()).start();
    // The start line, among the lines `pod serve` prints first.
    let stderr = std::io::BufReader::new(pod.child.stderr.take().unwrap());
    let start = std::io::BufRead::lines(stderr)
        .map_while(Result::ok)
        .find(|l| l.contains(": session "))
        .expect("a start line");
    assert!(start.contains("(model other-model)"), "{start}");
    let status: Value = serde_json::from_str(&succeeded(
        pod.command("status").arg("--json").output().unwrap(),
    ))
    .unwrap();
    assert_eq!(status["status"]["model"], "other-model", "{status}");
}
