//! Child pods (subagents): a parent's `spawn_agent` starts a whole pod in
//! the same process, with its own log and socket; the parent shows the
//! children's status, usage and approvals, and real clients talk to each
//! child on its own socket. The script provider serves parent and children
//! by `agent` slug, so every interleaving is scripted.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{eventually, kinds, Client, Pod};
use serde_json::{json, Value};

/// A script line for the top pod.
fn top(events: Value) -> String {
    json!({ "events": events }).to_string()
}

/// A script line for the child with this slug.
fn child(slug: &str, events: Value) -> String {
    json!({ "agent": slug, "events": events }).to_string()
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"tool_call": {"id": id, "name": name, "arguments": arguments}})
}

fn script(lines: &[String]) -> String {
    lines.join("\n") + "\n"
}

/// A child's full name.
fn child_name(pod: &Pod, slug: &str) -> String {
    format!("{}.{slug}", pod.name())
}

/// The parent's name in tests that give one (scripts name its children).
const NAME: &str = "calc";

/// A pod named [`NAME`], on this script, with these flags.
fn named(script_lines: &[String], args: &[&str]) -> harness::PodBuilder {
    let mut builder = Pod::builder()
        .script(&script(script_lines))
        .args(["--name", NAME]);
    for arg in args {
        builder = builder.arg(*arg);
    }
    builder
}

/// The current log of the pod called `name` (a child's included).
fn log_of(pod: &Pod, name: &str) -> Vec<Value> {
    let state = pod.data_dir.join(format!("pods/{name}.json"));
    let pointer: Value = serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    pod.session_lines(pointer["session_id"].as_str().unwrap())
}

/// The socket of the pod called `name`, beside the top pod's.
fn socket_of(pod: &Pod, name: &str) -> std::path::PathBuf {
    pod.socket.with_file_name(format!("{name}.sock"))
}

/// A client of the pod called `name` that said who it is.
fn client_of(pod: &Pod, name: &str, label: &str) -> Client {
    let socket = if name == NAME {
        pod.socket.clone()
    } else {
        socket_of(pod, name)
    };
    let mut client = Client::connect(&socket);
    client.until_type("snapshot");
    client.send(json!({"type": "hello", "client": label}));
    client
}

/// Waits until `name`'s log holds an entry this predicate accepts.
fn until_logged(pod: &Pod, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut found = None;
    eventually(what, Duration::from_secs(20), || {
        let state = pod.data_dir.join(format!("pods/{name}.json"));
        if !state.exists() {
            return false;
        }
        found = log_of(pod, name).into_iter().find(|l| pred(&l["entry"]));
        found.is_some()
    });
    found.unwrap()
}

fn approval_decision(log: &[Value], call_id: &str) -> Value {
    log.iter()
        .find(|l| l["entry"]["kind"] == "approval_decision" && l["entry"]["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no decision for {call_id} in {:?}", kinds(log)))["entry"]
        .clone()
}

fn bash(id: &str, command: &str) -> Value {
    call(id, "bash", json!({"command": command}))
}

/// A child's current log lines, from its state file.
fn child_log(pod: &Pod, slug: &str) -> Vec<Value> {
    let state = pod
        .data_dir
        .join(format!("pods/{}.json", child_name(pod, slug)));
    let pointer: Value = serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    pod.session_lines(pointer["session_id"].as_str().unwrap())
}

/// The output of the tool result answering `call_id` in these log lines.
fn result_of(log: &[Value], call_id: &str) -> Value {
    log.iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .flat_map(|l| l["entry"]["results"].as_array().unwrap().clone())
        .find(|r| r["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id} in {:?}", kinds(log)))
}

/// Reads a client's frames until its pod's turn ends.
fn until_turn_end(client: &mut Client) -> Value {
    client.until_entry("turn_end")
}

