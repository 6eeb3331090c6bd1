//! A real `pod serve` against the bytes third-party servers really send:
//! Ollama, OpenRouter, servers that refuse a field, Anthropic's pings and
//! overloads — what a user of each would see in the log and in `turn_end`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use harness::Pod;
use serde_json::{json, Value};
use support::{data_frames, model_server, typed_frames, Reply, Server};

fn openai_pod(server: &Server) -> Pod {
    Pod::builder()
        .args([
            "--provider",
            "openai",
            "--model",
            "qwen2.5-coder:7b",
            "--base-url",
            &format!("{}/v1", server.url),
        ])
        .start()
}

/// Runs `text` as one turn; returns the `turn_end` entry and every frame.
fn turn(pod: &Pod, text: &str) -> (Value, Vec<Value>) {
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run(text);
    let end = client.until_entry("turn_end");
    (end["entry"].clone(), client.frames.clone())
}

/// The log's entries after `session_start`, as `kind` or `assistant:type`.
fn kinds(pod: &Pod) -> Vec<String> {
    harness::kinds(&pod.log_lines()[1..])
}

const OLLAMA: &str = r#""object":"chat.completion.chunk","created":1733000000,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama""#;

fn ollama_chunk(choice: &str) -> String {
    format!(r#"{{"id":"chatcmpl-7",{OLLAMA},"choices":[{choice}]}}"#)
}

#[test]
fn ollama_parallel_tool_calls_run_and_are_sent_back_as_ollama_takes_them() {
    // Two whole calls, both numbered 0, `finish_reason` "stop", and (as
    // with stream_options refused) no usage chunk; no [DONE] either.
    let calls = [
        ollama_chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}"#,
        ),
        ollama_chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}]},"finish_reason":null}"#,
        ),
        ollama_chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}"#,
        ),
    ];
    let answer = [
        ollama_chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":"A and B."},"finish_reason":null}"#,
        ),
        ollama_chunk(
            r#"{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}"#,
        ),
        format!(
            r#"{{"id":"chatcmpl-7",{OLLAMA},"choices":[],"usage":{{"prompt_tokens":200,"completion_tokens":4,"total_tokens":204}}}}"#
        ),
        "[DONE]".to_owned(),
    ];
    let frames = |v: &[String]| data_frames(&v.iter().map(String::as_str).collect::<Vec<_>>());
    let (_rt, server) = model_server(vec![
        Reply::sse(&frames(&calls)),
        Reply::sse(&frames(&answer)),
    ]);
    let pod = openai_pod(&server);
    std::fs::write(pod.workspace.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(pod.workspace.join("b.txt"), "beta\n").unwrap();
    let (end, _) = turn(&pod, "read a.txt and b.txt");
    assert_eq!(end["reason"], "completed", "{end}");
    assert_eq!(
        kinds(&pod),
        [
            "user_input",
            "environment",
            "assistant:tool_call",
            "assistant:tool_call",
            "tool_results",
            "tool_results",
            "assistant:text",
            "turn_end"
        ]
    );
    let log = pod.log_lines();
    assert_eq!(
        log[3]["entry"]["items"][0]["arguments"],
        json!({"path":"a.txt"})
    );
    assert_eq!(
        log[4]["entry"]["items"][0]["arguments"],
        json!({"path":"b.txt"})
    );
    let output = |line: &Value| {
        line["entry"]["results"][0]["output"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(output(&log[5]).contains("alpha"));
    assert!(output(&log[6]).contains("beta"));

    // The second request: the calls with `content: ""` (Ollama refuses
    // null), then one tool message per call.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].json()["messages"].as_array().unwrap().clone();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], "");
    let ids: Vec<_> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    let tool_ids: Vec<_> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(tool_ids, ["call_a", "call_b"]);
    assert_eq!(end["usage"]["input_tokens"], 200);
}

#[test]
fn a_server_refusing_stream_options_still_answers_the_turn() {
    let refusal = r#"{"error":{"message":"litellm.BadRequestError: AzureException - Unknown parameter: 'stream_options.include_usage'.","type":null,"param":null,"code":"400"}}"#;
    let answer = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Fine."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::status(400, refusal), Reply::sse(&answer)]);
    let pod = openai_pod(&server);
    let (end, frames) = turn(&pod, "hi");
    assert_eq!(end["reason"], "completed", "{end}");
    assert!(
        !frames.iter().any(|f| f["type"] == "retry"),
        "resending without the field is not a retry"
    );
    assert_eq!(
        kinds(&pod),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].json().get("stream_options").is_none());
}

#[test]
fn an_error_chunk_mid_stream_ends_the_turn_keeping_the_text() {
    let reply = data_frames(&[
        r#"{"id":"gen-2","choices":[{"index":0,"delta":{"role":"assistant","content":"Half an ans"},"finish_reason":null}]}"#,
        r#"{"id":"gen-2","error":{"code":502,"message":"Upstream provider overloaded"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&format!(
        ": OPENROUTER PROCESSING\n\n{reply}"
    ))]);
    let pod = openai_pod(&server);
    let (end, _) = turn(&pod, "hi");
    assert_eq!(end["reason"], "error", "{end}");
    assert_eq!(end["error"]["code"], "provider_stream");
    assert!(
        end["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Upstream provider overloaded"),
        "{end}"
    );
    assert_eq!(
        kinds(&pod),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    assert_eq!(
        pod.log_lines()[3]["entry"]["items"][0]["text"],
        "Half an ans"
    );
    assert_eq!(server.requests().len(), 1, "nothing retried after text");
}

