//! The OpenAI-compatible provider against a real HTTP server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod support;

use std::borrow::Cow;

use std::sync::Arc;
use std::time::Duration;

use pod::protocol::TurnErrorCode;
use pod::protocol::{AssistantItem, ToolResult, Usage};
use pod::provider::{
    build, ChatMessage, ModelEvent, ModelRequest, Provider, ProviderConfig, ProviderKind,
    RetryPolicy, ToolSpec,
};
use serde_json::json;
use support::{assert_retries, collect, data_frames, refused_url, split_retries, Reply, Server};

fn provider(base_url: &str, key: Option<&str>) -> Arc<dyn Provider> {
    build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(base_url.to_owned()),
        openai_api_key: key.map(str::to_owned),
        retry: RetryPolicy::fast(),
        ..ProviderConfig::default()
    })
    .unwrap()
}

fn hello() -> ModelRequest<'static> {
    ModelRequest {
        model: None,
        system: "".into(),
        messages: vec![ChatMessage::User {
            text: "hi".into(),
            injected: false,
        }],
        tools: Vec::new().into(),
        cache: None,
        max_output_tokens: None,
        images: Vec::new(),
    }
}

/// What the provider makes of one reply of SSE `body` from a real server on
/// 127.0.0.1, its base URL `{server}{path}`.
async fn stream_body(
    body: &str,
    path: &str,
    key: Option<&str>,
) -> (Vec<ModelEvent>, Option<pod::provider::ModelError>) {
    let server = Server::start(vec![Reply::sse(body)]).await;
    let provider = provider(&format!("{}{path}", server.url), key);
    collect(provider.stream(&hello())).await
}

fn usage(input_tokens: u64, output_tokens: u64) -> ModelEvent {
    ModelEvent::Usage(Usage {
        input_tokens,
        output_tokens,
        ..Default::default()
    })
}

const ROLE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#;
const HEL: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}"#;
const LO: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo ✓"},"logprobs":null,"finish_reason":null}],"usage":null}"#;
const STOP: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#;
const USAGE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#;

fn text_turn() -> String {
    data_frames(&[ROLE, HEL, LO, STOP, USAGE, "[DONE]"])
}

fn text_events() -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta("Hel".into()),
        ModelEvent::TextDelta("lo ✓".into()),
        ModelEvent::BlockEnd,
        usage(12, 3),
    ]
}

#[tokio::test]
async fn text_turn_streams_deltas_and_usage() {
    let server = Server::start(vec![Reply::sse_chunked(
        &text_turn(),
        7,
        Duration::from_millis(1),
    )])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("sk-test"));
    assert_eq!((provider.name(), provider.model()), ("openai", "gpt-4o"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(
        request.header("user-agent").unwrap().starts_with("pod/"),
        "{:?}",
        request.headers
    );
    assert_eq!(
        request.json(),
        json!({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],
               "stream":true,"stream_options":{"include_usage":true},"max_tokens":8192})
    );
}

#[tokio::test]
async fn tool_calls_are_assembled_by_index_with_block_ends() {
    let frames = data_frames(&[
        ROLE,
        r#"{"choices":[{"index":0,"delta":{"content":"Looking."},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a.txt\"}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"list_dir","arguments":"{}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20}}"#,
        "[DONE]",
    ]);
    let (events, error) = stream_body(&frames, "/v1", Some("k")).await;
    assert_eq!(error, None);
    let start = |id: &str, name: &str| ModelEvent::ToolCallStart {
        call_id: id.into(),
        name: name.into(),
    };
    let args = |id: &str, delta: &str| ModelEvent::ToolCallArgsDelta {
        call_id: id.into(),
        delta: delta.into(),
    };
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Looking.".into()),
            ModelEvent::BlockEnd,
            start("call_abc", "read_file"),
            args("call_abc", "{\"pa"),
            args("call_abc", "th\":\"a.txt\"}"),
            ModelEvent::BlockEnd,
            start("call_def", "list_dir"),
            args("call_def", "{}"),
            ModelEvent::BlockEnd,
            ModelEvent::Usage(Usage {
                input_tokens: 40,
                output_tokens: 20,
                ..Default::default()
            }),
        ]
    );
}