#[test]
fn a_parent_spawns_two_children_in_the_background_and_waits_for_both() {
    let pod = Pod::builder()
        .script(&script(&[
            top(json!([
                call("s1", "spawn_agent", json!({"task": "task one", "name": "one", "wait": false})),
                call("s2", "spawn_agent", json!({"task": "task two", "name": "two", "wait": false})),
            ])),
            top(json!([call("w1", "wait_agents", json!({"names": ["one", "two"]}))])),
            top(json!([{"text": "both done"}])),
            child("one", json!([{"text": "answer one"}, {"usage": {"input_tokens": 10, "output_tokens": 5}}])),
            child("two", json!([{"text": "answer two"}, {"usage": {"input_tokens": 20, "output_tokens": 7}}])),
        ]))
        .start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("delegate");
    let end = until_turn_end(&mut client);
    assert_eq!(end["entry"]["reason"], "completed", "{end}");
    let log = pod.log_lines();
    let k = kinds(&log);
    assert_eq!(
        k.iter().filter(|k| *k == "agent_started").count(),
        2,
        "{k:?}"
    );
    assert_eq!(
        k.iter().filter(|k| *k == "agent_turn_end").count(),
        2,
        "{k:?}"
    );
    // Without wait, spawn_agent answers at once with the child's name.
    let spawned = result_of(&log, "s1");
    assert!(
        spawned["output"]
            .as_str()
            .unwrap()
            .contains(&child_name(&pod, "one")),
        "{spawned}"
    );
    // wait_agents returns both children's final text, after both ended.
    let waited = result_of(&log, "w1");
    let text = waited["output"].as_str().unwrap();
    assert!(
        text.contains("answer one") && text.contains("answer two"),
        "{text}"
    );
    let waited_at = log
        .iter()
        .position(|l| {
            l["entry"]["kind"] == "tool_results" && l["entry"]["results"][0]["call_id"] == "w1"
        })
        .unwrap();
    let last_agent_end = log
        .iter()
        .rposition(|l| l["entry"]["kind"] == "agent_turn_end")
        .unwrap();
    assert!(last_agent_end < waited_at, "{k:?}");
    // Each child's log starts with its parent, then the task as its input.
    let one = child_log(&pod, "one");
    assert_eq!(one[0]["entry"]["parent"]["call_id"], "s1", "{}", one[0]);
    assert_eq!(one[0]["entry"]["parent"]["pod"], pod.name(), "{}", one[0]);
    let input = harness::first_of(&one, "user_input");
    assert_eq!(
        input["entry"]["segments"],
        json!([{"type": "text", "text": "task one"}])
    );
    let environment = harness::first_of(&one, "environment");
    assert!(
        environment["entry"]["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("parent: {}", pod.name())),
        "{environment}"
    );
    // The parent's status shows both children and the tree's usage.
    let mut status_client = pod.client();
    let snapshot = status_client.until_type("snapshot");
    let agents = snapshot["status"]["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{snapshot}");
    assert_eq!(agents[0]["name"], child_name(&pod, "one"));
    assert_eq!(agents[0]["state"], "idle");
    assert_eq!(agents[1]["usage"]["input_tokens"], 20);
    let tree = &snapshot["status"]["tree_usage"];
    assert_eq!(tree["input_tokens"], 30, "{tree}");
    assert_eq!(tree["output_tokens"], 12, "{tree}");
}

#[test]
fn a_childs_approvals_are_answered_at_the_parent_and_at_the_child() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "build", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", json!([bash("c1", "touch one")])),
            child("w", json!([bash("c2", "touch two")])),
            child("w", json!([{"text": "child done"}])),
        ],
        &["--approval", "ask"],
    )
    .start();
    let child = format!("{NAME}.w");
    let mut parent = client_of(&pod, NAME, "parent-screen");
    parent.run("delegate");
    // The child's request shows at the parent: waiting, its call id pending.
    let waiting = parent.until_with("the child's request at the parent", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c1"])
    });
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    assert_eq!(waiting["agents"][0]["pending_approvals"], json!(["c1"]));
    parent
        .send(json!({"type": "approve", "request_id": "a1", "call_id": "c1", "decision": "allow"}));
    let answer = parent.until_with("the answer", |v| {
        v["type"] == "response" || v["type"] == "error"
    });
    assert_eq!(answer["ok"], true, "{answer}");
    // The second is answered at the child's own socket.
    let mut at_child = client_of(&pod, &child, "child-screen");
    at_child.until_with("c2 requested", |v| {
        v["type"] == "entry"
            && v["entry"]["kind"] == "approval_request"
            && v["entry"]["call_id"] == "c2"
    });
    at_child
        .send(json!({"type": "approve", "request_id": "a2", "call_id": "c2", "decision": "allow"}));
    parent.until_entry("turn_end");
    let log = log_of(&pod, &child);
    let first = approval_decision(&log, "c1");
    assert_eq!(first["client"], "parent-screen", "{first}");
    assert_eq!(first["by"], "user");
    assert_eq!(approval_decision(&log, "c2")["client"], "child-screen");
    assert!(pod.workspace.join("one").exists() && pod.workspace.join("two").exists());
    // Decisions are the child's: none is in the parent's log.
    assert!(!kinds(&log_of(&pod, NAME)).contains(&"approval_decision".to_owned()));
    // A second answer to a decided call is refused, at either pod.
    parent
        .send(json!({"type": "approve", "request_id": "a3", "call_id": "c1", "decision": "deny"}));
    let late = parent.until_with("the late answer", |v| v["request_id"] == "a3");
    assert_eq!(late["code"], "not_pending", "{late}");
}

#[test]
fn a_childs_bash_cannot_approve_its_own_request_at_either_socket() {
    let approve = |socket: &str| {
        format!(
            "'{}' approve c2 --socket '{socket}'; echo \"exit $?\"",
            env!("CARGO_BIN_EXE_pod")
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let parent_socket = dir.path().join("run/pod.sock");
    let child_socket = dir.path().join(format!("run/{NAME}.w.sock"));
    let command = format!(
        "{}; {}",
        approve(&parent_socket.display().to_string()),
        approve(&child_socket.display().to_string())
    );
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child(
                "w",
                json!([
                    bash("c1", &command),
                    call(
                        "c2",
                        "write_file",
                        json!({"path": "forged", "content": "x"})
                    ),
                ]),
            ),
            child("w", json!([{"text": "child done"}])),
        ],
        &[
            "--approval",
            "ask",
            "--allow",
            "bash:*",
            "--sandbox-unix-sockets",
            "on",
        ],
    )
    .in_dir(dir)
    .start();
    let child = format!("{NAME}.w");
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    let result = until_logged(&pod, &child, "c1's result", |e| {
        e["kind"] == "tool_results" && e["results"][0]["call_id"] == "c1"
    });
    let output = result["entry"]["results"][0]["output"].as_str().unwrap();
    assert_eq!(output.matches("may only read").count(), 2, "{output}");
    assert!(!output.contains("exit 0"), "{output}");
    // Still pending, at both: only a person decides it.
    let snapshot = Client::connect(&pod.socket).until_type("snapshot");
    assert_eq!(
        snapshot["status"]["pending_approvals"],
        json!(["c2"]),
        "{snapshot}"
    );
    assert!(!pod.workspace.join("forged").exists());
    parent.send(json!({"type": "approve", "call_id": "c2", "decision": "deny"}));
    parent.until_entry("turn_end");
    assert_eq!(
        approval_decision(&log_of(&pod, &child), "c2")["client"],
        "person"
    );
}

