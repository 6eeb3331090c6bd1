//! The Anthropic provider against a real HTTP server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

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
use support::{assert_retries, collect, refused_url, split_retries, typed_frames, Reply, Server};

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
            cache_read_tokens: 5,
            cache_write_tokens: 0,
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
               "messages":[{"role":"user","content":[{"type":"text","text":"hi",
                   "cache_control":{"type":"ephemeral"}}]}]})
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
                output_tokens: 89,
                // Read from `message_start`: `message_delta` gives
                // only the output.
                cache_read_tokens: 5,
                cache_write_tokens: 0,
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
                injected: false,
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
                injected: true,
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
    assert_eq!(
        server.requests()[0].json(),
        json!({
            "model": "claude-opus-4-1",
            "max_tokens": 8192,
            "stream": true,
            // Prompt-cache breakpoints on the stable prefix (the system
            // prompt and the tools) and on the conversation's last message.
            "system": [{"type":"text","text":"You are pod.","cache_control":{"type":"ephemeral"}}],
            "messages": [
                {"role":"user","content":[{"type":"text","text":"read a.txt"}]},
                {"role":"assistant","content":[
                    {"type":"text","text":"Reading."},
                    {"type":"tool_use","id":"toolu_01","name":"read_file","input":{"path":"a.txt"}}]},
                {"role":"user","content":[
                    {"type":"tool_result","tool_use_id":"toolu_01","content":"no such file","is_error":true},
                    {"type":"text","text":"build finished","cache_control":{"type":"ephemeral"}}]}
            ],
            "tools": [{"name":"read_file","description":"Reads a file.",
                "input_schema":{"type":"object","properties":{"path":{"type":"string"}}},
                "cache_control":{"type":"ephemeral"}}]
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
    assert_retries(
        &retries,
        &[
            (1, 1, "anthropic: HTTP 529: Overloaded"),
            (
                2,
                2,
                "anthropic: HTTP 500 Internal Server Error: Internal server error",
            ),
        ],
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

#[tokio::test]
async fn pings_unknown_events_redacted_thinking_and_signatures_are_ignored() {
    let frames = typed_frames(&[
        START,
        PING,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"Plan."}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"a_future_event","index":1,"payload":{"anything":[1,2]}}"#,
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"","citations":null}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"a_future_delta","x":1}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Hi"}}"#,
        r#"{"type":"content_block_stop","index":2}"#,
        PING,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":5,"output_tokens":15,"server_tool_use":null}}"#,
        END,
    ]);
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("Plan.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::TextDelta("Hi".into()),
            ModelEvent::BlockEnd,
            ModelEvent::Usage(Usage {
                input_tokens: 30,
                output_tokens: 15,
                cache_read_tokens: 5,
                cache_write_tokens: 0,
            }),
        ]
    );
}