#[test]
fn an_http_error_names_the_status_and_quotes_the_server() {
    let (_rt, server) = model_server(vec![Reply::status(
        404,
        r#"{"error":"model \"qwen2.5-coder:7b\" not found, try pulling it first"}"#,
    )]);
    let pod = openai_pod(&server);
    let (end, frames) = turn(&pod, "hi");
    assert_eq!(end["reason"], "error", "{end}");
    assert_eq!(end["error"]["code"], "provider_http");
    assert_eq!(
        end["error"]["message"],
        "openai: HTTP 404 Not Found: model \"qwen2.5-coder:7b\" not found, try pulling it first"
    );
    assert!(!frames.iter().any(|f| f["type"] == "retry"), "404 is final");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn anthropic_overload_is_retried_then_pings_and_unknown_events_pass() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let reply = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"output_tokens":1}}}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello."}}"#,
        r#"{"type":"some_future_event","index":0}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (_rt, server) = model_server(vec![
        Reply::status(529, overloaded).with_header("retry-after", "0"),
        Reply::sse(&reply),
    ]);
    let pod = Pod::builder()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .args(["--base-url", &server.url])
        .start();
    let (end, frames) = turn(&pod, "hi");
    assert_eq!(end["reason"], "completed", "{end}");
    let retry = frames
        .iter()
        .find(|f| f["type"] == "retry")
        .expect("a retry frame");
    assert_eq!(retry["attempt"], 1);
    assert_eq!(retry["delay_ms"], 0);
    assert_eq!(retry["error"], "anthropic: HTTP 529: Overloaded");
    assert_eq!(
        kinds(&pod),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    assert_eq!(end["usage"], json!({"input_tokens":40,"output_tokens":3}));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("anthropic-version"), Some("2023-06-01"));
}