#[test]
fn a_person_steers_a_child_on_its_socket_and_a_sibling_reads_its_input_mid_turn() {
    let pod = named(
        &[
            top(json!([
                call("s1", "spawn_agent", json!({"task": "slow task for a", "name": "a", "wait": false})),
                call("s2", "spawn_agent", json!({"task": "look at a", "name": "b"})),
            ])),
            top(json!([{"text": "parent done"}])),
            child("a", json!([{"delay_ms": 60000}, {"text": "late"}])),
            child("a", json!([{"text": "steered"}])),
            child("b", json!([{"delay_ms": 300}, call("r1", "read_agent", json!({"name": format!("{NAME}.a")}))])),
            child("b", json!([{"text": "b done"}])),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    // b read a's log over a's socket while a's turn ran: its input is there.
    let b = log_of(&pod, &format!("{NAME}.b"));
    let read = result_of(&b, "r1");
    let text = read["output"].as_str().unwrap();
    assert!(text.contains("user: slow task for a"), "{text}");
    assert!(text.contains("state running"), "{text}");
    // A person types into a directly: queued behind its running turn.
    let mut at_a = client_of(&pod, &format!("{NAME}.a"), "person");
    at_a.run("a correction");
    at_a.until_with("queued", |v| v["type"] == "response" && v["queued"] == 1);
    at_a.send(json!({"type": "cancel"}));
    at_a.until_with("the correction's turn", |v| {
        v["type"] == "entry"
            && v["entry"]["kind"] == "assistant_items"
            && v["entry"]["items"][0]["text"] == "steered"
    });
    let a = log_of(&pod, &format!("{NAME}.a"));
    let inputs: Vec<&Value> = a
        .iter()
        .filter(|l| l["entry"]["kind"] == "user_input")
        .collect();
    assert_eq!(inputs[1]["entry"]["segments"][0]["text"], "a correction");
    // The parent hears of each of a's turns.
    until_logged(&pod, NAME, "a's second turn end at the parent", |e| {
        e["kind"] == "agent_turn_end" && e["text"] == "steered"
    });
}

#[test]
fn cancelling_the_parents_turn_cancels_the_child_it_waits_on() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "slow", "name": "w"})
            )])),
            child(
                "w",
                json!([{"text": "thinking"}, {"delay_ms": 60000}, {"text": "never"}]),
            ),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_with("the child running", |v| {
        v["type"] == "status" && v["agents"][0]["state"] == "running"
    });
    until_logged(&pod, &format!("{NAME}.w"), "the child's input", |e| {
        e["kind"] == "user_input"
    });
    parent.send(json!({"type": "cancel"}));
    let end = parent.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "cancelled", "{end}");
    let child_end = until_logged(&pod, &format!("{NAME}.w"), "the child's end", |e| {
        e["kind"] == "turn_end"
    });
    assert_eq!(child_end["entry"]["reason"], "cancelled", "{child_end}");
    let spawned = result_of(&log_of(&pod, NAME), "s1");
    assert!(
        spawned["output"].as_str().unwrap().contains("cancelled"),
        "{spawned}"
    );
}

#[test]
fn a_child_waiting_for_approval_survives_kill_9_and_is_answered_at_the_parent() {
    let child_lines = |first: Value| {
        vec![
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", first),
            child("w", json!([{"text": "child done"}])),
        ]
    };
    let mut pod = named(
        &child_lines(json!([bash("c1", "touch approved")])),
        &["--approval", "ask"],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_with("the child waiting", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c1"])
    });
    pod.kill9();
    let dir = pod.into_dir();
    // Started again, the child's script goes on after its tool call.
    let pod = named(
        &child_lines(json!([{"text": "child done"}])),
        &["--approval", "ask"],
    )
    .in_dir(dir)
    .start();
    let mut parent = Client::connect(&pod.socket);
    parent.until_type("snapshot");
    parent.send(json!({"type": "hello", "client": "after-restart"}));
    let mut waiting = None;
    eventually("the child waiting again", Duration::from_secs(20), || {
        let snapshot = Client::connect(&pod.socket).until_type("snapshot");
        let pending = snapshot["status"]["pending_approvals"] == json!(["c1"]);
        waiting = Some(snapshot);
        pending
    });
    assert_eq!(waiting.unwrap()["status"]["state"], "waiting");
    parent
        .send(json!({"type": "approve", "request_id": "a1", "call_id": "c1", "decision": "allow"}));
    let answer = parent.until_with("the answer", |v| v["request_id"] == "a1");
    assert_eq!(answer["ok"], true, "{answer}");
    until_logged(&pod, &format!("{NAME}.w"), "the child's turn end", |e| {
        e["kind"] == "turn_end"
    });
    assert!(pod.workspace.join("approved").exists());
    let log = log_of(&pod, &format!("{NAME}.w"));
    assert_eq!(approval_decision(&log, "c1")["client"], "after-restart");
    // The parent's interrupted spawn_agent says what became of the child.
    let spawned = result_of(&log_of(&pod, NAME), "s1");
    assert!(
        spawned["output"]
            .as_str()
            .unwrap()
            .contains(&format!("{NAME}.w")),
        "{spawned}"
    );
}