#[tokio::test]
async fn a_stream_closed_after_the_stop_reason_without_message_stop_is_complete() {
    let server = Server::start(vec![Reply::sse(&typed_frames(&[
        START, TEXT_START, HELLO, BANG, STOP0, DELTA,
    ]))])
    .await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!((events, error), (text_events(), None));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_closed_before_the_stop_reason_is_cut_off() {
    let server = Server::start(vec![Reply::sse(&typed_frames(&[
        START, TEXT_START, HELLO, BANG, STOP0,
    ]))])
    .await;
    let (_, error) = collect(provider(&server.url).stream(&hello())).await;
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
async fn a_tool_use_whose_input_comes_whole_in_its_start() {
    // Some Anthropic-compatible servers put the input in the block's start
    // and stream no `input_json_delta`; an argument-less call gets `{}`.
    let frames = typed_frames(&[
        START,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"read_file","input":{"path":"a.txt"}}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_10","name":"list_dir","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}"#,
        END,
    ]);
    let server = Server::start(vec![Reply::sse(&frames)]).await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    let call = |id: &str, name: &str, args: &str| {
        vec![
            ModelEvent::ToolCallStart {
                call_id: id.into(),
                name: name.into(),
            },
            ModelEvent::ToolCallArgsDelta {
                call_id: id.into(),
                delta: args.into(),
            },
            ModelEvent::BlockEnd,
        ]
    };
    let mut expected = call("toolu_9", "read_file", r#"{"path":"a.txt"}"#);
    expected.extend(call("toolu_10", "list_dir", "{}"));
    expected.push(ModelEvent::Usage(Usage {
        input_tokens: 30,
        output_tokens: 9,
        // Read from `message_start`: `message_delta` gives
        // only the output.
        cache_read_tokens: 5,
        cache_write_tokens: 0,
    }));
    assert_eq!(events, expected);
}

#[tokio::test]
async fn a_whole_message_instead_of_a_stream_is_read() {
    let whole = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"thinking","thinking":"Hm.","signature":"x"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":6}}"#;
    let server = Server::start(vec![Reply::status(200, whole)]).await;
    let (events, error) = collect(provider(&server.url).stream(&hello())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("Hm.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::TextDelta("Reading.".into()),
            ModelEvent::BlockEnd,
            ModelEvent::ToolCallStart {
                call_id: "toolu_1".into(),
                name: "read_file".into()
            },
            ModelEvent::ToolCallArgsDelta {
                call_id: "toolu_1".into(),
                delta: r#"{"path":"a"}"#.into()
            },
            ModelEvent::BlockEnd,
            ModelEvent::Usage(Usage {
                input_tokens: 10,
                output_tokens: 6,
                ..Default::default()
            }),
        ]
    );
}

#[tokio::test]
async fn overloaded_529_honours_retry_after() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = Server::start(vec![
        Reply::status(529, overloaded).with_header("retry-after", "0.03"),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = build(&ProviderConfig {
        base_url: Some(server.url.clone()),
        anthropic_api_key: Some("k".into()),
        retry: RetryPolicy {
            base_delay: std::time::Duration::from_secs(60),
            max_delay: std::time::Duration::from_secs(60),
            ..RetryPolicy::fast()
        },
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_eq!(
        retries,
        vec![(1, 30, "anthropic: HTTP 529: Overloaded".into())]
    );
    assert_eq!(reply, text_events());
}

#[tokio::test]
async fn permanent_statuses_are_never_retried() {
    for (status, kind) in [
        (400, "invalid_request_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
    ] {
        let body =
            format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"said {status}"}}}}"#);
        let server = Server::start(vec![Reply::status(status, &body)]).await;
        let (events, error) = collect(provider(&server.url).stream(&hello())).await;
        assert!(events.is_empty(), "{status}: {events:?}");
        let error = error.unwrap();
        assert_eq!(error.code, TurnErrorCode::ProviderHttp);
        assert!(
            error
                .message
                .starts_with(&format!("anthropic: HTTP {status} ")),
            "{}",
            error.message
        );
        assert!(
            error.message.contains(&format!("said {status}")),
            "{}",
            error.message
        );
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn tool_input_is_always_an_object_and_ids_fit_the_api_pattern() {
    let server = Server::start(vec![Reply::sse(&text_turn())]).await;
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
                    call_id: "functions.bash:0".into(),
                    name: "bash".into(),
                    arguments: json!("ls -l"),
                })],
            },
            ChatMessage::ToolResults {
                results: vec![Cow::Owned(ToolResult {
                    call_id: "functions.bash:0".into(),
                    output: "invalid arguments".into(),
                    is_error: true,
                })],
            },
        ],
        tools: Vec::new().into(),
        cache: None,
        max_output_tokens: None,
        images: Vec::new(),
    };
    let (_, error) = collect(provider(&server.url).stream(&request)).await;
    assert_eq!(error, None);
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"invalid_arguments": "\"ls -l\""})
    );
    // A call id another provider made, as the API's pattern allows it, the
    // same in the call and in its result.
    assert_eq!(body["messages"][1]["content"][0]["id"], "functions_bash_0");
    assert_eq!(
        body["messages"][2]["content"][0]["tool_use_id"],
        "functions_bash_0"
    );
    assert!(body.get("tools").is_none(), "{body}");
}

#[tokio::test]
async fn an_older_model_s_output_cap_is_used_at_once_and_for_later_calls() {
    let refusal = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens for claude-3-haiku-20240307"}}"#;
    let server = Server::start(vec![
        Reply::status(400, refusal),
        Reply::sse(&text_turn()),
        Reply::sse(&text_turn()),
        Reply::sse(&text_turn()),
    ])
    .await;
    let provider = build(&ProviderConfig {
        model: Some("claude-3-haiku-20240307".into()),
        base_url: Some(server.url.clone()),
        anthropic_api_key: Some("k".into()),
        retry: RetryPolicy::fast(),
        ..ProviderConfig::default()
    })
    .unwrap();
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!((events, error), (text_events(), None), "no retry announced");
    let (events, error) = collect(provider.stream(&hello())).await;
    assert_eq!((events, error), (text_events(), None));
    // Another model (after `set_model`) keeps the default.
    let other = ModelRequest {
        model: Some("claude-sonnet-4-5".into()),
        ..hello()
    };
    let (_, error) = collect(provider.stream(&other)).await;
    assert_eq!(error, None);
    let caps: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.json()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, [json!(8192), json!(4096), json!(4096), json!(8192)]);
}

#[tokio::test]
async fn a_base_url_with_the_version_is_told_how_a_base_url_looks() {
    // `--base-url https://api.anthropic.com/v1` posts to /v1/v1/messages,
    // which Anthropic answers with a bare "Not Found".
    let server = Server::start(vec![Reply::status(
        404,
        r#"{"type":"error","error":{"type":"not_found_error","message":"Not Found"},"request_id":"req_1"}"#,
    )])
    .await;
    let (_, error) = collect(provider(&format!("{}/v1", server.url)).stream(&hello())).await;
    let message = error.unwrap().message;
    assert_eq!(
        message,
        format!(
            "anthropic: HTTP 404 Not Found: Not Found (no API answers at {}/v1/v1/messages: check \
             --base-url; for anthropic it stops before the API version, e.g. \
             https://api.anthropic.com)",
            server.url
        )
    );
}