#[tokio::test]
async fn request_projects_system_tools_assistant_calls_and_tool_results() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        model: Some("llama3.2".into()),
        base_url: Some(format!("{}/v1/", server.url)),
        retry: RetryPolicy::fast(),
        ..ProviderConfig::default()
    })
    .unwrap();
    let request = ModelRequest {
        model: None,
        system: "You are pod.".into(),
        messages: vec![
            ChatMessage::User {
                text: "read a.txt".into(),
                injected: false,
            },
            ChatMessage::Assistant {
                items: vec![
                    Cow::Owned(AssistantItem::Reasoning {
                        text: "private".into(),
                    }),
                    Cow::Owned(AssistantItem::Text {
                        text: "Looking.".into(),
                    }),
                    Cow::Owned(AssistantItem::ToolCall {
                        call_id: "call_abc".into(),
                        name: "read_file".into(),
                        arguments: json!({"path":"a.txt"}),
                    }),
                    Cow::Owned(AssistantItem::ToolCall {
                        call_id: "call_def".into(),
                        name: "list_dir".into(),
                        arguments: json!({}),
                    }),
                ],
            },
            ChatMessage::ToolResults {
                results: vec![
                    Cow::Owned(ToolResult {
                        call_id: "call_abc".into(),
                        output: "hello".into(),
                        is_error: false,
                    }),
                    Cow::Owned(ToolResult {
                        call_id: "call_def".into(),
                        output: "no such dir".into(),
                        is_error: true,
                    }),
                ],
            },
        ],
        tools: Cow::Owned(vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
        }]),
        cache: None,
        max_output_tokens: None,
        images: Vec::new(),
    };
    let (_, error) = collect(provider.stream(&request)).await;
    assert_eq!(error, None);
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.header("authorization"), None);
    assert_eq!(
        recorded.json(),
        json!({
            "model": "llama3.2",
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 8192,
            "messages": [
                {"role":"system","content":"You are pod."},
                {"role":"user","content":"read a.txt"},
                {"role":"assistant","content":"Looking.","tool_calls":[
                    {"id":"call_abc","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}},
                    {"id":"call_def","type":"function","function":{"name":"list_dir","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"call_abc","content":"hello"},
                {"role":"tool","tool_call_id":"call_def","content":"no such dir"}
            ],
            "tools": [{"type":"function","function":{"name":"read_file","description":"Reads a file.",
                "parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]
        })
    );
}

#[tokio::test]
async fn stream_cut_after_tokens_is_an_error_after_them() {
    let server = Server::start(vec![Reply::sse(&data_frames(&[ROLE, HEL]))]).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hel".into())]);
    let error = error.unwrap().message;
    assert!(
        error.contains("ended before the reply was complete"),
        "{error}"
    );
    assert_eq!(
        server.requests().len(),
        1,
        "no retry once tokens were shown"
    );
}

#[tokio::test]
async fn stream_cut_before_any_token_is_retried() {
    let server = Server::start(vec![
        Reply::sse(&data_frames(&[ROLE])),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(retries.len(), 1);
    assert!(
        retries[0].2.contains("ended before the reply was complete"),
        "{retries:?}"
    );
    assert_eq!(reply, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = Server::start(vec![
        Reply::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        )
        .with_header("retry-after", "0"),
        Reply::sse(&text_turn()),
    ])
    .await;
    // Backoff alone would wait a minute: only retry-after makes this fast.
    let slow = RetryPolicy {
        base_delay: Duration::from_secs(60),
        max_delay: Duration::from_secs(60),
        ..RetryPolicy::fast()
    };
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: slow,
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    // The retry is announced, with its delay, before the reply it led to.
    assert_eq!(
        events[0],
        ModelEvent::Retry {
            attempt: 1,
            max_attempts: 4,
            delay_ms: 0,
            error: "openai: HTTP 429 Too Many Requests: Rate limit reached".into()
        }
    );
    assert_eq!(events[1..], text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_and_timeouts_are_retried_then_succeed() {
    let server = Server::start(vec![
        Reply::status(500, r#"{"error":{"message":"boom"}}"#),
        Reply::status(503, "upstream unavailable"),
        Reply::status(408, ""),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_retries(
        &retries,
        &[
            (1, 1, "openai: HTTP 500 Internal Server Error: boom"),
            (
                2,
                2,
                "openai: HTTP 503 Service Unavailable: upstream unavailable",
            ),
            (3, 4, "openai: HTTP 408 Request Timeout"),
        ],
    );
    assert_eq!(reply, text_events());
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn persistent_server_errors_give_up_with_the_status_and_message() {
    let replies = vec![Reply::status(502, r#"{"error":{"message":"bad gateway"}}"#); 5];
    let server = Server::start(replies).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    let (retries, reply) = split_retries(events);
    assert_eq!((retries.len(), reply), (4, vec![]));
    let error = error.unwrap();
    assert_eq!(
        error.message,
        "openai: HTTP 502 Bad Gateway: bad gateway (gave up after 4 retries)"
    );
    assert_eq!(error.code, TurnErrorCode::ProviderHttp);
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn unauthorized_is_an_http_error_quoting_the_provider_and_not_retried() {
    let server = Server::start(vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-bad.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    )])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("sk-bad"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty(), "no retry announced: {events:?}");
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderHttp);
    let message = error.message;
    assert!(
        message.contains("HTTP 401 Unauthorized: Incorrect API key provided: sk-bad."),
        "{message}"
    );
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn other_statuses_quote_the_body_error_and_are_final() {
    let server = Server::start(vec![Reply::status(
        404,
        r#"{"error":"model \"nope\" not found, try pulling it first"}"#,
    )])
    .await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty());
    assert_eq!(
        error.unwrap().message,
        "openai: HTTP 404 Not Found: model \"nope\" not found, try pulling it first"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn garbage_in_the_stream_is_a_clear_error() {
    let server = Server::start(vec![Reply::sse("data: <html>oops</html>\n\n")]).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (_, error) = collect(provider.stream(&hello())).await;
    let error = error.unwrap().message;
    assert!(
        error.starts_with("openai: unparseable data in the response stream"),
        "{error}"
    );
    assert!(error.contains("<html>oops</html>"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn error_object_mid_stream_is_reported() {
    let frames = data_frames(&[HEL, r#"{"error":{"message":"context length exceeded"}}"#]);
    let (events, error) = stream_body(&frames, "/v1", Some("k")).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hel".into())]);
    assert!(error.unwrap().message.contains("context length exceeded"));
}

#[tokio::test]
async fn connection_refused_names_the_url() {
    let base = format!("{}/v1", refused_url().await);
    let provider = provider(&base, None);
    let (events, error) = collect(provider.stream(&hello())).await;
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderUnreachable);
    let message = error.message;
    assert!(
        message.contains(&format!("cannot connect to {base}/chat/completions")),
        "{message}"
    );
    assert!(message.contains("gave up after 4 retries"), "{message}");
    let (retries, _) = split_retries(events);
    assert_eq!(retries.len(), 4, "every retry is announced: {retries:?}");
}

#[tokio::test]
async fn tls_to_a_server_without_tls_fails_at_once() {
    // A plain-HTTP server answering whatever it is sent: the TLS handshake
    // reads garbage, which no retry can change.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    let provider = provider(&format!("https://127.0.0.1:{port}/v1"), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty(), "not retried: {events:?}");
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderUnreachable);
    assert!(error.message.contains("TLS"), "{}", error.message);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn path_prefix_base_urls_are_kept() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
    let provider = provider(&format!("{}/proxy/openai/v1", server.url), Some("k"));
    let (_, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(
        server.requests()[0].path,
        "/proxy/openai/v1/chat/completions"
    );
}

#[tokio::test]
async fn silence_mid_stream_hits_the_idle_timeout() {
    let server = Server::start(vec![Reply::Sse(vec![
        (Duration::ZERO, data_frames(&[HEL]).into_bytes()),
        (
            Duration::from_secs(3),
            data_frames(&["[DONE]"]).into_bytes(),
        ),
    ])])
    .await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: RetryPolicy {
            idle_timeout: Duration::from_millis(200),
            ..RetryPolicy::fast()
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hel".into())]);
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert!(error.message.contains("no data from"), "{}", error.message);
}

#[tokio::test]
async fn json_instead_of_a_stream_is_reported_not_retried() {
    let server = Server::start(vec![Reply::status(
        200,
        r#"{"error":{"message":"streaming is not supported"}}"#,
    )])
    .await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (_, error) = collect(provider.stream(&hello())).await;
    let error = error.unwrap().message;
    assert!(error.contains("expected an event stream"), "{error}");
    assert!(error.contains("streaming is not supported"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

/// The events of one whole tool call.
fn call_events(id: &str, name: &str, args: &[&str]) -> Vec<ModelEvent> {
    let mut events = vec![ModelEvent::ToolCallStart {
        call_id: id.into(),
        name: name.into(),
    }];
    events.extend(args.iter().map(|a| ModelEvent::ToolCallArgsDelta {
        call_id: id.into(),
        delta: (*a).into(),
    }));
    events.push(ModelEvent::BlockEnd);
    events
}

#[tokio::test]
async fn ollama_whole_tool_calls_numbered_zero_and_finish_reason_stop() {
    // Ollama's bytes: each call whole in one chunk, every call with index 0
    // (told apart by id only), `finish_reason` "stop" even after tool calls.
    let frames = data_frames(&[
        r#"{"id":"chatcmpl-532","object":"chat.completion.chunk","created":1733000000,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-532","object":"chat.completion.chunk","created":1733000000,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x2","index":0,"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"b.txt\"}"}}]},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-532","object":"chat.completion.chunk","created":1733000000,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-532","object":"chat.completion.chunk","created":1733000000,"model":"qwen2.5-coder:7b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}"#,
        "[DONE]",
    ]);
    let (events, error) = stream_body(&frames, "/v1", None).await;
    assert_eq!(error, None);
    let mut expected = call_events("call_x1", "read_file", &[r#"{"path":"a.txt"}"#]);
    expected.extend(call_events(
        "call_x2",
        "read_file",
        &[r#"{"path":"b.txt"}"#],
    ));
    expected.push(usage(120, 30));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn llama_cpp_reasoning_then_a_tool_call_in_fragments_with_usage_on_the_last_chunk() {
    // llama-server (--jinja, --reasoning-format deepseek): `content: null`
    // beside the role, `reasoning_content` deltas, a call whose id and name
    // come first with empty arguments, and usage and timings on the chunk
    // that carries the finish reason.
    let frames = data_frames(&[
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"The user wants"}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":" a file."}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"Xq9rT2","type":"function","function":{"name":"read_file","arguments":""}}]}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"a.txt\"}"}}]}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","system_fingerprint":"b5000-abc","object":"chat.completion.chunk","usage":{"completion_tokens":21,"prompt_tokens":95,"total_tokens":116},"timings":{"prompt_n":95,"prompt_ms":80.1,"predicted_n":21,"predicted_ms":300.2}}"#,
        "[DONE]",
    ]);
    let (events, error) = stream_body(&frames, "/v1", None).await;
    assert_eq!(error, None);
    let mut expected = vec![
        ModelEvent::ReasoningDelta("The user wants".into()),
        ModelEvent::ReasoningDelta(" a file.".into()),
        ModelEvent::BlockEnd,
    ];
    expected.extend(call_events(
        "Xq9rT2",
        "read_file",
        &["{\"path\":", " \"a.txt\"}"],
    ));
    expected.push(usage(95, 21));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn vllm_reasoning_content_and_a_call_named_before_its_arguments() {
    let frames = data_frames(&[
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Check it."},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Reading."},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-7c1","type":"function","index":0,"function":{"name":"read_file"}}]},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"a.txt\"}"}}]},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}"#,
        r#"{"id":"chatcmpl-9f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":60,"total_tokens":80,"completion_tokens":20}}"#,
        "[DONE]",
    ]);
    let (events, error) = stream_body(&frames, "/v1", None).await;
    assert_eq!(error, None);
    let mut expected = vec![
        ModelEvent::ReasoningDelta("Check it.".into()),
        ModelEvent::BlockEnd,
        ModelEvent::TextDelta("Reading.".into()),
        ModelEvent::BlockEnd,
    ];
    expected.extend(call_events(
        "chatcmpl-tool-7c1",
        "read_file",
        &[r#"{"path": "a.txt"}"#],
    ));
    expected.push(usage(60, 20));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn openrouter_comments_reasoning_and_crlf_without_space_or_done() {
    // OpenRouter's keep-alive comments, its `reasoning` field; CRLF line
    // endings, `data:` without a space, and no `[DONE]` after the finish
    // reason (a normal end), cut into small pieces.
    let body = ": OPENROUTER PROCESSING\r\n\r\n\
        data:{\"id\":\"gen-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"reasoning\":\"Hm.\"},\"finish_reason\":null}]}\r\n\r\n\
        : OPENROUTER PROCESSING\r\n\r\n\
        data:{\"id\":\"gen-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi ✓\",\"reasoning\":null},\"finish_reason\":null}]}\r\n\r\n\
        data:{\"id\":\"gen-1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\",\"native_finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9,\"cost\":0.0001}}\r\n\r\n";
    let server = Server::start(vec![Reply::sse_chunked(body, 5, Duration::from_millis(0))]).await;
    let provider = provider(&format!("{}/api/v1", server.url), Some("sk-or"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("Hm.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::TextDelta("Hi ✓".into()),
            ModelEvent::BlockEnd,
            ModelEvent::Usage(Usage {
                input_tokens: 7,
                output_tokens: 2,
                ..Default::default()
            }),
        ]
    );
    assert_eq!(server.requests()[0].path, "/api/v1/chat/completions");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn openrouter_error_chunk_mid_stream_quotes_the_provider_and_keeps_the_text() {
    let frames = data_frames(&[
        r#"{"id":"gen-2","choices":[{"index":0,"delta":{"role":"assistant","content":"Par"},"finish_reason":null}]}"#,
        r#"{"id":"gen-2","object":"chat.completion.chunk","created":1733000000,"model":"anthropic/claude-sonnet-4","provider":"Anthropic","error":{"code":502,"message":"Upstream provider overloaded"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
    ]);
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let provider = provider(&format!("{}/api/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Par".into())]);
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert_eq!(
        error.message,
        "openai: the server reported an error during the reply: Upstream provider overloaded"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_string_in_place_of_a_chunk_is_quoted_plainly() {
    let frames = data_frames(&[r#"{"error":"model runner has unexpectedly stopped"}"#]);
    let (_, error) = stream_body(&frames, "/v1", None).await;
    assert_eq!(
        error.unwrap().message,
        "openai: the server reported an error during the reply: model runner has unexpectedly stopped"
    );
}

#[tokio::test]
async fn a_stream_ending_without_done_before_any_finish_reason_is_cut_off() {
    let server = Server::start(vec![Reply::sse(&data_frames(&[ROLE, HEL, LO]))]).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo ✓".into())
        ]
    );
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert!(
        error
            .message
            .contains("ended before the reply was complete"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn loosely_typed_fields_are_read_not_fatal() {
    // Content as an array of parts (Mistral), null usage counts, an id as a
    // number, arguments as an object, and fields no server documents.
    let frames = data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Two "},{"type":"text","text":"parts"}]},"finish_reason":null,"future_field":{"x":1}}],"p":"abc"}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":7,"function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":null}]}"#,
        r#"{"choices":null,"usage":{"prompt_tokens":3,"completion_tokens":null}}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let (events, error) = stream_body(&frames, "/v1", None).await;
    assert_eq!(error, None);
    let mut expected = vec![
        ModelEvent::TextDelta("Two parts".into()),
        ModelEvent::BlockEnd,
        ModelEvent::ToolCallStart {
            call_id: "7".into(),
            name: "f".into(),
        },
        ModelEvent::ToolCallArgsDelta {
            call_id: "7".into(),
            delta: r#"{"a":1}"#.into(),
        },
        usage(3, 0),
    ];
    expected.push(ModelEvent::BlockEnd);
    assert_eq!(events, expected);
}

#[tokio::test]
async fn a_refused_stream_options_is_dropped_at_once_and_for_later_calls() {
    let refusal = r#"{"error":{"message":"Unknown parameter: 'stream_options.include_usage'.","type":"invalid_request_error","param":"stream_options.include_usage","code":"unknown_parameter"}}"#;
    let server = Server::start(vec![
        Reply::status(400, refusal),
        Reply::sse(&text_turn()),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events(), "no retry is announced");
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!((events, error), (text_events(), None));
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    for body in &bodies[1..] {
        assert_eq!(
            body,
            &json!({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,
                    "max_tokens":8192})
        );
    }
}

#[tokio::test]
async fn a_bad_request_not_about_stream_options_is_final() {
    let server = Server::start(vec![Reply::status(
        422,
        r#"{"object":"error","message":"This model's maximum context length is 8192 tokens.","type":"BadRequestError","param":null,"code":400}"#,
    )])
    .await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty());
    let error = error.unwrap();
    // vLLM's words for a request over the window: an overflow, which the
    // turn loop compacts for, not a plain HTTP error.
    assert_eq!(error.code, TurnErrorCode::ContextOverflow);
    assert_eq!(
        error.message,
        "openai: HTTP 422 Unprocessable Entity: This model's maximum context length is 8192 tokens."
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn permanent_statuses_are_never_retried() {
    for (status, body, quoted) in [
        (400, r#"{"detail":"Invalid request"}"#, "Invalid request"),
        (403, "Forbidden by policy", "Forbidden by policy"),
        (
            404,
            r#"{"error":{"message":"The model `x` does not exist"}}"#,
            "The model `x` does not exist",
        ),
    ] {
        let server = Server::start(vec![Reply::status(status, body)]).await;
        let provider = provider(&format!("{}/v1", server.url), Some("k"));
        let (events, error) = collect(provider.stream(&hello())).await;
        assert!(events.is_empty(), "{status}: {events:?}");
        let error = error.unwrap();
        assert_eq!(error.code, TurnErrorCode::ProviderHttp);
        assert!(
            error
                .message
                .starts_with(&format!("openai: HTTP {status} ")),
            "{}",
            error.message
        );
        assert!(error.message.contains(quoted), "{}", error.message);
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn retry_after_ms_is_honoured() {
    let server = Server::start(vec![
        Reply::status(429, r#"{"error":{"message":"Rate limit reached"}}"#)
            .with_header("retry-after-ms", "20")
            .with_header("retry-after", "60"),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: RetryPolicy {
            base_delay: Duration::from_secs(60),
            max_delay: Duration::from_secs(60),
            ..RetryPolicy::fast()
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(retries.iter().map(|r| r.1).collect::<Vec<_>>(), [20]);
    assert_eq!(reply, text_events());
}

#[tokio::test]
async fn an_absurd_retry_after_is_capped_not_a_panic() {
    let server = Server::start(vec![
        Reply::status(503, "busy").with_header("retry-after", "1e300"),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(retries.len(), 1);
    assert_eq!(reply, text_events());
}

#[tokio::test]
async fn a_whole_json_reply_instead_of_a_stream_is_read() {
    // A server that ignores `stream: true` answers with one completion.
    let whole = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done.","tool_calls":[{"id":"call_9","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}"#;
    let server = Server::start(vec![Reply::status(200, whole)]).await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let mut expected = vec![ModelEvent::TextDelta("Done.".into()), ModelEvent::BlockEnd];
    expected.extend(call_events("call_9", "read_file", &[r#"{"path":"a"}"#]));
    expected.push(usage(5, 4));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn tool_only_assistant_messages_have_empty_string_content() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let request = ModelRequest {
        model: None,
        system: "".into(),
        messages: vec![
            ChatMessage::User {
                text: "go".into(),
                injected: false,
            },
            ChatMessage::Assistant {
                items: vec![Cow::Owned(AssistantItem::ToolCall {
                    call_id: "call_1".into(),
                    name: "list_dir".into(),
                    arguments: json!({}),
                })],
            },
            ChatMessage::ToolResults {
                results: vec![Cow::Owned(ToolResult {
                    call_id: "call_1".into(),
                    output: "a.txt".into(),
                    is_error: false,
                })],
            },
        ],
        tools: Vec::new().into(),
        cache: None,
        max_output_tokens: None,
        images: Vec::new(),
    };
    let (_, error) = collect(provider.stream(&request)).await;
    assert_eq!(error, None);
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"][1],
        json!({"role":"assistant","content":"","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{}"}}]})
    );
    assert!(body.get("tools").is_none(), "no empty tools array: {body}");
}

#[tokio::test]
async fn llama_cpp_error_line_is_reported_with_its_message_not_as_a_cut_stream() {
    // llama-server reports a failure mid-stream on an `error:` line, which
    // SSE itself does not define.
    let body = format!(
        "{}error: {{\"code\":400,\"message\":\"the request exceeds the available context size, try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":9000,\"n_ctx\":8192}}\n\n",
        data_frames(&[
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1733000000,"id":"chatcmpl-Ab1","model":"qwen3","object":"chat.completion.chunk"}"#
        ])
    );
    let server = Server::start(vec![Reply::sse_chunked(&body, 3, Duration::ZERO)]).await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty(), "not retried: {events:?}");
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert_eq!(
        error.message,
        "openai: the server reported an error during the reply: the request exceeds the \
         available context size, try increasing it"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_left_open_after_the_finish_reason_is_complete_soon() {
    // No [DONE], and the connection stays open: the reply is not held up
    // for the whole idle timeout, nor reported as silence mid-reply.
    let server = Server::start(vec![Reply::Sse(vec![
        (
            Duration::ZERO,
            data_frames(&[ROLE, HEL, LO, STOP]).into_bytes(),
        ),
        (Duration::from_secs(30), Vec::new()),
    ])])
    .await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: RetryPolicy {
            idle_timeout: Duration::from_secs(60),
            ..RetryPolicy::fast()
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let started = std::time::Instant::now();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events()[..3]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_base_url_without_the_api_says_how_a_base_url_looks() {
    // Ollama without `/v1`: its router's plain 404, not an API error.
    let server = Server::start(vec![
        Reply::status(404, "404 page not found").with_header("content-type", "text/plain")
    ])
    .await;
    let provider = provider(&server.url, None);
    let (_, error) = collect(provider.stream(&hello())).await;
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderHttp);
    assert_eq!(
        error.message,
        format!(
            "openai: HTTP 404 Not Found: 404 page not found (no API answers at {}/chat/completions: \
             check --base-url; for openai it ends with the API version, e.g. \
             http://localhost:11434/v1)",
            server.url
        )
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_html_page_instead_of_a_stream_is_a_clear_error_not_retried() {
    let server = Server::start(vec![Reply::status(
        200,
        "<!doctype html><html><body>Open WebUI</body></html>",
    )
    .with_header("content-type", "text/html; charset=utf-8")])
    .await;
    let provider = provider(&server.url, None);
    let (events, error) = collect(provider.stream(&hello())).await;
    assert!(events.is_empty());
    let message = error.unwrap().message;
    assert!(
        message.contains("got an HTML page: check --base-url"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_chunk_with_a_passing_status_before_any_token_is_retried() {
    let busy = data_frames(&[
        r#"{"id":"gen-3","object":"chat.completion.chunk","created":1733000000,"model":"x","provider":"Together","error":{"code":429,"message":"Provider returned error","metadata":{"raw":"rate limited"}},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
    ]);
    let server = Server::start(vec![Reply::sse(&busy), Reply::sse(&text_turn())]).await;
    let provider = provider(&format!("{}/api/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_retries(
        &retries,
        &[(
            1,
            1,
            "openai: the server reported an error during the reply: Provider returned error",
        )],
    );
    assert_eq!(reply, text_events());
}

/// `finish_reason: "length"` as OpenAI (and llama.cpp, vLLM) send it when
/// the reply reached `max_tokens`.
const LENGTH: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}"#;

#[tokio::test]
async fn a_reply_cut_at_the_output_limit_is_an_output_limit_error_after_its_text() {
    let body = data_frames(&[ROLE, HEL, LO, LENGTH, USAGE, "[DONE]"]);
    let server = Server::start(vec![Reply::sse(&body)]).await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: RetryPolicy::fast(),
        output: pod::provider::OutputOptions {
            max_output_tokens: Some(300),
            tool_choice: None,
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo ✓".into()),
            // The usage chunk after the cut is read (#42).
            ModelEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 3,
                ..Default::default()
            }),
        ],
        "the text as far as it got, no block end (it is not a finished answer), then the usage"
    );
    let error = error.expect("a cut reply is not a completed one");
    assert_eq!(error.code, pod::protocol::TurnErrorCode::OutputLimit);
    assert!(
        error.message.contains("300 tokens") && error.message.contains("--max-output-tokens"),
        "{}",
        error.message
    );
    assert_eq!(server.requests()[0].json()["max_tokens"], json!(300));
}

#[tokio::test]
async fn an_empty_successful_stream_is_retried_once_and_explained() {
    let server = Server::start(vec![Reply::sse(""), Reply::sse(""), Reply::sse("")]).await;
    let provider = provider(&format!("{}/v1", server.url), None);
    let (events, error) = collect(provider.stream(&hello())).await;
    let (retries, reply) = split_retries(events);
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(reply.is_empty());
    let error = error.expect("two empty replies end the call");
    assert!(
        error.message.contains("empty stream") && error.message.contains("context"),
        "{}",
        error.message
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_server_that_wants_max_completion_tokens_gets_it_at_once_and_later() {
    let refusal = r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#;
    let server = Server::start(vec![
        Reply::status(400, refusal),
        Reply::sse(&text_turn()),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    for _ in 0..2 {
        let (events, error) = collect(provider.stream(&hello())).await;
        assert_eq!((events, error), (text_events(), None));
    }
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["max_tokens"], json!(8192));
    for body in &bodies[1..] {
        assert_eq!(body["max_completion_tokens"], json!(8192));
        assert!(body.get("max_tokens").is_none(), "{body}");
    }
}

#[tokio::test]
async fn tool_choice_is_sent_only_when_asked_for_and_only_with_tools() {
    let server = Server::start(vec![Reply::sse(&text_turn()), Reply::sse(&text_turn())]).await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Openai),
        base_url: Some(format!("{}/v1", server.url)),
        retry: RetryPolicy::fast(),
        output: pod::provider::OutputOptions {
            max_output_tokens: None,
            tool_choice: Some(pod::provider::ToolChoice::Auto),
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let with_tools = ModelRequest {
        tools: Cow::Owned(vec![ToolSpec {
            name: "f".into(),
            description: "does f".into(),
            parameters: json!({"type": "object"}),
        }]),
        ..hello()
    };
    collect(provider.stream(&with_tools)).await;
    collect(provider.stream(&hello())).await;
    let bodies: Vec<_> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["tool_choice"], json!("auto"));
    assert!(bodies[1].get("tool_choice").is_none(), "{}", bodies[1]);
}
