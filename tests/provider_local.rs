//! A real `pod serve` against what real servers sent in a trial with a real
//! local model (#42: SmolLM2-135M on llama-cpp-python 0.3.36 and on
//! llama-server) and against Anthropic's and OpenAI's usage reports: each
//! reply below is the bytes those servers wrote, served from 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use harness::Pod;
use serde_json::{json, Value};
use support::{data_frames, model_server, typed_frames, Reply, Server};

fn openai_pod(server: &Server, extra: &[&str]) -> Pod {
    let base = format!("{}/v1", server.url);
    let mut builder = Pod::builder().args(["--provider", "openai", "--base-url", &base]);
    for arg in extra {
        builder = builder.arg(*arg);
    }
    builder.start()
}

/// Runs `text` as one turn; returns the `turn_end` entry and every frame.
fn turn(pod: &Pod, text: &str) -> (Value, Vec<Value>) {
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run(text);
    let end = client.until_entry("turn_end");
    (end["entry"].clone(), client.frames.clone())
}

/// The last `status` frame among `frames`.
fn last_status(frames: &[Value]) -> &Value {
    frames.iter().rev().find(|f| f["type"] == "status").unwrap()
}

/// One OpenAI-format answer of `text`, as llama-server streams it: usage on
/// the last chunk.
fn answer(text: &str) -> String {
    let chunk = json!({"choices":[{"index":0,"delta":{"role":"assistant","content":text},
        "finish_reason":"stop"}]});
    data_frames(&[&chunk.to_string(), "[DONE]"])
}

/// Anthropic's stream as the API writes it: the prompt's usage, cache
/// fields included, in `message_start`; `message_delta` carries only the
/// final `output_tokens`.
fn anthropic_reply(blocks: &[&str], stop: &str, input: u64, cached: u64, output: u64) -> String {
    let start = json!({"type":"message_start","message":{"id":"msg_1","type":"message",
        "role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,
        "stop_sequence":null,"usage":{"input_tokens":input,"cache_creation_input_tokens":0,
        "cache_read_input_tokens":cached,"output_tokens":1}}})
    .to_string();
    let delta = json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},
        "usage":{"output_tokens":output}})
    .to_string();
    let mut events = vec![start.as_str()];
    events.extend_from_slice(blocks);
    events.push(&delta);
    events.push(r#"{"type":"message_stop"}"#);
    typed_frames(&events)
}

/// #42: the cached part of the prompt, reported in Anthropic's
/// `message_start`, survives the call's final `message_delta` and the sum
/// over the turn's two calls, up to `turn_end.usage` and `pod status`.
#[test]
fn anthropic_cached_tokens_survive_the_calls_merge_and_the_turns_sum() {
    let call = anthropic_reply(
        &[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a.txt\"}"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ],
        "tool_use",
        10,
        2000,
        3,
    );
    let done = anthropic_reply(
        &[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It says alpha."}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
        ],
        "end_turn",
        40,
        2000,
        5,
    );
    let (_rt, server) = model_server(vec![Reply::sse(&call), Reply::sse(&done)]);
    let pod = Pod::builder()
        .args(["--provider", "anthropic", "--base-url", &server.url])
        .env("ANTHROPIC_API_KEY", "k")
        .start();
    std::fs::write(pod.workspace.join("a.txt"), "alpha\n").unwrap();
    let (end, _) = turn(&pod, "what does a.txt say?");
    assert_eq!(end["reason"], "completed", "{end}");
    assert_eq!(
        end["usage"],
        json!({"input_tokens": 4050, "output_tokens": 8, "cache_read_tokens": 4000}),
        "{end}"
    );
    let status = harness::succeeded(pod.command("status").output().unwrap());
    assert!(status.contains("(4.0k cached)"), "{status}");
}

/// #42: the same for OpenAI's `prompt_tokens_details.cached_tokens`,
/// summed over a tool call and the answer after it.
#[test]
fn openai_cached_tokens_survive_the_turns_sum() {
    let call = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":2010,"completion_tokens":3,"total_tokens":2013,"prompt_tokens_details":{"cached_tokens":1920}}}"#,
        "[DONE]",
    ]);
    let done = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"It says alpha."},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":2040,"completion_tokens":5,"total_tokens":2045,"prompt_tokens_details":{"cached_tokens":2000}}}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&call), Reply::sse(&done)]);
    let pod = openai_pod(&server, &[]);
    std::fs::write(pod.workspace.join("a.txt"), "alpha\n").unwrap();
    let (end, _) = turn(&pod, "what does a.txt say?");
    assert_eq!(end["reason"], "completed", "{end}");
    assert_eq!(
        end["usage"],
        json!({"input_tokens": 4050, "output_tokens": 8, "cache_read_tokens": 3920}),
        "{end}"
    );
}