#[test]
fn after_a_turn_the_model_never_answered_user_messages_are_joined_so_roles_alternate() {
    // llama.cpp and vLLM render the conversation with the model's chat
    // template, and many (Gemma, Mistral) refuse two user messages in a
    // row: that would fail this call and every later one.
    let answer = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Now I can."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![
        Reply::status(
            400,
            r#"{"error":{"code":400,"message":"Failed to parse the chat template","type":"invalid_request_error"}}"#,
        ),
        Reply::sse(&answer),
    ]);
    let pod = openai_pod(&server);
    let (end, _) = turn(&pod, "first try");
    assert_eq!(end["error"]["code"], "provider_http", "{end}");
    let (end, _) = turn(&pod, "second try");
    assert_eq!(end["reason"], "completed", "{end}");
    let messages = server.requests()[1].json()["messages"].clone();
    let users: Vec<_> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .collect();
    assert_eq!(users.len(), 1, "{messages}");
    assert_eq!(users[0]["role"], "user");
    let text = users[0]["content"].as_str().unwrap();
    assert!(
        text.starts_with("first try") && text.ends_with("second try") && text.contains("\n\n"),
        "{text:?}"
    );
}

#[test]
fn a_reply_cut_at_the_output_limit_ends_the_turn_with_output_limit_and_keeps_its_text() {
    let cut = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"The first half of"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&cut)]);
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", server.url),
            "--max-output-tokens",
            "64",
        ])
        .start();
    let (end, _) = turn(&pod, "write a long essay");
    assert_eq!(end["reason"], "error", "{end}");
    assert_eq!(end["error"]["code"], "output_limit", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("64 tokens") && message.contains("--max-output-tokens"),
        "{message}"
    );
    assert_eq!(
        kinds(&pod),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    assert_eq!(
        pod.log_lines()[3]["entry"]["items"][0]["text"],
        "The first half of"
    );
    assert_eq!(server.requests()[0].json()["max_tokens"], 64);
}

#[test]
fn anthropic_stopping_at_max_tokens_ends_the_turn_with_output_limit() {
    let cut = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Cut here"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":32}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&cut)]);
    let pod = Pod::builder()
        .args([
            "--provider",
            "anthropic",
            "--base-url",
            &server.url,
            "--max-output-tokens",
            "32",
        ])
        .env("ANTHROPIC_API_KEY", "k")
        .start();
    let (end, _) = turn(&pod, "go");
    assert_eq!(end["error"]["code"], "output_limit", "{end}");
    assert_eq!(
        kinds(&pod),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    assert_eq!(server.requests()[0].json()["max_tokens"], 32);
}

#[test]
fn the_context_gauge_uses_the_estimate_when_the_server_reports_no_usage_and_says_so() {
    // llama-cpp-python: no usage chunk, no stream_options refusal either.
    let answer = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Fine."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&answer)]);
    let pod = openai_pod(&server);
    let (_, frames) = turn(&pod, &"a long question ".repeat(200));
    let status = frames.iter().rev().find(|f| f["type"] == "status").unwrap();
    assert_eq!(status["context_source"], "estimate", "{status}");
    assert!(
        status["context_tokens"].as_u64().unwrap() > 800,
        "the request's own size, not 0: {status}"
    );
    let out = pod.command("status").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("estimated"), "{text}");
}

#[test]
fn cached_prompt_tokens_are_read_into_the_turns_usage_for_both_formats() {
    let openai = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":3,"total_tokens":2009,"prompt_tokens_details":{"cached_tokens":1920}}}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&openai)]);
    let (end, _) = turn(&openai_pod(&server), "hello");
    assert_eq!(end["usage"]["input_tokens"], 2006, "{end}");
    assert_eq!(end["usage"]["cache_read_tokens"], 1920, "{end}");

    let anthropic = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":6,"cache_creation_input_tokens":100,"cache_read_input_tokens":1900,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":6,"cache_creation_input_tokens":100,"cache_read_input_tokens":1900,"output_tokens":3}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&anthropic)]);
    let pod = Pod::builder()
        .args(["--provider", "anthropic", "--base-url", &server.url])
        .env("ANTHROPIC_API_KEY", "k")
        .start();
    let (end, _) = turn(&pod, "hello");
    assert_eq!(end["usage"]["input_tokens"], 2006, "{end}");
    assert_eq!(end["usage"]["cache_read_tokens"], 1900, "{end}");
    assert_eq!(end["usage"]["cache_write_tokens"], 100, "{end}");
    let status = harness::succeeded(pod.command("status").output().unwrap());
    assert!(
        status.contains("last turn  2.0k in (1.9k cached) · 3 out"),
        "{status}"
    );
    let body = server.requests()[0].json();
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type":"ephemeral"}),
        "{body}"
    );
}

