//! The Anthropic provider against a real HTTP server on 127.0.0.1.

mod support;

use std::borrow::Cow;

use std::sync::Arc;

use pod::protocol::TurnErrorCode;
use pod::protocol::{AssistantItem, ToolResult, Usage};
use pod::provider::{
    build, ChatMessage, ModelEvent, ModelRequest, Provider, ProviderConfig, ProviderKind,
    RetryPolicy, ToolSpec,
};
use serde_json::json;
use support::{collect, refused_url, split_retries, typed_frames, Reply, Server};

fn provider(base_url: &str) -> Arc<dyn Provider> {
    build(&ProviderConfig {
        base_url: Some(base_url.to_owned()),
        anthropic_api_key: Some("sk-ant-test".into()),
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

const START: &str = r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":1}}}"#;
const TEXT_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const PING: &str = r#"{"type": "ping"}"#;
const HELLO: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#;
const BANG: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#;
const STOP0: &str = r#"{"type":"content_block_stop","index":0}"#;
const DELTA: &str = r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#;
const END: &str = r#"{"type":"message_stop"}"#;

fn text_turn() -> String {
    typed_frames(&[START, TEXT_START, PING, HELLO, BANG, STOP0, DELTA, END])
}

fn text_events() -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta("Hello".into()),
        ModelEvent::TextDelta("!".into()),
        ModelEvent::BlockEnd,
        ModelEvent::Usage(Usage {
            input_tokens: 30,
            output_tokens: 15,
        }),
    ]
}

#[tokio::test]
async fn text_turn_streams_deltas_and_usage() {
    let server = Server::start(vec![Reply::sse_chunked(
        &text_turn(),
        11,
        std::time::Duration::from_millis(1),
    )])
    .await;
    let provider = provider(&server.url);
    assert_eq!(
        (provider.name(), provider.model()),
        ("anthropic", "claude-sonnet-4-5")
    );
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!((events, error), (text_events(), None));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.json(),
        json!({"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,
               "messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]})
    );
}

#[tokio::test]
async fn thinking_text_and_tool_use_blocks_stream_in_order() {
    let frames = typed_frames(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the file."}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}"#,
        STOP0,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading."}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"read_file","input":{}}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
        r#"{"type":"content_block_stop","index":2}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        END,
    ]);
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("Need the file.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::TextDelta("Reading.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::ToolCallStart {
                call_id: "toolu_01".into(),
                name: "read_file".into()
            },
            ModelEvent::ToolCallArgsDelta {
                call_id: "toolu_01".into(),
                delta: "{\"path\": \"a".into()
            },
            ModelEvent::ToolCallArgsDelta {
                call_id: "toolu_01".into(),
                delta: ".txt\"}".into()
            },
            ModelEvent::BlockEnd,
            ModelEvent::Usage(Usage {
                input_tokens: 30,
                output_tokens: 89
            }),
        ]
    );
}