#[test]
fn a_spawn_whose_agent_started_is_not_committed_leaves_no_child_behind() {
    // The child's log and state file are written under hidden names while
    // the parent syncs `agent_started`; when that entry cannot be committed
    // (SessionLog writes: #1 the input, #2 the environment, #3 the call;
    // #4, `agent_started`, fails as on a full disk) no trace of the child
    // may be left: no state file, no log, no hidden file, no socket.
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "go", "name": "w", "wait": false})
            )])),
            top(json!([{"text": "unreachable"}])),
            child("w", json!([{"text": "unreachable"}])),
        ],
        &[],
    )
    .env("POD_FAULT", "fail_writes_after=3")
    .start();
    let mut client = client_of(&pod, NAME, "t");
    client.run("delegate");
    let err = client.until_type("error");
    assert_eq!(err["code"], "storage_error", "{err}");
    let log = log_of(&pod, NAME);
    assert_eq!(
        log.last().unwrap()["entry"]["items"][0]["name"],
        "spawn_agent",
        "the call is the last durable entry: {:?}",
        kinds(&log)
    );
    let names = |dir: &str| -> Vec<String> {
        std::fs::read_dir(pod.data_dir.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let pods = names("pods");
    assert!(
        !pods
            .iter()
            .any(|n| n.contains(&child_name(&pod, "w")) || n.ends_with(".tmp")),
        "{pods:?}"
    );
    let sessions = names("sessions");
    assert_eq!(
        sessions.iter().filter(|n| n.ends_with(".jsonl")).count(),
        1,
        "only the parent's log: {sessions:?}"
    );
    assert!(
        !sessions.iter().any(|n| n.ends_with(".tmp")),
        "{sessions:?}"
    );
    assert!(!socket_of(&pod, &child_name(&pod, "w")).exists());
}

#[test]
fn a_child_at_the_depth_limit_has_no_spawn_agent() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child(
                "w",
                json!([call("g1", "spawn_agent", json!({"task": "deeper"}))]),
            ),
            child("w", json!([{"text": "child done"}])),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let result = result_of(&log_of(&pod, &format!("{NAME}.w")), "g1");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("unknown tool"),
        "{result}"
    );
    assert!(!pod
        .data_dir
        .join(format!("pods/{NAME}.w.agent-1.json"))
        .exists());
}

#[test]
fn a_child_that_reaches_its_budget_ends_its_turn_with_a_budget_error() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w", "max_tokens": 100})
            )])),
            top(json!([{"text": "parent done"}])),
            child(
                "w",
                json!([bash("c1", "true"), {"usage": {"input_tokens": 90, "output_tokens": 30}}]),
            ),
            child("w", json!([{"text": "over budget"}])),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let log = log_of(&pod, &format!("{NAME}.w"));
    let end = harness::first_of(&log, "turn_end");
    assert_eq!(end["entry"]["reason"], "error", "{end}");
    assert_eq!(end["entry"]["error"]["code"], "budget", "{end}");
    assert!(
        end["entry"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("100"),
        "{end}"
    );
    let spawned = result_of(&log_of(&pod, NAME), "s1");
    assert!(
        spawned["output"].as_str().unwrap().contains("\"error\""),
        "{spawned}"
    );
}

#[test]
fn list_and_remove_agents_then_a_stop_stops_the_children_first_and_a_restart_skips_the_removed() {
    let lines = vec![
        top(json!([
            call(
                "s1",
                "spawn_agent",
                json!({"task": "quick", "name": "a", "wait": false})
            ),
            call(
                "s2",
                "spawn_agent",
                json!({"task": "slow", "name": "b", "wait": false})
            ),
        ])),
        top(json!([{"text": "parent done"}])),
        child("a", json!([{"text": "a done"}])),
        child(
            "b",
            json!([{"text": "b thinking"}, {"delay_ms": 60000}, {"text": "never"}]),
        ),
    ];
    let mut pod = named(&lines, &[]).start();
    let (a, b) = (format!("{NAME}.a"), format!("{NAME}.b"));
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    until_logged(&pod, NAME, "a's end", |e| e["kind"] == "agent_turn_end");
    until_logged(&pod, &b, "b's input", |e| e["kind"] == "user_input");
    parent.send(json!({"type": "list_agents", "request_id": "l1"}));
    let listed = parent.until_with("the list", |v| v["request_id"] == "l1");
    let agents = listed["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{listed}");
    assert_eq!(agents[0]["name"], a);
    assert_eq!(agents[0]["task"], "quick");
    assert!(agents[0]["created_at"].is_string(), "{listed}");
    parent.send(json!({"type": "remove_agent", "request_id": "r0", "name": "calc.nope"}));
    let unknown = parent.until_with("unknown", |v| v["request_id"] == "r0");
    assert_eq!(unknown["code"], "not_found", "{unknown}");
    parent.send(json!({"type": "remove_agent", "request_id": "r1", "name": b}));
    let busy = parent.until_with("busy", |v| v["request_id"] == "r1");
    assert_eq!(busy["code"], "busy", "{busy}");
    parent.send(json!({"type": "remove_agent", "request_id": "r2", "name": a}));
    let removed = parent.until_with("removed", |v| v["request_id"] == "r2");
    assert_eq!(removed["ok"], true, "{removed}");
    assert!(!socket_of(&pod, &a).exists(), "a's socket is gone");
    assert!(!log_of(&pod, &a).is_empty(), "a's log stays");
    // SIGTERM: b stops as a pod stops (its turn cancelled, its socket
    // removed), then the parent.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pod.pid() as i32).unwrap(),
        rustix::process::Signal::Term,
    )
    .unwrap();
    assert!(pod.wait_exit(Duration::from_secs(20)).success());
    assert!(!socket_of(&pod, &b).exists() && !pod.socket.exists());
    let b_end = until_logged(&pod, &b, "b's end", |e| e["kind"] == "turn_end");
    assert_eq!(b_end["entry"]["reason"], "cancelled", "{b_end}");
    // Started again: b comes back, the removed a does not.
    let pod = named(&lines, &[]).in_dir(pod.into_dir()).start();
    let mut parent = Client::connect(&pod.socket);
    let snapshot = parent.until_type("snapshot");
    eventually("b's socket", Duration::from_secs(20), || {
        socket_of(&pod, &b).exists()
    });
    assert!(!socket_of(&pod, &a).exists());
    let _ = snapshot;
    parent.send(json!({"type": "list_agents", "request_id": "l2"}));
    let listed = parent.until_with("the list", |v| v["request_id"] == "l2");
    let names: Vec<&str> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [b.as_str()], "{listed}");
}

