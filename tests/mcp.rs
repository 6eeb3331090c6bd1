//! MCP servers end to end: a real `pod serve` keeping the real rmcp server
//! of `examples/mcp_test_server.rs` running, models calling its tools.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::{eventually, succeeded, Client, Pod, POD};
use serde_json::{json, Value};
use support::{data_frames, Reply, Server};

/// The test server; `cargo test` builds examples (`cargo test --test mcp`
/// alone does not).
fn test_server() -> PathBuf {
    let bin = Path::new(POD)
        .parent()
        .expect("the pod binary is in a directory")
        .join("examples/mcp_test_server");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --example mcp_test_server` (plain `cargo test` builds it)",
        bin.display()
    );
    bin
}

/// A config file naming the test server as `test` (its pids, and what its
/// `slow` tool saw, recorded in `dir`) and any `extra` tables.
fn config(dir: &Path, extra: &str) -> PathBuf {
    config_with(dir, extra, "")
}

/// [`config`], the test server also starting a child process (recorded in
/// `dir/child_pids`), as servers run by `npx` do.
fn config_with_children(dir: &Path, extra: &str) -> PathBuf {
    let env = format!(
        ", MCP_TEST_CHILD_PID_FILE = {:?}",
        dir.join("child_pids").display().to_string()
    );
    config_with(dir, extra, &env)
}

fn config_with(dir: &Path, extra: &str, more_env: &str) -> PathBuf {
    let text = format!(
        "[mcp_servers.test]\ncommand = {:?}\ntimeout_s = 20\n\
         env = {{ MCP_TEST_PID_FILE = {:?}, MCP_TEST_SLOW_FILE = {:?}{more_env} }}\n{extra}",
        test_server().display().to_string(),
        dir.join("pids").display().to_string(),
        dir.join("slow").display().to_string(),
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(dir: &Path, extra: &str, script: &str) -> Pod {
    start_with(config(dir, extra), script)
}

fn start_with(config: PathBuf, script: &str) -> Pod {
    Pod::builder()
        .script(script)
        .args(["--config", config.to_str().unwrap()])
        .start()
}

/// Kills, when dropped, the children the test servers started, whatever
/// the test did to the pod: a child outlives a server killed under it.
struct Children(PathBuf);

impl Drop for Children {
    fn drop(&mut self) {
        for pid in lines(&self.0) {
            let _ = std::process::Command::new("kill").arg(pid).output();
        }
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The greeting's entry for `name` in this snapshot.
fn server_info(snapshot: &Value, name: &str) -> Option<Value> {
    snapshot["greeting"]["mcp_servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

/// Waits until the greeting shows `name` in `state`: checks a snapshot,
/// then waits for the server's next announcement and checks a fresh one.
/// Returns the server's entry and a client connected since.
fn wait_for_state(pod: &Pod, name: &str, state: &str) -> (Value, Client) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut c = pod.client();
        let snapshot = c.until_type("snapshot");
        let info = server_info(&snapshot, name)
            .unwrap_or_else(|| panic!("no {name} in the greeting: {snapshot}"));
        if info["state"] == state {
            return (info, c);
        }
        assert!(Instant::now() < deadline, "{name} never became {state}");
        let about = format!("MCP server {name} ");
        c.until_with("an MCP notification", |f| {
            f["type"] == "notification"
                && f["source"] == "mcp"
                && f["message"].as_str().is_some_and(|m| m.starts_with(&about))
        });
    }
}

fn tool_call(name: &str, arguments: Value) -> String {
    json!({"events":[{"tool_call":{"name":name,"arguments":arguments}}]}).to_string()
}

fn text_reply(text: &str) -> String {
    json!({"events":[{"text":text}]}).to_string()
}

/// Runs one turn and returns its `tool_results` entry's first result.
fn run_turn(c: &mut Client, text: &str) -> (Value, Value) {
    c.run(text);
    let mut result = Value::Null;
    let end = c.until_with("turn_end", |f| {
        f["type"] == "entry" && f["entry"]["kind"] == "turn_end"
    });
    for frame in c.frames.iter().rev() {
        if frame["type"] == "entry" && frame["entry"]["kind"] == "tool_results" {
            result = frame["entry"]["results"][0].clone();
            break;
        }
    }
    (result, end["entry"].clone())
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses; Z is a zombie.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn a_model_calls_an_mcp_tool_sees_its_schema_and_gets_its_result() {
    let frame = |delta: Value, finish: Value| {
        json!({"choices":[{"index":0,"delta":delta,"finish_reason":finish}]}).to_string()
    };
    let call = data_frames(&[
        &frame(
            json!({"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function",
                "function":{"name":"mcp__test__echo","arguments":"{\"text\":\"hello from mcp\"}"}}]}),
            Value::Null,
        ),
        &frame(json!({}), json!("tool_calls")),
        "[DONE]",
    ]);
    let answer = data_frames(&[
        &frame(
            json!({"role":"assistant","content":"It echoed."}),
            json!("stop"),
        ),
        "[DONE]",
    ]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::start(vec![Reply::sse(&call), Reply::sse(&answer)]));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", server.url),
            "--config",
            config.to_str().unwrap(),
        ])
        .start();
    let (info, mut c) = wait_for_state(&pod, "test", "ready");
    assert_eq!(info["tools"], 8, "{info}");
    assert!(info.get("error").is_none(), "{info}");

    let (result, end) = run_turn(&mut c, "echo something");
    assert_eq!(end["reason"], "completed");
    assert_eq!(result["output"], "hello from mcp");
    assert_eq!(result["is_error"], false);
    let logged = pod.log_lines();
    assert!(logged.iter().any(|l| l["entry"]["kind"] == "tool_results"
        && l["entry"]["results"][0]["output"] == "hello from mcp"));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].json();
    let tool_message = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message")
        .clone();
    assert_eq!(tool_message["content"], "hello from mcp");
    let first = requests[0].json();
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__test__echo")
        .unwrap_or_else(|| {
            let names: Vec<&Value> = first["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| &t["function"]["name"])
                .collect();
            panic!("no mcp__test__echo among the tools: {names:?}")
        })
        .clone();
    assert_eq!(
        echo["function"]["description"],
        "Returns its text unchanged."
    );
    assert_eq!(
        echo["function"]["parameters"],
        json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]})
    );
}

#[test]
fn a_killed_server_is_restarted_and_the_next_call_works() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__test__pid", json!({})),
        text_reply("noted"),
        tool_call("mcp__test__echo", json!({"text": "back again"})),
        text_reply("done"),
    ]
    .join("\n");
    let _children = Children(dir.path().join("child_pids"));
    let pod = start_with(config_with_children(dir.path(), ""), &script);
    let (_, mut c) = wait_for_state(&pod, "test", "ready");
    let (result, _) = run_turn(&mut c, "which pid?");
    let first: u32 = result["output"].as_str().unwrap().parse().unwrap();
    assert_eq!(lines(&dir.path().join("pids")), [first.to_string()]);

    succeeded(
        std::process::Command::new("kill")
            .args(["-9", &first.to_string()])
            .output()
            .unwrap(),
    );
    let exited = c.until(|f| {
        f["type"] == "notification"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains("MCP server test exited"))
    });
    assert_eq!(exited["level"], "warn");
    c.until(|f| {
        f["type"] == "notification"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("MCP server test is ready"))
    });
    let pids = lines(&dir.path().join("pids"));
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_ne!(pids[1], first.to_string());
    let orphan: u32 = lines(&dir.path().join("child_pids"))[0].parse().unwrap();
    eventually(
        "the dead server's child to be killed",
        Duration::from_secs(5),
        || !alive(orphan),
    );

    let (result, end) = run_turn(&mut c, "echo");
    assert_eq!(end["reason"], "completed");
    assert_eq!(result["output"], "back again", "{result}");
    assert_eq!(result["is_error"], false);
}

#[test]
fn a_server_that_cannot_start_is_failed_and_its_tools_answer_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__broken__anything", json!({})),
        text_reply("oh well"),
    ]
    .join("\n");
    let pod = start(
        dir.path(),
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        &script,
    );
    let (info, mut c) = wait_for_state(&pod, "broken", "failed");
    let error = info["error"].as_str().unwrap().to_owned();
    assert!(error.contains("/nonexistent/mcp-server"), "{error}");
    assert!(error.contains("no such program"), "{error}");
    assert_eq!(info["tools"], 0);

    let status = succeeded(pod.command("status").output().unwrap());
    assert!(
        status.contains("broken  failed: cannot start `/nonexistent/mcp-server`"),
        "{status}"
    );

    let (result, end) = run_turn(&mut c, "use the broken server");
    assert_eq!(end["reason"], "completed");
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("MCP server broken is failed"), "{output}");
    assert!(output.contains("no such program"), "{output}");
}

#[test]
fn cancelling_a_slow_call_ends_the_turn_promptly_and_the_server_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__test__slow", json!({"seconds": 60})),
        text_reply("never"),
    ]
    .join("\n");
    let pod = start(dir.path(), "", &script);
    let (_, mut c) = wait_for_state(&pod, "test", "ready");
    c.run("take your time");
    let slow = dir.path().join("slow");
    eventually(
        "the server to start the call",
        Duration::from_secs(10),
        || lines(&slow) == ["started"],
    );
    let asked = Instant::now();
    c.send(json!({"type":"cancel"}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "cancelled");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "the turn took {:?} to end",
        asked.elapsed()
    );
    eventually("the server to be told", Duration::from_secs(5), || {
        lines(&slow) == ["started", "cancelled"]
    });
    let results = pod
        .log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "tool_results")
        .expect("the call was answered");
    let result = &results["entry"]["results"][0];
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(
        output.ends_with("[cancelled: abandoned; the server may have completed it]"),
        "{output}"
    );
}

/// Trust item 21: `rmcp` drops a message over 16 MiB without a word, so a
/// call answered with one waited for its timeout and was reported as one.
#[test]
fn a_reply_too_large_to_take_ends_the_call_at_once_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__test__huge", json!({"bytes": 17 << 20})),
        text_reply("done"),
    ]
    .join("\n");
    let pod = start(dir.path(), "", &script);
    let (_, mut c) = wait_for_state(&pod, "test", "ready");
    let asked = Instant::now();
    let (result, end) = run_turn(&mut c, "fetch it all");
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "the call took {:?} (the server's timeout is 20 s)",
        asked.elapsed()
    );
    assert_eq!(end["reason"], "completed");
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("larger than 16 MiB"), "{output}");
    // The server is still there for the next call.
    wait_for_state(&pod, "test", "ready");
}

#[test]
fn a_changed_tool_list_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__test__grow", json!({})),
        text_reply("grown"),
        tool_call("mcp__test__extra", json!({})),
        text_reply("used it"),
    ]
    .join("\n");
    let pod = start(dir.path(), "", &script);
    let (info, mut c) = wait_for_state(&pod, "test", "ready");
    assert_eq!(info["tools"], 8);
    let (result, _) = run_turn(&mut c, "grow");
    assert_eq!(result["output"], "grown");
    eventually(
        "the greeting to count the new tool",
        Duration::from_secs(10),
        || {
            let snapshot = pod.client().until_type("snapshot");
            server_info(&snapshot, "test").is_some_and(|s| s["tools"] == 9)
        },
    );
    let (result, _) = run_turn(&mut c, "use the new tool");
    assert_eq!(result["output"], "extra", "{result}");
    assert_eq!(result["is_error"], false);
}

#[test]
fn pod_stop_leaves_no_mcp_server_process_running() {
    let dir = tempfile::tempdir().unwrap();
    let _children = Children(dir.path().join("child_pids"));
    let mut pod = start_with(config_with_children(dir.path(), ""), &text_reply("hi"));
    wait_for_state(&pod, "test", "ready");
    let server: u32 = lines(&dir.path().join("pids"))[0].parse().unwrap();
    let child: u32 = lines(&dir.path().join("child_pids"))[0].parse().unwrap();
    assert!(alive(server) && alive(child));
    succeeded(pod.command("stop").output().unwrap());
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
    eventually(
        "the server and its child to be gone",
        Duration::from_secs(5),
        || !alive(server) && !alive(child),
    );
    let stderr = {
        let mut text = String::new();
        if let Some(mut err) = pod.child.stderr.take() {
            std::io::Read::read_to_string(&mut err, &mut text).unwrap();
        }
        text
    };
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn mcp_calls_go_through_approvals_like_any_tool() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        tool_call("mcp__test__echo", json!({"text": "allowed"})),
        text_reply("ok"),
        tool_call("mcp__test__add", json!({"a": 1, "b": 2})),
        text_reply("ok"),
    ]
    .join("\n");
    let config = config(dir.path(), "");
    let pod = Pod::builder()
        .script(&script)
        .args([
            "--config",
            config.to_str().unwrap(),
            "--approval",
            "ask",
            "--allow",
            "mcp__test__echo:*",
        ])
        .start();
    let (_, mut c) = wait_for_state(&pod, "test", "ready");
    let (result, _) = run_turn(&mut c, "echo, allowed by a rule");
    assert_eq!(result["output"], "allowed");
    assert!(!pod
        .log_lines()
        .iter()
        .any(|l| l["entry"]["kind"] == "approval_request"));

    c.run("add, which asks");
    let request = c.until_entry("approval_request");
    assert_eq!(request["entry"]["tool"], "mcp__test__add");
    let call_id = request["entry"]["call_id"].clone();
    // An approve is taken once the status says the request is pending.
    let pending = |f: &Value| {
        f["type"] == "status"
            && f["pending_approvals"]
                .as_array()
                .is_some_and(|p| p.contains(&call_id))
    };
    if !c.frames.iter().any(pending) {
        c.until(pending);
    }
    c.send(json!({"type":"approve","call_id":call_id,"decision":"allow"}));
    let result = c.until_entry("tool_results");
    assert_eq!(result["entry"]["results"][0]["output"], "3");
}

#[test]
fn a_call_over_the_servers_timeout_is_an_error_and_the_server_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let quick = format!(
        "[mcp_servers.quick]\ncommand = {:?}\ntimeout_s = 1\nenv = {{ MCP_TEST_SLOW_FILE = {:?} }}\n",
        test_server().display().to_string(),
        dir.path().join("quick_slow").display().to_string(),
    );
    let script = [
        tool_call("mcp__quick__slow", json!({"seconds": 30})),
        text_reply("too slow"),
    ]
    .join("\n");
    let pod = start(dir.path(), &quick, &script);
    let (_, mut c) = wait_for_state(&pod, "quick", "ready");
    let started = Instant::now();
    let (result, end) = run_turn(&mut c, "slow");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(end["reason"], "completed");
    assert_eq!(result["is_error"], true);
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("MCP server quick did not answer within 1 s"),
        "{output}"
    );
    eventually("the server to be told", Duration::from_secs(5), || {
        lines(&dir.path().join("quick_slow")) == ["started", "cancelled"]
    });
}

#[test]
fn a_killed_pod_takes_its_mcp_servers_with_it() {
    let dir = tempfile::tempdir().unwrap();
    // A server that would outlive its stdin closing.
    let linger = format!(
        "[mcp_servers.linger]\ncommand = {:?}\nenv = {{ MCP_TEST_LINGER = \"1\", MCP_TEST_PID_FILE = {:?} }}\n",
        test_server().display().to_string(),
        dir.path().join("linger_pids").display().to_string(),
    );
    let mut pod = start(dir.path(), &linger, &text_reply("hi"));
    wait_for_state(&pod, "linger", "ready");
    let server: u32 = lines(&dir.path().join("linger_pids"))[0].parse().unwrap();
    pod.kill9();
    eventually(
        "the server to die with the pod",
        Duration::from_secs(5),
        || !alive(server),
    );
}
