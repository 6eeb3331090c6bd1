//! The `bash` sandbox through a real `pod serve`: scripted `bash` calls whose
//! writes and connections the kernel allows or refuses, checked on disk and
//! on a real TCP listener; and the command dying with a `kill -9`ed pod.
//!
//! Every test runs in a directory under the target directory, not under
//! `/tmp`, because `/tmp` is writable in `workspace-write` mode: a "directory
//! outside" in `/tmp` would prove nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use harness::{eventually, Pod};
use landlock::{
    AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetStatus, ABI,
};
use serde_json::{json, Value};

/// Why this kernel cannot enforce what a test needs, if it cannot: checked
/// with the landlock crate directly, on a throwaway thread, independently of
/// the pod's own probe.
fn landlock_missing(network: bool) -> Option<String> {
    let attempt = std::thread::spawn(move || {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_write(ABI::V3))?;
        if network {
            ruleset = ruleset.handle_access(AccessNet::ConnectTcp)?;
        }
        ruleset.create()?.restrict_self()
    })
    .join()
    .unwrap();
    match attempt {
        Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => None,
        Ok(status) => Some(format!("Landlock only partly enforced: {status:?}")),
        Err(e) => Some(format!("Landlock unavailable: {e}")),
    }
}

/// Skips a test on a kernel without Landlock — except under `CI`, where a
/// missing sandbox must fail loudly: a green run would otherwise say the
/// sandbox holds when nothing checked it.
macro_rules! require_landlock {
    ($network:expr) => {
        if let Some(reason) = landlock_missing($network) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set, so this test may not skip: this kernel cannot run it ({reason})"
            );
            eprintln!("skipping: this kernel cannot run the test ({reason})");
            return;
        }
    };
}

/// The fake `$HOME`, the fake `$TMPDIR` and another directory, siblings of
/// the pod's workspace, in a test directory outside `/tmp` and `$TMPDIR`.
struct Dirs {
    home: PathBuf,
    tmpdir: PathBuf,
    outside: PathBuf,
}

fn bash_call(command: &str) -> String {
    json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":command}}}]})
        .to_string()
}

fn text(reply: &str) -> String {
    json!({"events":[{"text":reply}]}).to_string()
}

/// Starts a pod with `HOME` and `TMPDIR` pointing at the fakes.
fn start(args: &[&str], script: &[String]) -> (Pod, Dirs) {
    start_with(args, &[], "", script)
}

/// [`start`] with environment variables and a config file.
fn start_with(args: &[&str], env: &[(&str, &str)], config: &str, script: &[String]) -> (Pod, Dirs) {
    let dir = tempfile::tempdir_in(harness::outside_temp_dirs()).unwrap();
    std::fs::create_dir_all(dir.path().join("config/pod")).unwrap();
    std::fs::write(dir.path().join("config/pod/config.toml"), config).unwrap();
    let root = dir.path().canonicalize().unwrap();
    let system_tmp = std::env::temp_dir().canonicalize().unwrap();
    assert!(
        !root.starts_with("/tmp") && !root.starts_with(&system_tmp),
        "the test directory {} must not be under a temp directory the sandbox allows",
        root.display()
    );
    let sub = |name: &str| {
        let path = root.join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    };
    let dirs = Dirs {
        home: sub("home"),
        tmpdir: sub("tmpdir"),
        outside: sub("outside"),
    };
    let mut builder = Pod::builder()
        .in_dir(dir)
        .env("HOME", dirs.home.to_str().unwrap())
        .env("TMPDIR", dirs.tmpdir.to_str().unwrap())
        .script(&script.join("\n"));
    for arg in args {
        builder = builder.arg(*arg);
    }
    for (key, value) in env {
        builder = builder.env(key, value);
    }
    (builder.start(), dirs)
}

/// Runs one turn and returns its first tool result.
fn turn(pod: &Pod, prompt: &str) -> Value {
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run(prompt);
    let results = client.until_entry("tool_results");
    client.until_entry("turn_end");
    results["entry"]["results"][0].clone()
}

/// The greeting's `sandbox`, as a client sees it.
fn greeting_sandbox(pod: &Pod) -> Value {
    pod.client().until_type("snapshot")["greeting"]["sandbox"].clone()
}

