//! The script provider: the file format, and replies played as documented.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod support;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pod::protocol::{TurnErrorCode, Usage};
use pod::provider::{
    build, ChatMessage, ModelEvent, ModelRequest, Provider, ProviderConfig, ProviderKind,
    RetryPolicy, Script,
};
use support::{assert_retries, collect, split_retries};

fn request() -> ModelRequest<'static> {
    ModelRequest {
        model: None,
        system: "".into(),
        messages: vec![ChatMessage::User {
            text: "go".into(),
            injected: false,
        }],
        tools: Vec::new().into(),
        cache: None,
        max_output_tokens: None,
        images: Vec::new(),
    }
}

fn script(text: &str) -> Script {
    Script::parse("test.jsonl", text, RetryPolicy::fast()).unwrap()
}

fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta(t.into())
}

fn start(id: &str, name: &str) -> ModelEvent {
    ModelEvent::ToolCallStart {
        call_id: id.into(),
        name: name.into(),
    }
}

fn args(id: &str, delta: &str) -> ModelEvent {
    ModelEvent::ToolCallArgsDelta {
        call_id: id.into(),
        delta: delta.into(),
    }
}

fn file(contents: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(contents.as_bytes()).unwrap();
    file
}

fn from_file(path: &std::path::Path) -> Result<Arc<dyn Provider>, String> {
    build(&ProviderConfig {
        kind: Some(ProviderKind::Script),
        script: Some(path.to_owned()),
        retry: RetryPolicy::fast(),
        ..ProviderConfig::default()
    })
    .map_err(|e| e.to_string())
}

#[tokio::test]
async fn text_chunks_form_one_block_and_usage_passes_through() {
    let script = script(
        r#"{"events":[{"text":"Hel"},{"text":"lo"},{"usage":{"input_tokens":7,"output_tokens":2}}]}"#,
    );
    assert_eq!((script.name(), script.model()), ("script", "script"));
    let (events, error) = collect(script.stream(&request())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            text("Hel"),
            text("lo"),
            ModelEvent::Usage(Usage {
                input_tokens: 7,
                output_tokens: 2,
                ..Default::default()
            }),
            ModelEvent::BlockEnd,
        ]
    );
}

#[tokio::test]
async fn blocks_end_when_the_kind_changes_and_tool_calls_stream_whole() {
    let script = script(
        r#"{"events":[{"reasoning":"think"},{"text":"Reading."},{"tool_call":{"id":"c1","name":"read_file","arguments":{"path":"a.txt"}}},{"tool_call":{"name":"list_dir"}},{"text":"done"}]}"#,
    );
    let (events, error) = collect(script.stream(&request())).await;
    assert_eq!(error, None);
    let ModelEvent::ToolCallStart { call_id: id, .. } = events[7].clone() else {
        panic!("{events:?}")
    };
    assert!(id.starts_with("call_") && id.len() > 10, "{id}");
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta("think".into()),
            ModelEvent::BlockEnd,
            text("Reading."),
            ModelEvent::BlockEnd,
            start("c1", "read_file"),
            args("c1", r#"{"path":"a.txt"}"#),
            ModelEvent::BlockEnd,
            start(&id, "list_dir"),
            args(&id, "{}"),
            ModelEvent::BlockEnd,
            text("done"),
            ModelEvent::BlockEnd,
        ]
    );
}

#[tokio::test]
async fn delays_pause_the_stream() {
    let script = script(r#"{"events":[{"text":"a"},{"delay_ms":150},{"text":"b"}]}"#);
    let started = Instant::now();
    let (events, error) = collect(script.stream(&request())).await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        (events, error),
        (vec![text("a"), text("b"), ModelEvent::BlockEnd], None)
    );
}

#[tokio::test]
async fn error_fails_the_stream_after_what_came_before() {
    let script =
        script(r#"{"events":[{"text":"partial"},{"error":"model exploded"},{"text":"never"}]}"#);
    let (events, error) = collect(script.stream(&request())).await;
    assert_eq!(events, vec![text("partial")]);
    assert_eq!(error.unwrap().message, "model exploded");
}

#[tokio::test]
async fn replies_are_consumed_in_order_and_wrap_around() {
    let script = script(
        "# a comment\n\n{\"events\":[{\"text\":\"one\"}]}\n  \n{\"events\":[{\"text\":\"two\"}]}\n",
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (events, _) = collect(script.stream(&request())).await;
        seen.push(events[0].clone());
    }
    assert_eq!(seen, vec![text("one"), text("two"), text("one")]);
}

#[tokio::test]
async fn retryable_http_error_goes_through_the_retry_policy() {
    let script = script(
        r#"{"events":[{"http_error":{"status":429,"message":"slow down"}}]}
{"events":[{"delay_ms":1},{"http_error":{"status":503}}]}
{"events":[{"text":"finally"}]}"#,
    );
    let (events, error) = collect(script.stream(&request())).await;
    assert_eq!(error, None);
    let (retries, reply) = split_retries(events);
    assert_retries(
        &retries,
        &[
            (1, 1, "script: HTTP 429 Too Many Requests: slow down"),
            (2, 2, "script: HTTP 503 Service Unavailable"),
        ],
    );
    assert_eq!(reply, vec![text("finally"), ModelEvent::BlockEnd]);
}

#[tokio::test]
async fn other_http_errors_are_fatal() {
    let script = script(
        r#"{"events":[{"http_error":{"status":401,"message":"bad key"}}]}
{"events":[{"text":"not reached"}]}"#,
    );
    let (events, error) = collect(script.stream(&request())).await;
    assert!(events.is_empty());
    let error = error.unwrap();
    assert_eq!(error.message, "script: HTTP 401 Unauthorized: bad key");
    assert_eq!(error.code, TurnErrorCode::ProviderHttp);
}

#[tokio::test]
async fn retries_run_out_like_with_a_server() {
    let script = Script::parse(
        "busy.jsonl",
        r#"{"events":[{"http_error":{"status":500,"message":"down"}}]}"#,
        RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::fast()
        },
    )
    .unwrap();
    let (_, error) = collect(script.stream(&request())).await;
    assert_eq!(
        error.unwrap().message,
        "script: HTTP 500 Internal Server Error: down (gave up after 2 retries)"
    );
}