/// #42 item 3: llama-server cuts a reply at `max_tokens` with `finish_reason:
/// "length"` and sends its usage in the same chunk's successor, as it did in
/// the trial. The turn ends `output_limit` with that usage in `turn_end`,
/// and the gauge shows the request's reported size, not the turn before's.
#[test]
fn usage_after_a_length_finish_reaches_turn_end_and_the_gauge() {
    let cut = data_frames(&[
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1765115000,"id":"chatcmpl-Qx","model":"local","system_fingerprint":"b1-unknown","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Once upon a time"}}],"created":1765115000,"id":"chatcmpl-Qx","model":"local","system_fingerprint":"b1-unknown","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1765115000,"id":"chatcmpl-Qx","model":"local","system_fingerprint":"b1-unknown","object":"chat.completion.chunk"}"#,
        r#"{"choices":[],"created":1765115000,"id":"chatcmpl-Qx","model":"local","system_fingerprint":"b1-unknown","object":"chat.completion.chunk","usage":{"completion_tokens":16,"prompt_tokens":1559,"total_tokens":1575},"timings":{"prompt_n":1559,"prompt_ms":2100.5,"predicted_n":16,"predicted_ms":300.1}}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&answer("Hello.")), Reply::sse(&cut)]);
    let pod = openai_pod(&server, &["--max-output-tokens", "16"]);
    turn(&pod, "hi");
    let (end, frames) = turn(&pod, "tell me a story");
    assert_eq!(end["error"]["code"], "output_limit", "{end}");
    assert_eq!(
        end["usage"],
        json!({"input_tokens": 1559, "output_tokens": 16}),
        "{end}"
    );
    let status = last_status(&frames);
    assert_eq!(status["context_tokens"], 1559, "{status}");
    assert_eq!(status["context_source"], "usage", "{status}");
}

/// llama-cpp-python's answer to a request it was asked not to stream, when
/// the model calls a tool (chatml-function-calling's shape: no `index`, a
/// `function_call` beside `tool_calls`).
fn whole_tool_call(id: &str, name: &str, arguments: &str) -> String {
    json!({"id":"chatcmpl-5c","object":"chat.completion","created":1765115000,
        "model":"smollm2","choices":[{"index":0,"message":{"role":"assistant","content":null,
        "tool_calls":[{"id":id,"type":"function","function":{"name":name,"arguments":arguments}}],
        "function_call":{"name":name,"arguments":arguments}},"logprobs":null,
        "finish_reason":"tool_calls"}],
        "usage":{"prompt_tokens":1210,"completion_tokens":21,"total_tokens":1231}})
    .to_string()
}

/// llama-cpp-python's whole text answer.
fn whole_answer(text: &str) -> String {
    json!({"id":"chatcmpl-6d","object":"chat.completion","created":1765115001,
        "model":"smollm2","choices":[{"index":0,"message":{"role":"assistant","content":text},
        "logprobs":null,"finish_reason":"stop"}],
        "usage":{"prompt_tokens":1260,"completion_tokens":6,"total_tokens":1266}})
    .to_string()
}

/// The empty `200 text/event-stream` llama-cpp-python answers a streamed
/// request with when it fails after the headers.
fn empty_stream() -> Reply {
    Reply::sse("")
}