fn output(result: &Value) -> &str {
    result["output"].as_str().unwrap()
}

/// A `/tmp` file name no other test run uses, removed when dropped.
struct TmpFile(PathBuf);

impl TmpFile {
    fn new() -> Self {
        TmpFile(PathBuf::from(format!(
            "/tmp/pod-sandbox-test-{}",
            uuid::Uuid::new_v4()
        )))
    }
}

impl Drop for TmpFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A command writing to every kind of place: the workspace (its cwd), `/tmp`,
/// `$TMPDIR`, `$HOME`, a sibling of the workspace (directly and from a
/// grandchild process) and `/dev`.
fn write_everywhere(tmp: &TmpFile) -> String {
    format!(
        "touch in-workspace; touch {tmp}; touch \"$TMPDIR/in-tmpdir\"; \
         touch \"$HOME/in-home\"; touch ../outside/direct; \
         sh -c 'sh -c \"touch ../outside/grandchild\"'; echo hi > /dev/null && echo finished",
        tmp = tmp.0.display(),
    )
}

#[test]
fn workspace_write_allows_the_workspace_and_temp_dirs_and_refuses_elsewhere() {
    require_landlock!(false);
    let tmp = TmpFile::new();
    let script = [
        bash_call(&write_everywhere(&tmp)),
        text("done"),
        text("again"),
    ];
    let (pod, d) = start(&[], &script);
    assert_eq!(
        greeting_sandbox(&pod),
        json!({"mode": "workspace-write", "available": true, "network": true})
    );
    let result = turn(&pod, "write around");
    let out = output(&result);
    assert!(pod.workspace.join("in-workspace").exists(), "{out}");
    assert!(tmp.0.exists(), "/tmp must be writable: {out}");
    assert!(
        d.tmpdir.join("in-tmpdir").exists(),
        "$TMPDIR must be writable: {out}"
    );
    assert!(!d.home.join("in-home").exists(), "$HOME was written: {out}");
    assert!(
        !d.outside.join("direct").exists(),
        "outside was written: {out}"
    );
    assert!(
        !d.outside.join("grandchild").exists(),
        "a grandchild escaped the sandbox: {out}"
    );
    assert!(out.contains("Permission denied"), "{out}");
    assert!(out.contains("finished"), "/dev must be writable: {out}");
    assert!(
        out.lines().last().unwrap().starts_with(
            "[sandbox: the pod's sandbox lets this command write only inside the workspace"
        ),
        "the model is told why: {out}"
    );

    // The pod itself is not confined: its data directory is outside every
    // writable path, and it still commits this turn and the next one.
    let log = pod.log_lines();
    assert_eq!(log.last().unwrap()["entry"]["kind"], "turn_end");
    let before = log.len();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("again");
    client.until_entry("turn_end");
    assert!(pod.log_lines().len() > before);
}

