//! Rules that stay answered, through a real `pod serve`: `approve` with
//! `scope: "always"` written to a commented config file and honoured after
//! a restart; `list_rules`, `revoke_rule` and the `rule_revoked` entry that
//! keeps a revoked rule out across restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::{bash_step, Client, Pod};
use serde_json::{json, Value};

fn config_path(dir: &Path) -> PathBuf {
    dir.join("config/pod/config.toml")
}

fn asking(dir: tempfile::TempDir, script: &str) -> Pod {
    Pod::builder()
        .in_dir(dir)
        .script(script)
        .args(["--approval", "ask"])
        .start()
}

fn run_until_waiting(c: &mut Client, text: &str) -> Value {
    c.until_type("snapshot");
    c.run(text);
    c.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    })
}

fn request(c: &mut Client, frame: Value) -> Value {
    let id = frame["request_id"].as_str().unwrap().to_owned();
    c.send(frame);
    c.until_with("the answer", |v| v["request_id"] == id.as_str())
}

fn of_kind(pod: &Pod, kind: &str) -> Vec<Value> {
    pod.log_lines()
        .into_iter()
        .map(|l| l["entry"].clone())
        .filter(|e| e["kind"] == kind)
        .collect()
}

const COMMENTED: &str = "# my settings\n[permissions] # reviewed by me\n# safe listing\nallow = [\n    \"bash:ls *\",\n]\n";

#[test]
fn always_is_written_to_a_commented_config_and_honoured_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, COMMENTED).unwrap();
    let pod = asking(dir, &bash_step(&[("c1", "touch one")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    let answer = request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"allow","scope":"always",
               "request_id":"a1"}),
    );
    assert_eq!(answer["type"], "response", "{answer}");
    c.until_entry("turn_end");
    let decision = &of_kind(&pod, "approval_decision")[0];
    assert_eq!(decision["scope"], "always");
    assert_eq!(decision["rule"], "bash:touch *");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# my settings\n[permissions] # reviewed by me\n# safe listing\n"),
        "{text}"
    );
    let parsed: toml::Table = text.parse().unwrap();
    assert_eq!(
        parsed["permissions"]["allow"],
        toml::Value::Array(vec!["bash:ls *".into(), "bash:touch *".into()])
    );
    // A new session of a new pod: the rule comes from the file now.
    drop(c);
    let dir = pod.into_dir();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c2", "touch two")]))
        .args(["--approval", "ask", "--new-session"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("again");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    assert!(
        pod.workspace.join("two").exists(),
        "the kept rule was not honoured"
    );
    assert!(of_kind(&pod, "approval_request").is_empty());
    let rules = request(&mut c, json!({"type":"list_rules","request_id":"l"}));
    assert!(
        rules["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "bash:touch *" && r["source"] == "config"),
        "{rules}"
    );
}

#[test]
fn always_for_a_path_rule_goes_under_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"w1","name":"write_file",
            "arguments":{"path":"notes.md","content":"hi\n"}}}]}),
        json!({"events":[{"text":"done"}]})
    );
    let pod = asking(dir, &script);
    let mut c = pod.client();
    run_until_waiting(&mut c, "write");
    request(
        &mut c,
        json!({"type":"approve","call_id":"w1","decision":"allow","scope":"always",
               "request_id":"a"}),
    );
    c.until_entry("turn_end");
    let path = config_path(pod.dir.path());
    let parsed: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let root = std::fs::canonicalize(&pod.workspace).unwrap();
    assert_eq!(
        parsed["workspaces"][root.to_str().unwrap()]["permissions"]["allow"],
        toml::Value::Array(vec!["write:notes.md".into()]),
        "{parsed}"
    );
}

#[test]
fn always_is_refused_for_deny_and_compound_lines_and_the_call_stays_pending() {
    let dir = tempfile::tempdir().unwrap();
    let pod = asking(dir, &bash_step(&[("c1", "ls && touch x")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    let deny = request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"deny","scope":"always",
               "request_id":"d"}),
    );
    assert_eq!(deny["code"], "invalid_params", "{deny}");
    let compound = request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"allow","scope":"always",
               "request_id":"c"}),
    );
    assert_eq!(compound["code"], "invalid_params", "{compound}");
    assert!(!config_path(pod.dir.path()).exists(), "nothing written");
    // Still waiting: a usable answer is taken.
    let ok = request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"allow","request_id":"o"}),
    );
    assert_eq!(ok["type"], "response", "{ok}");
    c.until_entry("turn_end");
    assert!(pod.workspace.join("x").exists());
}

#[test]
fn a_config_that_cannot_be_written_keeps_the_rule_for_the_session_and_warns() {
    // Its lock cannot be taken (the lock file's name is a directory),
    // which no permission bit can make writable, even for root.
    let dir = tempfile::tempdir().unwrap();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "# kept\n").unwrap();
    std::fs::create_dir_all(path.parent().unwrap().join(".config.toml.lock")).unwrap();
    let pod = asking(dir, &bash_step(&[("c1", "touch a")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"allow","scope":"always",
               "request_id":"a"}),
    );
    // Said before the decision is committed, so before the answer.
    let warning = c
        .frames
        .iter()
        .find(|v| v["type"] == "notification" && v["level"] == "warn")
        .cloned()
        .expect("a warning");
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("this conversation only"),
        "{warning}"
    );
    c.until_entry("turn_end");
    let decision = &of_kind(&pod, "approval_decision")[0];
    assert_eq!(decision["scope"], "session");
    assert_eq!(decision["rule"], "bash:touch *");
    assert_eq!(
        std::fs::read_to_string(config_path(pod.dir.path())).unwrap(),
        "# kept\n"
    );
}

