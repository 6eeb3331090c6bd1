//! Real agent turns end to end: `pod serve` talking to real HTTP servers on
//! 127.0.0.1, running tools in its workspace, and committing every step.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use std::time::{Duration, Instant};

use harness::{eventually, first_of, kinds, Pod};
use serde_json::{json, Value};
use support::{data_frames, model_server, typed_frames, Reply};

const EXPECTED: [&str; 7] = [
    "session_start",
    "user_input",
    "environment",
    "assistant:tool_call",
    "tool_results",
    "assistant:text",
    "turn_end",
];

fn run_read_file_turn(pod: &Pod) -> Vec<Value> {
    std::fs::write(pod.workspace.join("notes.txt"), "the answer is 42\n").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("what is in notes.txt?");
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed", "{:?}", c.frames);
    let log = pod.log_lines();
    assert_eq!(kinds(&log), EXPECTED);
    let call = &first_of(&log, "assistant:tool_call")["entry"]["items"][0];
    assert_eq!(call["name"], "read_file");
    assert_eq!(call["arguments"], json!({"path":"notes.txt"}));
    let result = &first_of(&log, "tool_results")["entry"]["results"][0];
    assert_eq!(result["call_id"], call["call_id"]);
    assert_eq!(result["is_error"], false);
    assert!(result["output"]
        .as_str()
        .unwrap()
        .contains("the answer is 42"));
    assert_eq!(
        first_of(&log, "assistant:text")["entry"]["items"][0]["text"],
        "It says 42."
    );
    log
}

#[test]
fn openai_turn_with_a_read_file_tool_call() {
    let tool_call = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"notes.txt\"}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59}}"#,
        "[DONE]",
    ]);
    let answer = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"It says "},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"42."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&tool_call), Reply::sse(&answer)]);
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", server.url),
        ])
        .start();
    run_read_file_turn(&pod);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    let tool_message = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert!(tool_message["content"]
        .as_str()
        .unwrap()
        .contains("the answer is 42"));
}

#[test]
fn anthropic_turn_with_a_read_file_tool_call() {
    let tool_use = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":50,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"notes"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let answer = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":80,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It says 42."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&tool_use), Reply::sse(&answer)]);
    let pod = Pod::builder()
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["--base-url", &format!("{}/anthropic", server.url)])
        .start();
    run_read_file_turn(&pod);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/anthropic/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("test-key"));
    let second = requests[1].json();
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    let block = &last["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["tool_use_id"], "toolu_1");
    assert!(block["content"].to_string().contains("the answer is 42"));
}

fn bash_call(command: &str) -> String {
    json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":command}}}]})
        .to_string()
}

#[test]
fn a_client_attaching_while_a_tool_runs_sees_the_call_and_cancel_kills_it() {
    let script = [
        bash_call("sleep 30; touch finished"),
        json!({"events":[{"text":"done"}]}).to_string(),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let mut a = pod.client();
    a.until_type("snapshot");
    a.run("run the slow thing");
    a.until_entry("assistant_items");
    let mut b = pod.client();
    let snapshot = b.until_type("snapshot");
    // The last entry that is not the checkpoint taken before the call ran.
    let last = snapshot["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|l| l["entry"]["kind"] != "checkpoint")
        .unwrap()
        .clone();
    assert_eq!(last["entry"]["items"][0]["type"], "tool_call", "{snapshot}");
    assert_eq!(last["entry"]["items"][0]["name"], "bash");
    assert_eq!(snapshot["status"]["state"], "running");

    let started = Instant::now();
    b.send(json!({"type":"cancel"}));
    let end = a.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "cancelled");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "cancel took {:?}",
        started.elapsed()
    );
    let log = pod.log_lines();
    let results = log
        .iter()
        .rev()
        .find(|l| l["entry"]["kind"] == "tool_results")
        .unwrap();
    let result = &results["entry"]["results"][0];
    assert_eq!(
        result["is_error"], true,
        "the cancelled call is answered: {result}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !pod.workspace.join("finished").exists(),
        "the bash child was not killed"
    );
}