#[test]
fn spawns_beyond_max_agents_and_a_deny_rule_are_refused() {
    let pod = named(
        &[
            top(json!([
                call(
                    "s1",
                    "spawn_agent",
                    json!({"task": "slow", "name": "a", "wait": false})
                ),
                call(
                    "s2",
                    "spawn_agent",
                    json!({"task": "more", "name": "b", "wait": false})
                ),
            ])),
            top(json!([{"text": "parent done"}])),
            child("a", json!([{"delay_ms": 60000}])),
        ],
        &["--max-agents", "1"],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let refused = result_of(&log_of(&pod, NAME), "s2");
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["output"]
            .as_str()
            .unwrap()
            .contains("--max-agents 1"),
        "{refused}"
    );
    let denied = named(
        &[
            top(json!([call("s1", "spawn_agent", json!({"task": "t"}))])),
            top(json!([{"text": "done"}])),
        ],
        &["--deny", "spawn_agent:*"],
    )
    .start();
    let mut parent = client_of(&denied, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let log = log_of(&denied, NAME);
    assert_eq!(approval_decision(&log, "s1")["by"], "policy");
    assert!(!kinds(&log).contains(&"agent_started".to_owned()));
}

#[test]
fn a_child_shut_down_at_its_own_socket_does_not_hang_its_parents_turn() {
    // The child stops while it waits for approval: its turn stays open (it
    // resumes after a restart), so no turn end will ever come.
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", json!([bash("c1", "true")])),
        ],
        &["--approval", "ask"],
    )
    .start();
    let child = format!("{NAME}.w");
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_with("the child waiting", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c1"])
    });
    let mut at_child = client_of(&pod, &child, "person");
    at_child.send(json!({"type": "shutdown"}));
    at_child.until_type("shutdown");
    let end = parent.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed", "{end}");
    let spawned = result_of(&log_of(&pod, NAME), "s1");
    assert!(
        spawned["output"]
            .as_str()
            .unwrap()
            .contains("stopped or was removed"),
        "{spawned}"
    );
    assert!(!socket_of(&pod, &child).exists());
    assert!(!kinds(&log_of(&pod, &child)).contains(&"turn_end".to_owned()));
    // The parent goes on serving, and no longer waits on the child.
    let snapshot = Client::connect(&pod.socket).until_type("snapshot");
    assert_eq!(snapshot["status"]["state"], "idle", "{snapshot}");
    assert_eq!(
        snapshot["status"]["pending_approvals"],
        json!([]),
        "{snapshot}"
    );
}