/// One SSE answer of `text`, as an OpenAI-compatible server streams it.
fn answer(text: &str) -> String {
    let chunk = json!({"choices":[{"index":0,"delta":{"role":"assistant","content":text},
        "finish_reason":"stop"}]});
    data_frames(&[&chunk.to_string(), "[DONE]"])
}

/// #30 item 3: llama.cpp refuses a request over its context with a 400 that
/// states the window. The pod learns the window, compacts, and tries once
/// more: the turn completes, and the gauge follows the stated window.
#[test]
fn a_context_overflow_compacts_learns_the_stated_window_and_retries_once() {
    // Varied, as a model's answer is: the same text over and over is a
    // loop the pod stops (see provider::repetition).
    let long_answer: String = (0..300)
        .map(|i| format!("point {i:03} of the explanation. "))
        .collect();
    let (_rt, server) = model_server(vec![
        Reply::sse(&answer(&long_answer)),
        Reply::status(
            400,
            r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error"}}"#,
        ),
        Reply::sse(&answer(
            "Summary: the user asked about the code; it was explained.",
        )),
        Reply::sse(&answer("Done after compacting.")),
    ]);
    // A 4,096-token window, as llama.cpp's default: the prompt and tools
    // without the agent tools (~430 tokens, `--max-agents 0`) and a summary
    // fit it, as a user of such a model would run pod.
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--model",
            "qwen2.5-coder:7b",
            "--max-agents",
            "0",
        ])
        .arg("--base-url")
        .arg(format!("{}/v1", server.url))
        .start();
    let (end, _) = turn(&pod, "explain the code");
    assert_eq!(end["reason"], "completed", "{end}");
    let (end, frames) = turn(&pod, "and now the tests");
    assert_eq!(end["reason"], "completed", "{end}");
    assert_eq!(server.requests().len(), 4);
    assert!(
        frames.iter().any(|f| f["type"] == "compact_done"),
        "compacted into a new session"
    );
    let status = frames.iter().rev().find(|f| f["type"] == "status").unwrap();
    assert_eq!(status["context_window"], 4096, "{status}");
    let retried = server.requests()[3].json()["messages"].to_string();
    assert!(retried.contains("Summary: the user asked"), "{retried}");
    assert!(
        !retried.contains(&long_answer[..200]),
        "the retry was compacted"
    );
}

/// #30 item 3: when even the compacted request does not fit (OpenAI's
/// `context_length_exceeded` twice), the turn ends `context_overflow`
/// saying what to do, and the input that did not fit is not merged into
/// the next turn's message, so the session is not stuck.
#[test]
fn an_overflow_that_compaction_cannot_cure_ends_context_overflow_and_is_not_carried_on() {
    let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 20000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let (_rt, server) = model_server(vec![
        Reply::status(400, too_long),
        Reply::status(400, too_long),
        Reply::sse(&answer("A short answer.")),
    ]);
    let pod = openai_pod(&server);
    let (end, _) = turn(&pod, &"an enormous paste ".repeat(100));
    assert_eq!(end["reason"], "error", "{end}");
    assert_eq!(end["error"]["code"], "context_overflow", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("context_length_exceeded") || message.contains("maximum context length"),
        "quotes the server: {message}"
    );
    assert!(
        message.contains("new session"),
        "says what to do: {message}"
    );
    let (end, _) = turn(&pod, "a short question");
    assert_eq!(end["reason"], "completed", "{end}");
    let last = server.requests().last().unwrap().json()["messages"].to_string();
    assert!(last.contains("a short question"), "{last}");
    assert!(!last.contains("an enormous paste"), "{last}");
}