#[test]
fn list_rules_shows_every_source_and_revoke_rule_keeps_a_rule_out_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "[permissions]\ndeny = [\"bash:rm *\"]\n").unwrap();
    let script = format!(
        "{}{}{}",
        bash_step(&[("c1", "touch a")]),
        bash_step(&[("c2", "touch b")]),
        bash_step(&[("c3", "touch c")])
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--approval", "ask", "--allow", "bash:ls *"])
        .start();
    let mut c = pod.client();
    run_until_waiting(&mut c, "one");
    request(
        &mut c,
        json!({"type":"approve","call_id":"c1","decision":"allow","scope":"session",
               "request_id":"a"}),
    );
    c.until_entry("turn_end");
    let listed = request(&mut c, json!({"type":"list_rules","request_id":"l1"}));
    let rules = listed["rules"].as_array().unwrap();
    let find = |rule: &str| rules.iter().find(|r| r["rule"] == rule).cloned();
    assert_eq!(find("bash:rm *").unwrap()["source"], "config");
    assert_eq!(find("bash:rm *").unwrap()["kind"], "deny");
    assert_eq!(find("bash:ls *").unwrap()["source"], "flag");
    let session = find("bash:touch *").unwrap();
    assert_eq!(session["source"], "decision");
    assert_eq!(session["kind"], "allow");
    let decision_seq = pod
        .log_lines()
        .iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .map(|l| l["seq"].clone())
        .unwrap();
    assert_eq!(session["seq"], decision_seq);

    // Flag and config rules are not a client's to revoke.
    for rule in ["bash:ls *", "bash:rm *", "bash:nothing *"] {
        let refused = request(
            &mut c,
            json!({"type":"revoke_rule","rule":rule,"request_id":"r0"}),
        );
        assert_eq!(refused["code"], "not_found", "{rule}: {refused}");
    }
    c.send(json!({"type":"hello","client":"tester"}));
    let revoked = request(
        &mut c,
        json!({"type":"revoke_rule","rule":"bash:touch *","request_id":"r1"}),
    );
    assert_eq!(revoked["type"], "response", "{revoked}");
    let entry = &of_kind(&pod, "rule_revoked")[0];
    assert_eq!(entry["rule"], "bash:touch *");
    assert_eq!(entry["by"], "user");
    assert_eq!(entry["client"], "tester");
    assert_eq!(entry["remote"], Value::Null);
    assert!(entry["at"].is_string());

    // It asks again.
    c.run("two");
    c.until_with("asked again", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c2"])
    });
    request(
        &mut c,
        json!({"type":"approve","call_id":"c2","decision":"deny","request_id":"d2"}),
    );
    c.until_entry("turn_end");
    drop(c);

    // And after a restart too.
    let dir = pod.into_dir();
    let script = format!(
        "{}{}",
        bash_step(&[("c3", "touch c")]),
        bash_step(&[("c4", "touch d")])
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--approval", "ask"])
        .start();
    let mut c = pod.client();
    run_until_waiting(&mut c, "three");
    assert!(!pod.workspace.join("c").exists());
    let listed = request(&mut c, json!({"type":"list_rules","request_id":"l2"}));
    assert!(
        !listed["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "bash:touch *"),
        "{listed}"
    );
    request(
        &mut c,
        json!({"type":"approve","call_id":"c3","decision":"deny","request_id":"d3"}),
    );
    c.until_entry("turn_end");
}

#[test]
fn list_rules_is_a_read_method_and_revoke_rule_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/pod.sock");
    let probe = |method: &str| {
        format!(
            "python3 -c \"import socket,json; s=socket.socket(socket.AF_UNIX); s.connect('{}'); \
             f=s.makefile('rw'); f.readline(); \
             f.write(json.dumps({{'type':'{method}','rule':'bash:x *','request_id':'x'}})+'\\n'); \
             f.flush(); \
             print(next(l for l in f if json.loads(l).get('request_id')=='x'))\"",
            socket.display()
        )
    };
    let script = bash_step(&[("c1", &probe("list_rules")), ("c2", &probe("revoke_rule"))]);
    // Unix sockets opened, so the method check itself is what is tested.
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--sandbox-unix-sockets", "on"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("probe");
    c.until_entry("turn_end");
    let outputs: Vec<String> = of_kind(&pod, "tool_results")
        .iter()
        .map(|e| e["results"][0]["output"].as_str().unwrap().to_owned())
        .collect();
    assert!(outputs[0].contains("\"rules\""), "{}", outputs[0]);
    assert!(outputs[1].contains("forbidden"), "{}", outputs[1]);
}

#[test]
fn pod_rules_lists_and_revokes_from_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let pod = asking(dir, &bash_step(&[("c1", "git status --short")]));
    let mut c = pod.client();
    run_until_waiting(&mut c, "go");
    let approve = pod.command("approve").arg("--session").output().unwrap();
    assert!(approve.status.success(), "{approve:?}");
    c.until_entry("turn_end");
    let listed = harness::succeeded(pod.command("rules").output().unwrap());
    let rule = of_kind(&pod, "approval_decision")[0]["rule"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(listed.contains(&rule), "{listed}");
    assert!(listed.contains("decision"), "{listed}");
    let revoked = harness::succeeded(
        pod.command("rules")
            .args(["revoke", &rule])
            .output()
            .unwrap(),
    );
    assert!(revoked.contains("revoked"), "{revoked}");
    let again = pod
        .command("rules")
        .args(["revoke", &rule])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    harness::eventually("the entry", Duration::from_secs(5), || {
        !of_kind(&pod, "rule_revoked").is_empty()
    });
    assert_eq!(of_kind(&pod, "rule_revoked")[0]["client"], "pod rules");
}