#[tokio::test]
async fn file_is_loaded_through_build_with_model_override() {
    let file = file("{\"events\":[{\"text\":\"hi\"}]}\n");
    let provider = build(&ProviderConfig {
        script: Some(file.path().to_owned()),
        model: Some("demo".into()),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!((provider.name(), provider.model()), ("script", "demo"));
    let (events, _) = collect(provider.stream(&request())).await;
    assert_eq!(events, vec![text("hi"), ModelEvent::BlockEnd]);
}

#[tokio::test]
async fn echo_model_names_the_model_each_call_was_made_with() {
    let script = script(r#"{"events":[{"text":"model: "},{"echo_model":{}}]}"#);
    let (events, _) = collect(script.stream(&request())).await;
    assert_eq!(
        events,
        vec![text("model: "), text("script"), ModelEvent::BlockEnd]
    );
    let chosen = ModelRequest {
        model: Some("bigger".into()),
        ..request()
    };
    let (events, _) = collect(script.stream(&chosen)).await;
    assert_eq!(events[1], text("bigger"));
}

#[test]
fn malformed_file_names_the_file_and_line() {
    let typo =
        file("# demo\n{\"events\":[{\"text\":\"ok\"}]}\n\n{\"events\":[{\"txt\":\"typo\"}]}\n");
    let error = from_file(typo.path()).err().unwrap();
    let expected = format!("{}:4: unknown variant `txt`", typo.path().display());
    assert!(error.starts_with(&expected), "{error}");

    let unclosed = file("{\"events\":[{\"text\":\"a\"}]\n");
    let error = from_file(unclosed.path()).err().unwrap();
    assert!(
        error.starts_with(&format!("{}:1: ", unclosed.path().display())),
        "{error}"
    );
}

#[test]
fn unreadable_and_empty_scripts_are_rejected() {
    let error = from_file(std::path::Path::new("/nonexistent/pod.jsonl"))
        .err()
        .unwrap();
    assert!(
        error.starts_with("cannot read script /nonexistent/pod.jsonl"),
        "{error}"
    );
    let empty = file("# only a comment\n\n");
    let error = from_file(empty.path()).err().unwrap();
    assert!(error.ends_with("the script has no replies"), "{error}");
}

/// The example in docs/providers.md is real: it parses and plays as described.
#[tokio::test]
async fn documented_example_plays_as_described() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/providers.md")).unwrap();
    let example = doc
        .split("```jsonl\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    let script = script(example);
    let mut replies = Vec::new();
    for _ in 0..5 {
        replies.push(collect(script.stream(&request())).await);
    }
    assert_eq!(replies[0].0[0], text("Hello"));
    assert!(replies[1].0.contains(&start("c1", "read_file")));
    assert_eq!(replies[2].0[0], text("The README describes pod."));
    let (retries, reply) = split_retries(replies[3].0.clone());
    assert_eq!(retries.len(), 1);
    assert_eq!(reply[0], text("Answered after a retry."));
    assert_eq!(replies[4].0, vec![text("Halfway th")]);
    let error = replies[4].1.as_ref().unwrap();
    assert_eq!(error.message, "connection reset by the script");
    assert_eq!(error.code, TurnErrorCode::ProviderStream);
    assert!(replies[..4].iter().all(|(_, error)| error.is_none()));
}

/// Lines with `agent` serve only that child's calls, each pod's in order and
/// wrapping on its own; a pod with no line of its own fails saying so.
#[tokio::test]
async fn each_child_plays_its_own_lines_whatever_the_interleaving() {
    let script = script(concat!(
        "{\"events\":[{\"text\":\"top 1\"}]}\n",
        "{\"agent\":\"tests\",\"events\":[{\"text\":\"tests 1\"}]}\n",
        "{\"events\":[{\"text\":\"top 2\"}]}\n",
        "{\"agent\":\"tests\",\"events\":[{\"text\":\"tests 2\"}]}\n",
    ));
    let tests = script.for_agent("tests").unwrap();
    let first = |(events, _): (Vec<ModelEvent>, _)| events[0].clone();
    assert_eq!(
        first(collect(tests.stream(&request())).await),
        text("tests 1")
    );
    assert_eq!(
        first(collect(script.stream(&request())).await),
        text("top 1")
    );
    assert_eq!(
        first(collect(tests.stream(&request())).await),
        text("tests 2")
    );
    assert_eq!(
        first(collect(tests.stream(&request())).await),
        text("tests 1")
    );
    assert_eq!(
        first(collect(script.stream(&request())).await),
        text("top 2")
    );
    let other = script.for_agent("docs").unwrap();
    let (events, error) = collect(other.stream(&request())).await;
    assert!(events.is_empty());
    let error = error.unwrap().message;
    assert!(error.contains("agent \"docs\""), "{error}");
}