#[tokio::test]
async fn request_projects_tool_use_and_tool_results_with_alternation() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
    let provider = build(&ProviderConfig {
        kind: Some(ProviderKind::Anthropic),
        model: Some("claude-opus-4-1".into()),
        base_url: Some(server.url.clone()),
        anthropic_api_key: Some("k".into()),
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
                        text: "Reading.".into(),
                    }),
                    Cow::Owned(AssistantItem::ToolCall {
                        call_id: "toolu_01".into(),
                        name: "read_file".into(),
                        arguments: json!({"path":"a.txt"}),
                    }),
                ],
            },
            ChatMessage::ToolResults {
                results: vec![Cow::Owned(ToolResult {
                    call_id: "toolu_01".into(),
                    output: "no such file".into(),
                    is_error: true,
                })],
            },
            ChatMessage::User {
                text: "build finished".into(),
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
    assert_eq!(
        server.requests()[0].json(),
        json!({
            "model": "claude-opus-4-1",
            "max_tokens": 8192,
            "stream": true,
            "system": "You are pod.",
            "messages": [
                {"role":"user","content":[{"type":"text","text":"read a.txt"}]},
                {"role":"assistant","content":[
                    {"type":"text","text":"Reading."},
                    {"type":"tool_use","id":"toolu_01","name":"read_file","input":{"path":"a.txt"}}]},
                {"role":"user","content":[
                    {"type":"tool_result","tool_use_id":"toolu_01","content":"no such file","is_error":true},
                    {"type":"text","text":"build finished"}]}
            ],
            "tools": [{"name":"read_file","description":"Reads a file.",
                "input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]
        })
    );
}

#[tokio::test]
async fn stream_cut_before_message_stop_is_an_error_after_the_tokens() {
    let server = Server::start(vec![Reply::sse(&typed_frames(&[START, TEXT_START, HELLO]))]).await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hello".into())]);
    let error = error.unwrap().message;
    assert!(error.starts_with("anthropic: the stream from"), "{error}");
    assert!(
        error.contains("ended before the reply was complete"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let server = Server::start(vec![
        Reply::status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
        )
        .with_header("retry-after", "0"),
        Reply::sse(&text_turn()),
    ])
    .await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(
        retries,
        vec![(
            1,
            0,
            "anthropic: HTTP 429 Too Many Requests: Number of request tokens has exceeded \
             your per-minute rate limit"
                .into()
        )]
    );
    assert_eq!(reply, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_status_and_server_error_are_retried() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = Server::start(vec![
        Reply::status(529, overloaded),
        Reply::status(
            500,
            r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
        ),
        Reply::sse(&text_turn()),
    ])
    .await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(
        retries,
        vec![
            (1, 1, "anthropic: HTTP 529: Overloaded".into()),
            (
                2,
                2,
                "anthropic: HTTP 500 Internal Server Error: Internal server error".into()
            )
        ]
    );
    assert_eq!(reply, text_events());
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn overloaded_event_before_any_token_is_retried_but_not_after() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = Server::start(vec![
        Reply::sse(&typed_frames(&[START, overloaded])),
        Reply::sse(&typed_frames(&[START, TEXT_START, HELLO, overloaded])),
    ])
    .await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    let (retries, reply) = split_retries(events);
    assert_eq!(retries.len(), 1);
    assert_eq!(reply, vec![ModelEvent::TextDelta("Hello".into())]);
    let error = error.unwrap();
    assert_eq!(error.message, "anthropic: overloaded_error: Overloaded");
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unauthorized_is_an_http_error_quoting_the_provider_and_not_retried() {
    let server = Server::start(vec![Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    )])
    .await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert!(events.is_empty(), "no retry announced: {events:?}");
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderHttp);
    let message = error.message;
    assert!(
        message.contains("HTTP 401 Unauthorized: invalid x-api-key"),
        "{message}"
    );
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn bad_request_quotes_the_message() {
    let server = Server::start(vec![Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}"#,
    )])
    .await;
    let (_, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(
        error.unwrap().message,
        "anthropic: HTTP 400 Bad Request: messages: roles must alternate"
    );
}

#[tokio::test]
async fn garbage_in_the_stream_is_a_clear_error() {
    let server = Server::start(vec![Reply::sse(
        "event: message_start\ndata: {not json\n\n",
    )])
    .await;
    let (_, error) = collect(provider(&server.url).stream(&hello())).await;
    let error = error.unwrap().message;
    assert!(
        error.starts_with("anthropic: unparseable data in the response stream"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_names_the_url() {
    let base = refused_url().await;
    let (events, error) = collect(provider(&base).stream(&hello())).await;
    let error = error.unwrap();
    assert_eq!(error.code, TurnErrorCode::ProviderUnreachable);
    assert!(
        error
            .message
            .contains(&format!("anthropic: cannot connect to {base}/v1/messages")),
        "{}",
        error.message
    );
    let (retries, reply) = split_retries(events);
    assert!(reply.is_empty());
    assert_eq!(
        retries.iter().map(|r| r.0).collect::<Vec<_>>(),
        [1, 2, 3, 4],
        "each retry announced before it happens"
    );
}

#[tokio::test]
async fn path_prefix_base_urls_are_kept() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
    let (_, error) =
        collect(provider(&format!("{}/anthropic/", server.url)).stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(server.requests()[0].path, "/anthropic/v1/messages");
}
