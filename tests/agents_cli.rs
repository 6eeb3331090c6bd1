//! The command line's side of child pods (protocol.md "Child pods", cli.md
//! "Child pods, editors"): a child is reached by its full name, listed by
//! `pod agents`, shown under its parent by `pod list`, and its approvals are
//! answered at the parent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use harness::{succeeded, Client, POD};
use serde_json::json;

/// A `pod serve --name NAME` in the default socket directory
/// (`$XDG_RUNTIME_DIR/pod/NAME.sock`), as a user's pods and their children
/// are found: by name, never by `--socket`.
struct Named {
    dir: tempfile::TempDir,
    child: Child,
}

impl Named {
    fn start(name: &str, script: &str, args: &[&str]) -> Named {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("script.jsonl"), script).unwrap();
        let mut serve = Named {
            child: Command::new(POD)
                .args(["serve", "--provider", "script", "--script"])
                .arg(dir.path().join("script.jsonl"))
                .args(["--name", name])
                .args(args)
                .envs(env(dir.path()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
            dir,
        };
        let socket = serve.socket_of(name);
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "{name} did not listen");
            assert!(serve.child.try_wait().unwrap().is_none(), "{name} exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        serve
    }

    fn socket_of(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("run/pod/{name}.sock"))
    }

    /// `pod ARGS…` as a user in the pod's workspace runs it.
    fn pod(&self, args: &[&str]) -> Output {
        Command::new(POD)
            .args(args)
            .envs(env(self.dir.path()))
            .output()
            .unwrap()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn env(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("XDG_RUNTIME_DIR", dir.join("run")),
        ("XDG_CONFIG_HOME", dir.join("config")),
        ("POD_DATA_DIR", dir.join("data")),
        ("POD_WORKSPACE", dir.join("ws")),
    ]
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A child's full name is its parent's, a dot and its slug, and may pass
/// the 64 characters a pod's own name is held to: every client command's
/// `--name` takes it and reaches that pod's socket and files.
#[test]
fn a_child_pods_full_name_reaches_it_for_every_client_command() {
    let name = format!("{}-3f2a9c.{}", "a".repeat(40), "tests-for-the-parser-x2");
    assert!(name.len() > 64);
    let script = [
        json!({"events":[{"tool_call":{"id":"call_1","name":"bash","arguments":{"command":"echo hi"}}}]}),
        json!({"events":[{"text":"ran it"}]}),
    ]
    .map(|line| line.to_string())
    .join("\n");
    let pod = Named::start(&name, &script, &["--approval", "ask"]);
    let mut watcher = Client::connect(&pod.socket_of(&name));
    watcher.until_type("snapshot");

    // `pod send` waits with the user; its hint names the pod it was given,
    // or run as printed it would reach the workspace's own pod (issue 39's
    // trial: `pod approve a1` without the child's name).
    let mut send = Command::new(POD)
        .args(["send", "--name", &name, "run it"])
        .envs(env(pod.dir.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(send.stderr.take().unwrap()));
    while !said.contains("answer with") {
        let line = lines.next().expect("pod send said no hint").unwrap();
        said.push_str(&line);
        said.push('\n');
    }
    assert!(
        said.contains(&format!(
            "answer with `pod --name {name} approve call_1` or `pod --name {name} deny call_1`"
        )) && said.contains(&format!("`pod --name {name} pending` lists what waits")),
        "{said}"
    );
    watcher.until_entry("approval_request");
    let status = succeeded(pod.pod(&["status", "--name", &name]));
    assert!(status.contains(&format!("pod        {name} ")), "{status}");
    assert!(
        status.contains(&format!("(`pod --name {name} pending` shows it)")),
        "{status}"
    );
    let pending = succeeded(pod.pod(&["pending", "--name", &name]));
    assert!(pending.contains("call_1  bash: echo hi"), "{pending}");
    succeeded(pod.pod(&["approve", "--name", &name, "call_1"]));
    watcher.until_entry("turn_end");
    assert!(send.wait().unwrap().success());
    let log = succeeded(pod.pod(&["log", "--name", &name]));
    assert!(log.contains("ran it"), "{log}");
    // Another data directory has no session of it: the error says which
    // directory it read and how to pick the pod's.
    let elsewhere = pod.dir.path().join("elsewhere");
    let output = pod.pod(&[
        "log",
        "--name",
        &name,
        "--data-dir",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&format!("in the data directory {}", elsewhere.display()))
            && stderr(&output).contains("--data-dir (or set POD_DATA_DIR)"),
        "{}",
        stderr(&output)
    );
    succeeded(pod.pod(&["stop", "--name", &name]));
    watcher.until_type("shutdown");
}

/// A child name whose parent runs but that names no child is told apart
/// from a pod that is down, and says how to list the children.
#[test]
fn a_missing_child_of_a_running_pod_says_how_to_list_its_children() {
    let pod = Named::start(
        "calc-3f2a9c",
        &json!({"events":[{"text":"hi"}]}).to_string(),
        &[],
    );
    let output = pod.pod(&["status", "--name", "calc-3f2a9c.nope"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("pod calc-3f2a9c runs, but has no child pod \"nope\"")
            && said.contains("`pod agents --name calc-3f2a9c` lists its children"),
        "{said}"
    );
    let output = pod.pod(&["status", "--name", "calc-3f2a9c."]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("a child pod's name is its parent's, a dot and its slug"));
    drop(pod);
}

/// `pod agents` lists the children (none yet), `--json` as the
/// `list_agents` array, and `pod agents rm` of a child the pod does not have
/// exits 1 with the pod's reason.
#[test]
fn agents_lists_the_children_and_rm_refuses_an_unknown_one() {
    let pod = Named::start(
        "calc-3f2a9c",
        &json!({"events":[{"text":"hi"}]}).to_string(),
        &[],
    );
    let listed = succeeded(pod.pod(&["agents", "--name", "calc-3f2a9c"]));
    assert_eq!(
        listed,
        "no child pods (a turn starts them with the spawn_agent tool)\n"
    );
    let listed = succeeded(pod.pod(&["agents", "--json", "--name", "calc-3f2a9c"]));
    assert_eq!(listed.trim(), "[]");
    let output = pod.pod(&["agents", "rm", "nope", "--name", "calc-3f2a9c"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no child pod"),
        "{}",
        stderr(&output)
    );
    let output = Named::start(
        "other-000000",
        &json!({"events":[{"text":"hi"}]}).to_string(),
        &[],
    )
    .pod(&["agents", "--name", "gone-000000"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
}

/// A real child waiting for approval: `pod list` shows it under its parent,
/// `pod agents` lists it waiting with one pending call, `pod pending` at the
/// parent names the child's call and its pod, `pod approve` at the parent
/// answers it (committed in the child's log), and `pod agents rm` removes
/// the child once idle.
#[test]
fn a_childs_approval_is_listed_and_answered_at_the_parent() {
    let lines = [
        json!({"events":[{"tool_call":{"id":"s1","name":"spawn_agent",
            "arguments":{"task":"check the tests\nthen report","name":"tests","wait":false}}}]}),
        json!({"events":[{"text":"spawned"}]}),
        json!({"agent":"tests","events":[{"tool_call":{"id":"c1","name":"bash",
            "arguments":{"command":"echo hi"}}}]}),
        json!({"agent":"tests","events":[{"text":"child done"}]}),
    ];
    let script = lines.map(|l| l.to_string()).join("\n") + "\n";
    let pod = harness::Pod::builder()
        .script(&script)
        .args(["--approval", "ask"])
        .start();
    let child = format!("{}.tests", pod.name());
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("delegate");
    client.until_with("the child's pending call", |f| {
        f["type"] == "status" && f["agents"][0]["pending_approvals"] == json!(["c1"])
    });

    let listed = succeeded(
        Command::new(POD)
            .arg("list")
            .arg("--data-dir")
            .arg(&pod.data_dir)
            .env("XDG_RUNTIME_DIR", pod.dir.path().join("no-runtime"))
            .output()
            .unwrap(),
    );
    let rows: Vec<&str> = listed.lines().collect();
    let parent_row = rows
        .iter()
        .position(|r| r.starts_with(&format!("{} ", pod.name())))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        rows[parent_row + 1].starts_with(&format!("  {child} ")),
        "{listed}"
    );

    let agents = succeeded(pod.command("agents").output().unwrap());
    let row = agents.lines().nth(1).unwrap_or_else(|| panic!("{agents}"));
    assert!(
        row.starts_with(&child)
            && row.contains(" waiting ")
            && row.ends_with("  1  check the tests"),
        "{agents}"
    );
    let json: serde_json::Value = serde_json::from_str(&succeeded(
        pod.command("agents").arg("--json").output().unwrap(),
    ))
    .unwrap();
    assert_eq!(json[0]["name"], child.as_str(), "{json}");
    assert_eq!(json[0]["task"], "check the tests\nthen report", "{json}");

    let pending = succeeded(pod.command("pending").output().unwrap());
    assert!(
        pending.contains(&format!("c1  bash: echo hi  (pod {child})")),
        "{pending}"
    );
    // Plain `pod status` at the parent says which child it waits on, lists
    // the children with their usage and waiting calls, and the tree's usage.
    let status = succeeded(pod.command("status").output().unwrap());
    assert!(
        status.contains(&format!(
            "state      waiting (0 queued): child {child} waits for approval\n"
        )),
        "{status}"
    );
    assert!(status.contains("\nagents     1 · tree "), "{status}");
    let row = status
        .lines()
        .find(|l| l.starts_with(&format!("  {child}  ")))
        .unwrap_or_else(|| panic!("no row for {child}: {status}"));
    assert!(
        row.contains("  waiting  ") && row.ends_with(" out · 1 call waiting for approval (c1)"),
        "{status}"
    );
    let output = pod
        .command("agents")
        .args(["rm", "tests"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "a waiting child is not removed"
    );
    let approved = succeeded(pod.command("approve").arg("c1").output().unwrap());
    assert!(approved.contains(&format!("(pod {child})")), "{approved}");
    client.until_with("the child idle", |f| {
        f["type"] == "status" && f["agents"][0]["state"] == "idle"
    });
    let state = pod.data_dir.join(format!("pods/{child}.json"));
    let pointer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    let log = pod.session_lines(pointer["session_id"].as_str().unwrap());
    let decision = harness::first_of(&log, "approval_decision");
    assert_eq!(decision["entry"]["client"], "pod approve", "{decision}");
    assert_eq!(decision["entry"]["call_id"], "c1", "{decision}");
    let removed = succeeded(
        pod.command("agents")
            .args(["rm", "tests"])
            .output()
            .unwrap(),
    );
    assert!(
        removed.starts_with(&format!("removed {child}")),
        "{removed}"
    );
    assert_eq!(
        succeeded(pod.command("agents").output().unwrap())
            .lines()
            .count(),
        1
    );
}