#[test]
fn a_compacted_child_keeps_its_parent() {
    let pod = named(
        &[
            // A long task, so that a summary makes the child's context smaller.
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "word ".repeat(2000), "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", json!([{"text": "child done"}])),
            child("w", json!([{"text": "sum"}])),
        ],
        &[],
    )
    .start();
    let child = format!("{NAME}.w");
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let first = log_of(&pod, &child)[0]["entry"]["parent"].clone();
    assert_eq!(first["call_id"], "s1", "{first}");
    let mut at_child = client_of(&pod, &child, "person");
    at_child.send(json!({"type": "compact"}));
    let done = at_child.until_with("compaction", |v| {
        v["type"] == "compact_done" || v["type"] == "compact_failed"
    });
    assert_eq!(done["type"], "compact_done", "{done}");
    let log = log_of(&pod, &child);
    assert_eq!(log[0]["entry"]["session_id"], done["new_session_id"]);
    assert_eq!(log[0]["entry"]["parent"], first, "{}", log[0]);
    let state: Value = serde_json::from_slice(
        &std::fs::read(pod.data_dir.join(format!("pods/{child}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(state["parent"], NAME, "{state}");
}

#[test]
fn a_child_spawned_on_another_model_calls_it_and_says_so_in_its_log() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "name": "w", "model": "small"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", json!([{"echo_model": {}}])),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let spawned = result_of(&log_of(&pod, NAME), "s1");
    let output: Value = serde_json::from_str(spawned["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["text"], "small", "{spawned}");
    assert_eq!(output["reason"], "completed", "{spawned}");
    let log = log_of(&pod, &format!("{NAME}.w"));
    let changes: Vec<&Value> = log
        .iter()
        .filter(|l| l["entry"]["kind"] == "model_change")
        .collect();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["entry"]["model"], "small");
}

/// Reads a WebSocket's frames until one this predicate accepts.
fn ws_until(ws: &mut harness::ws::Ws, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match ws.read() {
            Ok(Message::Text(text)) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                if pred(&frame) {
                    return frame;
                }
            }
            Ok(Message::Close(_)) | Err(_) => panic!("closed while waiting for {what}"),
            Ok(_) => {}
        }
    }
}

#[test]
fn a_remote_client_opens_a_child_with_agent_and_answers_its_approval() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "build", "name": "w"})
            )])),
            top(json!([{"text": "parent done"}])),
            child("w", json!([bash("c1", "touch one")])),
            child("w", json!([{"text": "child done"}])),
        ],
        &["--approval", "ask", "--listen", "127.0.0.1:0"],
    )
    .start();
    let child = format!("{NAME}.w");
    let mut parent = client_of(&pod, NAME, "parent-screen");
    let port: u16 = {
        let mut local = pod.client();
        let snapshot = local.until_type("snapshot");
        let address = snapshot["greeting"]["listen"]["address"].as_str().unwrap();
        address.rsplit(':').next().unwrap().parse().unwrap()
    };
    let token = |args: &[&str]| {
        let out = harness::succeeded(
            pod.command("token")
                .arg("create")
                .args(args)
                .output()
                .unwrap(),
        );
        format!("Bearer {}", out.trim())
    };
    let (full, read) = (token(&[]), token(&["--read-only"]));
    // Before the child exists, and for a name that is none: 404, before any upgrade.
    for name in [child.as_str(), "calc.nobody", ""] {
        let refused =
            harness::ws::open(port, &format!("?agent={name}"), &[("authorization", &full)])
                .map(|_| ())
                .expect_err("an unknown agent is refused");
        assert_eq!(refused.0, 404, "{name}: {refused:?}");
        assert_eq!(refused.1["code"], "unknown_agent", "{refused:?}");
        assert!(
            refused.1["message"]
                .as_str()
                .unwrap()
                .contains("pod agents"),
            "{refused:?}"
        );
    }
    // Without a token the name is not even looked at.
    let anonymous = harness::ws::open(port, "?agent=calc.w", &[]).map(|_| ());
    assert_eq!(anonymous.expect_err("no token").0, 401);
    parent.run("delegate");
    parent.until_with("the child's request at the parent", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c1"])
    });
    // A read-only token reaches the child and may only read there.
    let mut reader = harness::ws::open(
        port,
        &format!("?agent={child}"),
        &[("authorization", &read)],
    )
    .expect("the child is open to a read-only token");
    let snapshot = ws_until(&mut reader, "the child's snapshot", |v| {
        v["type"] == "snapshot"
    });
    assert_eq!(snapshot["greeting"]["pod"], child.as_str(), "{snapshot}");
    assert_eq!(snapshot["greeting"]["access"], "read");
    use tokio_tungstenite::tungstenite::Message;
    let approve = |id: &str| {
        Message::text(
            json!({"type": "approve", "request_id": id, "call_id": "c1", "decision": "allow"})
                .to_string(),
        )
    };
    reader.send(approve("r1")).unwrap();
    let refused = ws_until(&mut reader, "the read-only refusal", |v| {
        v["request_id"] == "r1"
    });
    assert_eq!(refused["code"], "forbidden", "{refused}");
    // A full token sees the child's own log and answers its request there.
    let mut phone = harness::ws::open(
        port,
        &format!("?agent={child}&tail=50"),
        &[("authorization", &full)],
    )
    .expect("the child is open to a full token");
    let snapshot = ws_until(&mut phone, "the child's snapshot", |v| {
        v["type"] == "snapshot"
    });
    assert_eq!(snapshot["greeting"]["pod"], child.as_str(), "{snapshot}");
    assert_eq!(snapshot["greeting"]["access"], "full");
    let entries = snapshot["entries"].as_array().unwrap();
    assert_eq!(
        entries[0]["entry"]["parent"]["pod"], NAME,
        "the child's own log: {snapshot}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["entry"]["kind"] == "approval_request" && e["entry"]["call_id"] == "c1"),
        "{snapshot}"
    );
    phone.send(approve("p1")).unwrap();
    let answer = ws_until(&mut phone, "the answer", |v| v["request_id"] == "p1");
    assert_eq!(answer["ok"], true, "{answer}");
    parent.until_entry("turn_end");
    let decision = approval_decision(&log_of(&pod, &child), "c1");
    assert_eq!(decision["by"], "user", "{decision}");
    assert_eq!(
        decision["remote"]
            .as_str()
            .map(|r| r.starts_with("127.0.0.1")),
        Some(true),
        "{decision}"
    );
    assert!(pod.workspace.join("one").exists());
    // The client commands reach it the same way: `--url …/v1/ws?agent=NAME`.
    let token_file = pod.dir.path().join("laptop.token");
    std::fs::write(&token_file, full.trim_start_matches("Bearer ")).unwrap();
    let log = harness::succeeded(
        std::process::Command::new(harness::POD)
            .args(["log", "--json", "--url"])
            .arg(format!("http://127.0.0.1:{port}/v1/ws?agent={child}"))
            .arg("--token-file")
            .arg(&token_file)
            .env_remove("POD_TOKEN")
            .env_remove("POD_SOCKET")
            .env_remove("POD_DATA_DIR")
            .output()
            .unwrap(),
    );
    assert!(
        log.contains("\"approval_decision\"") && log.contains("\"c1\""),
        "the child's log over the network: {log}"
    );
    // Once removed, the child's door is closed.
    parent.send(json!({"type": "remove_agent", "request_id": "rm", "name": child}));
    let removed = parent.until_with("removed", |v| v["request_id"] == "rm");
    assert_eq!(removed["type"], "response", "{removed}");
    eventually("the child's door closes", Duration::from_secs(20), || {
        matches!(
            harness::ws::open(
                port,
                &format!("?agent={child}"),
                &[("authorization", &full)]
            ),
            Err((404, _))
        )
    });
}