#[test]
fn cancel_during_a_stream_ends_promptly_keeping_the_partial_text() {
    let pod = Pod::builder()
        .script(&harness::slow_text_reply(200, 20))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("talk slowly");
    for _ in 0..5 {
        c.until_type("text_delta");
    }
    let started = Instant::now();
    c.send(json!({"type":"cancel"}));
    let end = c.until_entry("turn_end");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "cancel took {:?}",
        started.elapsed()
    );
    assert_eq!(end["entry"]["reason"], "cancelled");
    let log = pod.log_lines();
    let text = first_of(&log, "assistant:text")["entry"]["items"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("w0 w1 w2 w3 w4 "),
        "partial text kept: {text:?}"
    );
    assert!(!text.contains("w199"));
}

#[test]
fn tools_refuse_paths_that_escape_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    let calls: Vec<Value> = [
        json!({"path":"../secret.txt"}),
        json!({"path": outside.path().join("secret.txt")}),
        json!({"path":"link/secret.txt"}),
    ]
    .into_iter()
    .enumerate()
    .map(
        |(i, args)| json!({"tool_call":{"id":format!("c{i}"),"name":"read_file","arguments":args}}),
    )
    .collect();
    let script = [
        json!({ "events": calls }).to_string(),
        json!({"events":[{"text":"refused, as expected"}]}).to_string(),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    std::os::unix::fs::symlink(outside.path(), pod.workspace.join("link")).unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("try to escape");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let log = pod.log_lines();
    let results: Vec<&Value> = log
        .iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .map(|l| &l["entry"]["results"][0])
        .collect();
    assert_eq!(results.len(), 3, "every call is answered");
    for result in results {
        assert_eq!(result["is_error"], true, "{result}");
        let output = result["output"].as_str().unwrap();
        assert!(output.contains("outside the workspace"), "{output}");
        assert!(!output.contains("top secret"));
    }
}

#[test]
fn file_refs_outside_the_workspace_are_refused_and_nothing_is_committed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    let pod = Pod::start();
    std::os::unix::fs::symlink(outside.path(), pod.workspace.join("link")).unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    let absolute = outside.path().join("secret.txt");
    for path in ["../x.txt", absolute.to_str().unwrap(), "link/secret.txt"] {
        c.send(json!({"type":"run","request_id":path,"segments":[
            {"type":"text","text":"read this"},{"type":"file_ref","path":path}]}));
        let err = c.until_type("error");
        assert_eq!(err["code"], "file_ref_out_of_scope", "{path}: {err}");
        assert_eq!(err["request_id"], path);
    }
    assert_eq!(pod.log_lines().len(), 1, "nothing was committed");
}

#[test]
fn a_turn_stops_at_max_steps() {
    let pod = Pod::builder()
        .script(&bash_call("true"))
        .args(["--max-steps", "3"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("loop forever");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "max_steps");
    let log = pod.log_lines();
    let calls = log
        .iter()
        .filter(|l| l["entry"]["kind"] == "assistant_items")
        .count();
    assert_eq!(calls, 3);
}

#[test]
fn a_notify_lands_between_steps_never_between_a_call_and_its_result() {
    let script = [
        bash_call("sleep 0.5"),
        json!({"events":[{"text":"ok"}]}).to_string(),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("work");
    c.until_entry("assistant_items");
    c.send(json!({"type":"notify","message":"ci is green"}));
    c.until_entry("turn_end");
    // Checkpoints are not context: the order of what the model sees.
    let log: Vec<String> = kinds(&pod.log_lines())
        .into_iter()
        .filter(|k| k != "checkpoint")
        .collect();
    let call = log.iter().position(|k| k == "assistant:tool_call").unwrap();
    assert_eq!(log[call + 1], "tool_results");
    assert_eq!(log[call + 2], "hook_injected_items");
    // And when idle, at once.
    c.send(json!({"type":"notify","message":"idle note"}));
    eventually("the idle notify", Duration::from_secs(5), || {
        pod.log_lines().last().unwrap()["entry"]["kind"] == "hook_injected_items"
    });
}