/// #42 item 1: llama-cpp-python (`--chat_format chatml-function-calling`,
/// `tool_choice: auto`) ends every streamed request in which the model
/// picks a tool with an empty stream ("Automatic streaming tool choice is
/// not supported"), and answers the same request unstreamed with the call.
/// The pod asks again without streaming, says so in a `retry`, runs the
/// call, and asks later requests with tools whole at once.
#[test]
fn an_empty_stream_after_tools_were_offered_is_asked_again_without_streaming() {
    let (_rt, server) = model_server(vec![
        empty_stream(),
        Reply::status(
            200,
            &whole_tool_call(
                "call__0_read_file_cmpl-8f",
                "read_file",
                r#"{"path": "a.txt"}"#,
            ),
        ),
        Reply::status(200, &whole_answer("It says alpha.")),
    ]);
    let pod = openai_pod(&server, &["--tool-choice", "auto"]);
    std::fs::write(pod.workspace.join("a.txt"), "alpha\n").unwrap();
    let (end, frames) = turn(&pod, "what does a.txt say?");
    assert_eq!(end["reason"], "completed", "{end}");
    let retry = frames.iter().find(|f| f["type"] == "retry").unwrap();
    let error = retry["error"].as_str().unwrap();
    assert!(error.contains("without streaming"), "{error}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].json()["stream"], true);
    for later in &requests[1..] {
        let body = later.json();
        assert_eq!(body["stream"], false, "{body}");
        assert!(body.get("stream_options").is_none(), "{body}");
        assert_eq!(body["tool_choice"], "auto", "{body}");
    }
    let results = harness::first_of(&pod.log_lines(), "tool_results").clone();
    assert!(
        results["entry"]["results"][0]["output"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{results}"
    );
    assert_eq!(
        end["usage"],
        json!({"input_tokens": 2470, "output_tokens": 27}),
        "{end}"
    );
}

/// LiteLLM 1.108 in front of llama-cpp-python: the empty stream of a tool
/// call it could not stream arrives as a bare `finish_reason: "stop"`
/// (these are the bytes it sent).
const LITELLM_EMPTY: &str = "data: {\"id\":\"chatcmpl-6ed6f342-358e-4d9f-bc8a-7e0c1fb18842\",\"object\":\"chat.completion.chunk\",\"created\":1796667731,\"model\":\"openai/local\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"id\":\"chatcmpl-6ed6f342-358e-4d9f-bc8a-7e0c1fb18842\",\"object\":\"chat.completion.chunk\",\"created\":1796667731,\"model\":\"openai/local\",\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n\
data: [DONE]\n\n";

/// LiteLLM's whole reply with the call (its shape: `provider_specific_fields`,
/// llama-cpp-python's `function_call` passed on).
fn litellm_whole_tool_call(name: &str, arguments: &str) -> String {
    json!({"id":"chatcmpl-c410d4e5-15a3-4b5a-9278-847d43000b7c","created":1796667736,
        "model":"openai/local","object":"chat.completion","choices":[{"finish_reason":"tool_calls",
        "index":0,"message":{"role":"assistant","tool_calls":[{"function":{"arguments":arguments,
        "name":name},"id":format!("call__0_{name}_cmpl-faefa40a"),"type":"function"}],
        "function_call":{"arguments":arguments,"name":format!("{name}:")},"content":null},
        "provider_specific_fields":{},"logprobs":null}],
        "usage":{"completion_tokens":9,"prompt_tokens":211,"total_tokens":220}})
    .to_string()
}

/// LiteLLM's stream of a text answer, with the usage it counts itself.
fn litellm_answer(text: &str) -> String {
    let id = "chatcmpl-fab5c4af-0144-4759-966d-054f2704b037";
    data_frames(&[
        &json!({"id":id,"object":"chat.completion.chunk","created":1796667462,
            "model":"openai/local","choices":[{"index":0,"delta":{"role":"assistant"}}]})
        .to_string(),
        &json!({"id":id,"object":"chat.completion.chunk","created":1796667462,
            "model":"openai/local","choices":[{"index":0,"delta":{"content":text}}]})
        .to_string(),
        &json!({"id":id,"object":"chat.completion.chunk","created":1796667462,
            "model":"openai/local","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})
        .to_string(),
        &json!({"id":id,"created":1796667462,"model":"openai/local",
            "object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}],
            "usage":{"completion_tokens":5,"prompt_tokens":240,"total_tokens":245}})
        .to_string(),
        "[DONE]",
    ])
}

/// Through LiteLLM, llama-cpp-python's failure to stream a tool call is a
/// reply that stops without a word, which the pod took for a complete
/// answer: the turn "completed" having said and done nothing. The pod asks
/// for such a reply whole (a `retry` says so) and runs the call; since a
/// model may also mean to say nothing, later requests stream again.
#[test]
fn a_reply_that_stops_without_a_word_after_tools_were_offered_is_asked_again_whole() {
    let (_rt, server) = model_server(vec![
        Reply::sse(LITELLM_EMPTY),
        Reply::status(
            200,
            &litellm_whole_tool_call("read_file", r#"{"path": "a.txt" }"#),
        ),
        Reply::sse(&litellm_answer("It says alpha.")),
    ]);
    let pod = openai_pod(
        &server,
        &["--model", "openai/local", "--tool-choice", "auto"],
    );
    std::fs::write(pod.workspace.join("a.txt"), "alpha\n").unwrap();
    let (end, frames) = turn(&pod, "what does a.txt say?");
    assert_eq!(end["reason"], "completed", "{end}");
    let retry = frames.iter().find(|f| f["type"] == "retry").unwrap();
    let error = retry["error"].as_str().unwrap();
    assert!(error.contains("whole, without streaming"), "{error}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let streamed: Vec<Value> = requests
        .iter()
        .map(|r| r.json()["stream"].clone())
        .collect();
    assert_eq!(streamed, [true, false, true]);
    let results = harness::first_of(&pod.log_lines(), "tool_results").clone();
    assert!(
        results["entry"]["results"][0]["output"]
            .as_str()
            .unwrap()
            .contains("alpha"),
        "{results}"
    );
    let said = frames
        .iter()
        .rfind(|f| f["type"] == "entry" && f["entry"]["kind"] == "assistant_items")
        .unwrap();
    assert_eq!(
        said["entry"]["items"][0]["text"], "It says alpha.",
        "{said}"
    );
}

/// llama-cpp-python's 400 for a prompt over its `--n_ctx`, as its server
/// words `Requested tokens (N) exceed context window of M`.
fn llama_cpp_python_overflow(window: u64, requested: u64) -> String {
    json!({"error":{"message":format!("This model's maximum context length is {window} tokens. \
        However, you requested {requested} tokens ({requested} in the messages, 0 in the \
        completion). Please reduce the length of the messages or completion."),
        "type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})
    .to_string()
}

/// #42 item 2: llama-cpp-python fails a streamed request over its context
/// with an empty stream. Asked again whole, it says why (a 400); the pod
/// compacts, the input still does not fit, and the turn ends
/// `context_overflow` — and that input is not joined to the next message,
/// so the session goes on.
#[test]
fn an_overflow_that_ends_in_an_empty_stream_does_not_stick_the_session() {
    let paste = "an enormous paste of a log file ".repeat(2300);
    let (_rt, server) = model_server(vec![
        Reply::sse(&answer("Hello!")),
        empty_stream(),
        Reply::status(400, &llama_cpp_python_overflow(16384, 21000)),
        Reply::sse(&answer("Summary: the user greeted the model.")),
        Reply::status(200, &whole_answer("A short answer.")),
    ]);
    let pod = openai_pod(&server, &[]);
    turn(&pod, "hello");
    let (end, _) = turn(&pod, &paste);
    assert_eq!(end["error"]["code"], "context_overflow", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(message.contains("maximum context length"), "{message}");
    let (end, _) = turn(&pod, "a short question");
    assert_eq!(end["reason"], "completed", "{end}");
    let last = server.requests().last().unwrap().json();
    let messages = last["messages"].to_string();
    assert!(messages.contains("a short question"), "{messages}");
    assert!(
        !messages.contains("an enormous paste"),
        "joined: {messages}"
    );
}

/// #42 item 4: a compaction due before a turn's first model call carries
/// the turn's input into the new session after the summary, so the model
/// answers what was asked, not the summary.
#[test]
fn compaction_before_the_first_call_keeps_the_users_input_after_the_summary() {
    let long_answer: String = (0..130)
        .map(|i| format!("point {i:03} of the explanation. "))
        .collect();
    let (_rt, server) = model_server(vec![
        Reply::sse(&answer(&long_answer)),
        Reply::sse(&answer("Summary: the code was explained.")),
        Reply::sse(&answer("The tests are in tests/.")),
    ]);
    let pod = openai_pod(&server, &["--context-window", "6000"]);
    let (end, _) = turn(&pod, "explain the code");
    assert_eq!(end["reason"], "completed", "{end}");
    let question = format!("where are the tests? {}", "context line ".repeat(280));
    let (end, frames) = turn(&pod, &question);
    assert_eq!(end["reason"], "completed", "{end}");
    assert!(
        frames.iter().any(|f| f["type"] == "compact_done"),
        "compacted before the first call"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let asked = requests[2].json()["messages"].to_string();
    assert!(
        asked.contains("Summary: the code was explained."),
        "{asked}"
    );
    assert!(asked.contains("where are the tests?"), "{asked}");
    let summary_at = asked.find("Summary: the code").unwrap();
    assert!(
        asked.find("where are the tests?").unwrap() > summary_at,
        "{asked}"
    );
    let kinds = harness::kinds(&pod.log_lines());
    let input_at = kinds.iter().position(|k| k == "user_input").unwrap();
    assert_eq!(kinds[input_at - 1], "hook_injected_items", "{kinds:?}");
}

/// #42 item 5: a reply cut at the output limit after one complete tool
/// call (llama-server streamed it whole, then the next was cut): the call
/// is recorded as not run because of the cut, and `pod send` says so
/// under its `⚙` line.
#[test]
fn complete_calls_of_a_reply_cut_at_the_output_limit_are_said_not_to_have_run() {
    let cut = data_frames(&[
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo ran > ran.txt\"}"}}]}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ec"}}]}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[],"object":"chat.completion.chunk","usage":{"completion_tokens":32,"prompt_tokens":1600,"total_tokens":1632}}"#,
        "[DONE]",
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&cut)]);
    let pod = openai_pod(&server, &["--max-output-tokens", "32"]);
    let out = pod
        .command("send")
        .args(["--text", "run it"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "pod: tool call call_a was not run: the model's reply was cut at the output limit"
        ),
        "{stdout}{stderr}"
    );
    assert!(!pod.workspace.join("ran.txt").exists());
    let results = harness::first_of(&pod.log_lines(), "tool_results").clone();
    let output = results["entry"]["results"][0]["output"].as_str().unwrap();
    assert!(output.contains("cut at the output limit"), "{output}");
    assert!(!output.contains("could be saved"), "{output}");
}

/// #42 item 6: a wrong port that reaches another web server — Python's
/// `http.server` answers a POST with a 501 HTML page — is not retried,
/// quoted as the page's text, and told to check --base-url.
#[test]
fn a_web_page_answering_501_is_not_retried_and_points_at_the_base_url() {
    let page = "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error response</h1>\n        <p>Error code: 501</p>\n        <p>Message: Unsupported method (&#x27;POST&#x27;).</p>\n        <p>Error code explanation: 501 - Server does not support this operation.</p>\n    </body>\n</html>\n";
    let (_rt, server) = model_server(vec![
        Reply::status(501, page).with_header("content-type", "text/html;charset=utf-8")
    ]);
    let pod = openai_pod(&server, &[]);
    let (end, frames) = turn(&pod, "hi");
    assert_eq!(end["error"]["code"], "provider_http", "{end}");
    assert!(!frames.iter().any(|f| f["type"] == "retry"), "not retried");
    assert_eq!(server.requests().len(), 1);
    let message = end["error"]["message"].as_str().unwrap();
    assert!(message.contains("HTTP 501"), "{message}");
    assert!(message.contains("Unsupported method"), "{message}");
    assert!(!message.contains("<p>"), "markup quoted: {message}");
    assert_eq!(
        message.matches("Error response").count(),
        1,
        "the head's title is left out: {message}"
    );
    assert!(message.contains("check --base-url"), "{message}");
}

/// #42 item 7: llama-server started with `-c 512` cannot hold pod's system
/// prompt and tools at all: the error says so, by how much, and what to
/// set — not "send a shorter input" after a "Hi".
#[test]
fn a_window_smaller_than_the_prompt_and_tools_says_what_to_set() {
    let too_small = r#"{"error":{"code":400,"message":"request (1618 tokens) exceeds the available context size (512 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1618,"n_ctx":512}}"#;
    let (_rt, server) = model_server(vec![
        Reply::status(400, too_small),
        Reply::sse(&answer("Summary: the user said hi.")),
        Reply::status(400, too_small),
    ]);
    let pod = openai_pod(&server, &[]);
    let (end, _) = turn(&pod, "Hi");
    assert_eq!(end["error"]["code"], "context_overflow", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("system prompt and tool definitions alone"),
        "{message}"
    );
    assert!(
        message.contains("context window of 512 tokens"),
        "{message}"
    );
    assert!(message.contains("--context-window"), "{message}");
    assert!(!message.contains("shorter input"), "{message}");
}

/// #42 item 8: SmolLM2 on a CPU repeated one sentence for ten minutes. A
/// reply that repeats the same text over and over is stopped and ends the
/// turn `output_limit`, long before the output limit.
#[test]
fn a_reply_that_repeats_itself_is_stopped_as_output_limit() {
    let sentence = "I will now check the file again. ";
    let chunks: Vec<String> = std::iter::once("Let me see.\n".to_owned())
        .chain(std::iter::repeat_n(sentence.to_owned(), 400))
        .map(|text| {
            json!({"choices":[{"finish_reason":null,"index":0,"delta":{"content":text}}],
                "object":"chat.completion.chunk"})
            .to_string()
        })
        .collect();
    let mut frames: Vec<&str> = chunks.iter().map(String::as_str).collect();
    let finish = r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk"}"#;
    frames.extend([finish, "[DONE]"]);
    let (_rt, server) = model_server(vec![Reply::sse(&data_frames(&frames))]);
    let pod = openai_pod(&server, &[]);
    let (end, _) = turn(&pod, "check the file");
    assert_eq!(end["error"]["code"], "output_limit", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(message.contains("repeating itself"), "{message}");
    let text = harness::first_of(&pod.log_lines(), "assistant:text").clone();
    let kept = text["entry"]["items"][0]["text"].as_str().unwrap().len();
    assert!(
        kept < sentence.len() * 150,
        "stopped early, not at the end of the stream: {kept} bytes"
    );
}

/// #42 item 9: when the server counts the prompt at half the pod's
/// estimate (its template dropped the tools: 1,559 against 3,035), the
/// gauge shows the server's count and compaction goes by the same count —
/// not by the estimate, which would compact a conversation that fits.
#[test]
fn with_reported_usage_compaction_goes_by_the_count_the_gauge_shows() {
    let counted = |prompt: u64, text: &str| {
        let chunk = json!({"choices":[{"index":0,"delta":{"role":"assistant","content":text},
            "finish_reason":"stop"}]});
        let usage = json!({"choices":[],"usage":{"prompt_tokens":prompt,"completion_tokens":5,
            "total_tokens":prompt + 5}});
        data_frames(&[&chunk.to_string(), &usage.to_string(), "[DONE]"])
    };
    let (_rt, server) = model_server(vec![
        Reply::sse(&counted(1559, "Hello!")),
        Reply::sse(&counted(1790, "Read it.")),
    ]);
    // Without the agent tools (their specs are ~430 tokens): the figures
    // are those of a 4,000-token window with the rest of the prompt.
    let pod = openai_pod(&server, &["--context-window", "4000", "--max-agents", "0"]);
    let (_, frames) = turn(&pod, "hello");
    assert_eq!(last_status(&frames)["context_tokens"], 1559);
    let (end, frames) = turn(&pod, &"a paragraph to read ".repeat(45));
    assert_eq!(end["reason"], "completed", "{end}");
    assert!(
        !frames.iter().any(|f| f["type"] == "compact_start"),
        "1,559 + 230 is under 0.8 × 4,000"
    );
    assert_eq!(last_status(&frames)["context_tokens"], 1790);
    assert_eq!(server.requests().len(), 2);
}

/// A server that sends its headers and then nothing for `stall` — a cold
/// llama-server reading pod's first prompt — before answering "ready".
fn stalled_answer(stall: std::time::Duration) -> Reply {
    Reply::Sse(vec![(stall, answer("ready").into_bytes())])
}

/// `--model-idle-timeout 1`: a server silent after its headers ends the turn
/// with the silence error about a second later, naming the flag to raise.
#[test]
fn a_silence_longer_than_the_model_idle_timeout_ends_the_turn() {
    let (_rt, server) = model_server(vec![stalled_answer(std::time::Duration::from_secs(30))]);
    let pod = openai_pod(&server, &["--model-idle-timeout", "1"]);
    let started = std::time::Instant::now();
    let (end, _) = turn(&pod, "hi");
    let took = started.elapsed();
    assert_eq!(end["error"]["code"], "provider_stream", "{end}");
    let message = end["error"]["message"].as_str().unwrap();
    assert!(message.contains("no data from"), "{message}");
    assert!(message.contains("for 1s"), "{message}");
    assert!(message.contains("--model-idle-timeout"), "{message}");
    assert!(
        took >= std::time::Duration::from_secs(1) && took < std::time::Duration::from_secs(15),
        "gave up after {took:?}"
    );
    assert_eq!(server.requests().len(), 1, "a silence is not retried");
}

/// The same stall, longer than that one-second setting, under the default
/// (300 s): the turn waits it out and gets the answer.
#[test]
fn the_default_model_idle_timeout_waits_out_a_stall_of_seconds() {
    let stall = std::time::Duration::from_secs(3);
    let (_rt, server) = model_server(vec![stalled_answer(stall)]);
    let pod = openai_pod(&server, &[]);
    let started = std::time::Instant::now();
    let (end, frames) = turn(&pod, "hi");
    assert!(
        started.elapsed() >= stall,
        "answered before the stall ended"
    );
    assert_eq!(end["reason"], "completed", "{end}");
    assert!(
        frames.iter().any(|f| f.to_string().contains("ready")),
        "the answer after the stall reached the client"
    );
}