/// Runs git in `dir` for a test, and returns what it printed.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A test directory whose workspace `ws` is a git repository with one commit.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "--quiet"]);
    std::fs::write(ws.join("README"), "the parent's\n").unwrap();
    git(&ws, &["add", "README"]);
    git(&ws, &["commit", "--quiet", "-m", "first"]);
    dir
}

#[test]
fn a_child_in_a_worktree_writes_and_commits_there_only_and_its_removal_keeps_the_branch() {
    let dir = repository();
    let ws = dir.path().join("ws");
    let escape = ws.join("escape.txt");
    let lines = vec![
        top(json!([
            call("s1", "spawn_agent", json!({"task": "work", "name": "w", "worktree": true, "wait": false})),
            call("s2", "spawn_agent", json!({"task": "mess", "name": "d", "worktree": true, "wait": false})),
        ])),
        top(json!([call("w1", "wait_agents", json!({"names": ["w", "d"]}))])),
        top(json!([{"text": "both done"}])),
        // The second turn: the name `w` again, whose branch is kept.
        top(json!([call("s3", "spawn_agent", json!({"task": "again", "name": "w", "worktree": true}))])),
        top(json!([{"text": "again done"}])),
        child("w", json!([call("c1", "write_file", json!({"path": "new.txt", "content": "new\n"}))])),
        child("w", json!([bash("c2", "echo made > made.txt && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm work && git log --format=%s -1")])),
        child("w", json!([bash("c3", &format!("mktemp; echo x > {}", escape.display()))])),
        child("w", json!([bash("c4", "touch /tmp/pod-worktree-test-$$ && echo tmp-writable")])),
        child("w", json!([{"text": "w done"}])),
        child("d", json!([call("c1", "write_file", json!({"path": "scratch.txt", "content": "x\n"}))])),
        child("d", json!([{"text": "d done"}])),
        child("w-2", json!([{"text": "w-2 done"}])),
    ];
    let pod = named(&lines, &[]).in_dir(dir).start();
    let mut parent = Client::connect(&pod.socket);
    let snapshot = parent.until_type("snapshot");
    let confined = snapshot["greeting"]["sandbox"]["available"] == true;
    assert!(
        confined || std::env::var_os("CI").is_none(),
        "CI is set, so the sandbox part may not be skipped: {}",
        snapshot["greeting"]["sandbox"]
    );
    parent.send(json!({"type": "hello", "client": "person"}));
    parent.run("delegate");
    parent.until_entry("turn_end");
    let log = log_of(&pod, NAME);
    let spawned: Value =
        serde_json::from_str(result_of(&log, "s1")["output"].as_str().unwrap()).unwrap();
    assert_eq!(spawned["branch"], "pod/calc.w", "{spawned}");
    let waited = result_of(&log, "w1");
    assert!(
        waited["output"].as_str().unwrap().contains("pod/calc.d"),
        "{waited}"
    );

    // The child's files are in its worktree, not in the parent's tree.
    let worktree = pod.data_dir.join("worktrees/calc.w");
    assert_eq!(
        std::fs::read_to_string(worktree.join("new.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("README")).unwrap(),
        "the parent's\n"
    );
    assert!(!ws.join("new.txt").exists() && !ws.join("made.txt").exists());
    // Its commit is on its branch of the parent's repository.
    let child = log_of(&pod, "calc.w");
    let committed = result_of(&child, "c2");
    assert!(
        committed["output"].as_str().unwrap().contains("work"),
        "{committed}"
    );
    assert_eq!(
        git(&ws, &["log", "--format=%s", "-1", "pod/calc.w"]).trim(),
        "work"
    );
    assert_eq!(
        git(&ws, &["log", "--format=%s", "-1", "HEAD"]).trim(),
        "first"
    );
    // The parent's workspace and /tmp are read-only to it; its $TMPDIR is its own.
    let recorded = child[0]["entry"]["workspace"].clone();
    assert_eq!(
        std::path::Path::new(recorded.as_str().unwrap()),
        worktree.canonicalize().unwrap(),
        "the child's session names its worktree: {recorded}"
    );
    let escaped = result_of(&child, "c3");
    let out = escaped["output"].as_str().unwrap();
    assert!(
        out.contains("worktrees/calc.w.tmp/"),
        "mktemp uses its own $TMPDIR: {escaped}"
    );
    if confined {
        assert!(
            !escape.exists(),
            "the child wrote into the parent's workspace: {escaped}"
        );
        assert!(out.contains("Permission denied"), "{escaped}");
        let tmp = result_of(&child, "c4");
        assert!(
            !tmp["output"].as_str().unwrap().contains("tmp-writable"),
            "{tmp}"
        );
    }

    // Removal: the clean worktree goes, the one with an untracked file stays;
    // both branches stay.
    parent.send(json!({"type": "remove_agent", "request_id": "r1", "name": "calc.w"}));
    let removed = parent.until_with("removed", |v| v["request_id"] == "r1");
    assert_eq!(removed["ok"], true, "{removed}");
    assert_eq!(removed["worktree"]["removed"], true, "{removed}");
    assert_eq!(removed["worktree"]["branch"], "pod/calc.w", "{removed}");
    assert!(!worktree.exists(), "a clean worktree is removed");
    parent.send(json!({"type": "remove_agent", "request_id": "r2", "name": "calc.d"}));
    let kept = parent.until_with("kept", |v| v["request_id"] == "r2");
    assert_eq!(kept["ok"], true, "{kept}");
    assert_eq!(kept["worktree"]["removed"], false, "{kept}");
    assert!(
        kept["worktree"]["note"].as_str().unwrap().contains("kept"),
        "{kept}"
    );
    assert!(pod.data_dir.join("worktrees/calc.d/scratch.txt").exists());
    let branches = git(&ws, &["branch", "--list", "pod/*"]);
    assert!(
        branches.contains("pod/calc.w") && branches.contains("pod/calc.d"),
        "{branches}"
    );

    // The name again: its branch exists, so the child is `w-2`.
    parent.run("again");
    parent.until_entry("turn_end");
    let again = result_of(&log_of(&pod, NAME), "s3");
    let again: Value = serde_json::from_str(again["output"].as_str().unwrap()).unwrap();
    assert_eq!(again["name"], "calc.w-2", "{again}");
    assert_eq!(again["branch"], "pod/calc.w-2", "{again}");
    assert_eq!(again["text"], "w-2 done", "{again}");
}

#[test]
fn a_child_in_a_worktree_comes_back_in_it_after_a_restart() {
    let lines = vec![
        top(json!([call(
            "s1",
            "spawn_agent",
            json!({"task": "where", "name": "w", "worktree": true})
        )])),
        top(json!([{"text": "parent done"}])),
        child("w", json!([bash("c1", "pwd")])),
        child("w", json!([{"text": "w done"}])),
    ];
    let pod = named(&lines, &[]).in_dir(repository()).start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let worktree = pod
        .data_dir
        .join("worktrees/calc.w")
        .canonicalize()
        .unwrap();
    let pwd = result_of(&log_of(&pod, "calc.w"), "c1");
    assert_eq!(
        pwd["output"].as_str().unwrap().lines().next(),
        worktree.to_str()
    );
    parent.send(json!({"type": "shutdown"}));
    let mut pod = pod;
    assert!(pod.wait_exit(Duration::from_secs(20)).success());
    let pod = named(&lines, &[]).in_dir(pod.into_dir()).start();
    eventually("the child's socket", Duration::from_secs(20), || {
        socket_of(&pod, "calc.w").exists()
    });
    let mut parent = client_of(&pod, NAME, "person");
    parent.send(json!({"type": "list_agents", "request_id": "l1"}));
    let listed = parent.until_with("the list", |v| v["request_id"] == "l1");
    assert_eq!(
        listed["agents"][0]["worktree"]["branch"], "pod/calc.w",
        "{listed}"
    );
    let mut at_child = Client::connect(&socket_of(&pod, "calc.w"));
    let snapshot = at_child.until_type("snapshot");
    assert_eq!(
        snapshot["greeting"]["workspace"],
        worktree.to_str().unwrap(),
        "{}",
        snapshot["greeting"]
    );
    at_child.send(json!({"type": "hello", "client": "person"}));
    at_child.run("where now?");
    at_child.until_entry("turn_end");
    let pwds: Vec<String> = log_of(&pod, "calc.w")
        .iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .map(|l| {
            l["entry"]["results"][0]["output"]
                .as_str()
                .unwrap()
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(pwds.len(), 2, "{pwds:?}");
    assert_eq!(pwds[1], worktree.to_str().unwrap(), "{pwds:?}");
}

#[test]
fn a_worktree_outside_a_git_workspace_is_refused_with_a_reason() {
    let pod = named(
        &[
            top(json!([call(
                "s1",
                "spawn_agent",
                json!({"task": "t", "worktree": true})
            )])),
            top(json!([{"text": "done"}])),
        ],
        &[],
    )
    .start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.run("delegate");
    parent.until_entry("turn_end");
    let log = log_of(&pod, NAME);
    let refused = result_of(&log, "s1");
    assert_eq!(refused["is_error"], true, "{refused}");
    let output = refused["output"].as_str().unwrap();
    assert!(output.contains("not in a git repository"), "{output}");
    assert!(!kinds(&log).contains(&"agent_started".to_owned()));
}

#[test]
fn a_child_only_a_compacted_session_of_its_parent_names_comes_back_with_its_task() {
    let lines = vec![
        top(json!([call(
            "s1",
            "spawn_agent",
            json!({"task": "the task", "name": "w"})
        )])),
        top(json!([{"text": "parent done"}])),
        // The parent's summary.
        top(json!([{"text": "sum"}])),
        child("w", json!([{"text": "w done"}])),
    ];
    let pod = named(&lines, &[]).start();
    let mut parent = client_of(&pod, NAME, "person");
    // A long input, so that a summary makes the parent's context smaller.
    parent.run(&"word ".repeat(2000));
    parent.until_entry("turn_end");
    parent.send(json!({"type": "compact"}));
    let done = parent.until_with("compaction", |v| {
        v["type"] == "compact_done" || v["type"] == "compact_failed"
    });
    assert_eq!(done["type"], "compact_done", "{done}");
    assert!(!kinds(&log_of(&pod, NAME)).contains(&"agent_started".to_owned()));
    parent.send(json!({"type": "shutdown"}));
    let mut pod = pod;
    assert!(pod.wait_exit(Duration::from_secs(20)).success());
    let pod = named(&lines, &[]).in_dir(pod.into_dir()).start();
    let mut parent = client_of(&pod, NAME, "person");
    parent.send(json!({"type": "list_agents", "request_id": "l1"}));
    let listed = parent.until_with("the list", |v| v["request_id"] == "l1");
    assert_eq!(listed["agents"][0]["name"], "calc.w", "{listed}");
    assert_eq!(listed["agents"][0]["task"], "the task", "{listed}");
}
