//! Child pods (subagents): a parent's `spawn_agent` starts a whole pod in
//! the same process, with its own log and socket; the parent shows the
//! children's status, usage and approvals, and real clients talk to each
//! child on its own socket. The script provider serves parent and children
//! by `agent` slug, so every interleaving is scripted.

mod harness;

use std::time::Duration;

use harness::{eventually, kinds, read_lines, Client, Pod};
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

/// A child's socket: beside the parent's, named after the child.
fn child_socket(pod: &Pod, slug: &str) -> std::path::PathBuf {
    pod.socket
        .with_file_name(format!("{}.sock", child_name(pod, slug)))
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
