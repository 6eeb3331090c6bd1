//! The OpenAI-compatible provider against a real HTTP server on 127.0.0.1.

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
use support::{collect, data_frames, refused_url, split_retries, Reply, Server};

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
        messages: vec![ChatMessage::User { text: "hi".into() }],
        tools: Vec::new().into(),
        cache: None,
    }
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
        ModelEvent::Usage(Usage {
            input_tokens: 12,
            output_tokens: 3,
        }),
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
    assert_eq!(
        request.json(),
        json!({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],
               "stream":true,"stream_options":{"include_usage":true}})
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
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
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
                output_tokens: 20
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
    assert_eq!(
        retries,
        vec![
            (1, 1, "openai: HTTP 500 Internal Server Error: boom".into()),
            (
                2,
                2,
                "openai: HTTP 503 Service Unavailable: upstream unavailable".into()
            ),
            (3, 4, "openai: HTTP 408 Request Timeout".into()),
        ]
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
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let provider = provider(&format!("{}/v1", server.url), Some("k"));
    let (events, error) = collect(provider.stream(&hello())).await;
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