#[test]
fn read_only_refuses_the_workspace_too_and_the_file_tools_fail() {
    require_landlock!(false);
    let tmp = TmpFile::new();
    let write_file = json!({"events":[{"tool_call":{"id":"c2","name":"write_file",
        "arguments":{"path":"by-write-file","content":"x"}}}]})
    .to_string();
    let script = [
        bash_call(&write_everywhere(&tmp)),
        text("done"),
        write_file,
        text("done"),
    ];
    let (pod, d) = start(&["--sandbox", "read-only"], &script);
    let result = turn(&pod, "write around");
    let out = output(&result);
    assert!(!pod.workspace.join("in-workspace").exists(), "{out}");
    assert!(!tmp.0.exists(), "/tmp was written: {out}");
    assert!(!d.tmpdir.join("in-tmpdir").exists(), "{out}");
    assert!(!d.home.join("in-home").exists(), "{out}");
    assert!(!d.outside.join("direct").exists(), "{out}");
    assert!(!d.outside.join("grandchild").exists(), "{out}");
    assert!(out.contains("finished"), "/dev stays writable: {out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("[sandbox: the pod's sandbox is read-only"),
        "{out}"
    );

    let result = turn(&pod, "write a file");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(output(&result).contains("--sandbox read-only"), "{result}");
    assert!(!pod.workspace.join("by-write-file").exists());
}

#[test]
fn off_allows_writing_anywhere() {
    let tmp = TmpFile::new();
    let script = [bash_call(&write_everywhere(&tmp)), text("done")];
    let (pod, d) = start_with(&[], &[("POD_SANDBOX", "off")], "", &script);
    assert_eq!(
        greeting_sandbox(&pod),
        json!({"mode": "off", "available": true, "network": true})
    );
    let result = turn(&pod, "write around");
    let out = output(&result);
    assert!(pod.workspace.join("in-workspace").exists(), "{out}");
    assert!(tmp.0.exists(), "{out}");
    assert!(d.home.join("in-home").exists(), "{out}");
    assert!(d.outside.join("direct").exists(), "{out}");
    assert!(d.outside.join("grandchild").exists(), "{out}");
    assert!(!out.contains("[sandbox:"), "{out}");
}

/// Connects with bash's `/dev/tcp` to a listener the test holds; returns
/// the greeting's `sandbox`, the command's output and whether the listener
/// saw a connection.
fn connect(args: &[&str], config: &str) -> (Value, String, bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
    let (pod, _d) = start_with(args, &[], config, &[bash_call(&command), text("done")]);
    let sandbox = greeting_sandbox(&pod);
    let out = output(&turn(&pod, "connect")).to_owned();
    listener.set_nonblocking(true).unwrap();
    // The handshake completed before bash printed anything, so a connection
    // that happened is already queued.
    (sandbox, out, listener.accept().is_ok())
}

#[test]
fn network_off_refuses_tcp_connections_and_on_allows_them() {
    require_landlock!(true);
    let (sandbox, out, accepted) = connect(&[], "sandbox_network = false\n");
    assert_eq!(
        sandbox,
        json!({"mode": "workspace-write", "available": true, "network": false})
    );
    assert!(!accepted, "the listener was reached: {out}");
    assert!(!out.contains("CONNECTED"), "{out}");
    assert!(out.contains("network connections are refused"), "{out}");

    let (sandbox, out, accepted) =
        connect(&["--sandbox-network", "on"], "sandbox_network = \"off\"\n");
    assert_eq!(sandbox["network"], true, "the flag wins over the file");
    assert!(accepted, "{out}");
    assert!(out.contains("CONNECTED"), "{out}");
}

/// `(pid, state, ppid, pgrp)` of every process, from `/proc`.
fn processes() -> Vec<(i32, char, i32, i32)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp …": comm may hold spaces and parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(state), Some(ppid), Some(pgrp)) = (
            fields.first().and_then(|s| s.chars().next()),
            fields.get(1).and_then(|s| s.parse().ok()),
            fields.get(2).and_then(|s| s.parse().ok()),
        ) {
            all.push((pid, state, ppid, pgrp));
        }
    }
    all
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Everything the command started goes: `bash` by its parent-death signal,
/// the `&` jobs and the pipeline `bash` forked by the reaper.
#[test]
fn a_killed_pod_takes_its_running_command_with_it() {
    let (mut pod, _d) = start(
        &[],
        &[
            bash_call("sleep 301 & sleep 302 | cat & sleep 303; wait"),
            text("done"),
        ],
    );
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("sleep");
    client.until_entry("assistant_items");
    let pod_pid = pod.pid() as i32;
    let mut group = None;
    eventually("the command runs", Duration::from_secs(10), || {
        let all = processes();
        group = all
            .iter()
            .find(|&&(pid, _, ppid, _)| ppid == pod_pid && comm(pid) == "bash")
            .map(|&(_, _, _, pgrp)| pgrp)
            .filter(|&g| {
                all.iter()
                    .filter(|&&(pid, _, _, pgrp)| pgrp == g && comm(pid) == "sleep")
                    .count()
                    == 3
            });
        group.is_some()
    });
    let group = group.unwrap();
    pod.kill9();
    let alive = || {
        processes()
            .into_iter()
            .filter(|&(_, state, _, pgrp)| pgrp == group && state != 'Z')
            .count()
    };
    let gone = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        alive() == 0
    });
    if !gone {
        if let Some(pid) = rustix::process::Pid::from_raw(group) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::Kill);
        }
    }
    assert!(gone, "the command's process group outlived the pod");
}
