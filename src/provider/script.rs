//! Scripted model turns read from a JSONL file, for demos and tests that need
//! slow, tool-using or failing replies without a real model. The format is
//! documented in `docs/providers.md`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::http::status_error;
use super::retry::{AttemptError, Retrier, RetryPolicy};
use super::stream::{generate, Emitter};
use super::{ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::Usage;

const NAME: &str = "script";

/// One line of the file: one model reply.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyLine {
    events: Vec<StepLine>,
    /// The child pod (by slug) whose model calls this line serves; absent:
    /// the top pod's.
    agent: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum StepLine {
    Text(String),
    Reasoning(String),
    ToolCall(ToolCallLine),
    DelayMs(u64),
    Usage(Usage),
    Error(String),
    HttpError(HttpErrorLine),
    EchoModel(EchoModelLine),
}

/// `{"echo_model":{}}`: no fields; an object so that every event has the
/// same shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoModelLine {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallLine {
    id: Option<String>,
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpErrorLine {
    status: u16,
    #[serde(default)]
    message: String,
}

/// A validated step of a reply.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: Option<String>,
        name: String,
        arguments: String,
    },
    Delay(Duration),
    Usage(Usage),
    Error(String),
    HttpError {
        status: StatusCode,
        message: String,
    },
    /// A text delta naming the model the call was made with.
    EchoModel,
}

/// Which kind of text block is streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Reasoning,
}

pub struct Script {
    model: String,
    /// Every pod's replies, by agent slug (`None`: the top pod's).
    replies: Arc<HashMap<Option<String>, Replies>>,
    /// Whose replies this one plays: the top pod's, or a child's.
    agent: Option<String>,
    retry: RetryPolicy,
}

/// One pod's lines, in order.
struct Replies {
    lines: Vec<Vec<Step>>,
    /// Index of the next reply; shared by all calls of that pod so each
    /// one, retries included, consumes a line, as each would hit a server
    /// once.
    next: AtomicUsize,
}

impl Script {
    /// Reads and checks the whole file now, so that a typo surfaces when the
    /// pod starts rather than in the middle of a demo.
    pub fn load(path: &Path, retry: RetryPolicy) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
        Self::parse(&path.display().to_string(), &text, retry)
    }

    /// Parses script text; `origin` names it in error messages.
    pub fn parse(origin: &str, text: &str, retry: RetryPolicy) -> Result<Self, String> {
        let mut replies: HashMap<Option<String>, Replies> = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (agent, reply) =
                parse_line(line).map_err(|e| format!("{origin}:{}: {e}", number + 1))?;
            replies
                .entry(agent)
                .or_insert_with(|| Replies {
                    lines: Vec::new(),
                    next: AtomicUsize::new(0),
                })
                .lines
                .push(reply);
        }
        if replies.is_empty() {
            return Err(format!("{origin}: the script has no replies"));
        }
        Ok(Self {
            model: NAME.into(),
            replies: Arc::new(replies),
            agent: None,
            retry,
        })
    }

    /// The model name reported to clients (`script` unless set).
    pub fn with_model(mut self, model: String) -> Self {
        self.model = model;
        self
    }
}

fn parse_line(line: &str) -> Result<(Option<String>, Vec<Step>), String> {
    let reply: ReplyLine = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let agent = reply.agent;
    let count = reply.events.len();
    let mut steps = Vec::with_capacity(count);
    for (i, step) in reply.events.into_iter().enumerate() {
        steps.push(match step {
            StepLine::Text(text) => Step::Text(text),
            StepLine::Reasoning(text) => Step::Reasoning(text),
            StepLine::ToolCall(call) => Step::ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments.to_string(),
            },
            StepLine::DelayMs(ms) => Step::Delay(Duration::from_millis(ms)),
            StepLine::Usage(usage) => Step::Usage(usage),
            StepLine::Error(message) => Step::Error(message),
            StepLine::EchoModel(EchoModelLine {}) => Step::EchoModel,
            StepLine::HttpError(e) => {
                let status = StatusCode::from_u16(e.status)
                    .map_err(|_| format!("http_error status {} is not an HTTP status", e.status))?;
                if status.is_success() {
                    return Err(format!("http_error status {status} is not an error"));
                }
                let only_delays_before = steps.iter().all(|s| matches!(s, Step::Delay(_)));
                if i + 1 != count || !only_delays_before {
                    return Err(
                        "http_error fails the request before any token: only delay_ms may \
                         come before it and nothing after it"
                            .into(),
                    );
                }
                Step::HttpError {
                    status,
                    message: e.message,
                }
            }
        });
    }
    Ok((agent, steps))
}

impl Provider for Script {
    fn name(&self) -> &'static str {
        NAME
    }

    fn may_loop(&self) -> bool {
        false
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn for_agent(&self, slug: &str) -> Option<Arc<dyn Provider>> {
        Some(Arc::new(Script {
            model: self.model.clone(),
            replies: Arc::clone(&self.replies),
            agent: Some(slug.to_owned()),
            retry: self.retry.clone(),
        }))
    }

    fn stream(&self, request: &ModelRequest<'_>) -> ModelStream {
        let replies = Arc::clone(&self.replies);
        let agent = self.agent.clone();
        let retry = self.retry.clone();
        let model = request
            .model
            .as_deref()
            .map_or_else(|| self.model.clone(), str::to_owned);
        generate(move |mut out| async move {
            let mut retrier = Retrier::new(&retry);
            let Some(own) = replies.get(&agent) else {
                let whose = agent.map_or_else(
                    || "the top pod".to_owned(),
                    |slug| format!("agent {slug:?}"),
                );
                return Err(super::ModelError::new(format!(
                    "script: no line of the script serves {whose} (give lines \"agent\": \"SLUG\" \
                     for a child pod's calls; lines without it serve the top pod)"
                )));
            };
            loop {
                let index = own.next.fetch_add(1, Ordering::Relaxed) % own.lines.len();
                match play(&own.lines[index], &model, &mut out).await {
                    Ok(()) => return Ok(()),
                    Err(failure) => retrier.after_failure(failure, &mut out).await?,
                }
            }
        })
    }
}

/// Streams one reply of a call made with `model`. Consecutive text (or
/// reasoning) chunks form one block; a block ends when another kind starts
/// or the reply ends.
async fn play(steps: &[Step], model: &str, out: &mut Emitter) -> Result<(), AttemptError> {
    let mut open = None;
    for step in steps {
        match step {
            Step::Text(text) => {
                switch(&mut open, Some(Open::Text), out).await;
                out.emit(ModelEvent::TextDelta(text.clone())).await;
            }
            Step::EchoModel => {
                switch(&mut open, Some(Open::Text), out).await;
                out.emit(ModelEvent::TextDelta(model.to_owned())).await;
            }
            Step::Reasoning(text) => {
                switch(&mut open, Some(Open::Reasoning), out).await;
                out.emit(ModelEvent::ReasoningDelta(text.clone())).await;
            }
            Step::ToolCall {
                id,
                name,
                arguments,
            } => {
                switch(&mut open, None, out).await;
                let call_id = id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
                out.emit(ModelEvent::ToolCallStart {
                    call_id: call_id.clone(),
                    name: name.clone(),
                })
                .await;
                out.emit(ModelEvent::ToolCallArgsDelta {
                    call_id,
                    delta: arguments.clone(),
                })
                .await;
                out.emit(ModelEvent::BlockEnd).await;
            }
            Step::Delay(delay) => tokio::time::sleep(*delay).await,
            Step::Usage(usage) => out.emit(ModelEvent::Usage(*usage)).await,
            Step::Error(message) => return Err(AttemptError::fatal(message.clone())),
            Step::HttpError { status, message } => {
                return Err(status_error(NAME, None, *status, message))
            }
        }
    }
    switch(&mut open, None, out).await;
    Ok(())
}

async fn switch(open: &mut Option<Open>, next: Option<Open>, out: &mut Emitter) {
    if *open != next {
        if open.is_some() {
            out.emit(ModelEvent::BlockEnd).await;
        }
        *open = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_parsed_with_defaults() {
        let (agent, steps) = parse_line(
            r#"{"events":[{"reasoning":"r"},{"tool_call":{"name":"ls"}},{"delay_ms":5},
            {"usage":{"input_tokens":1,"output_tokens":2}},{"error":"e"}]}"#,
        )
        .unwrap();
        assert_eq!(agent, None);
        assert_eq!(
            steps,
            vec![
                Step::Reasoning("r".into()),
                Step::ToolCall {
                    id: None,
                    name: "ls".into(),
                    arguments: "{}".into()
                },
                Step::Delay(Duration::from_millis(5)),
                Step::Usage(Usage {
                    input_tokens: 1,
                    output_tokens: 2,
                    ..Default::default()
                }),
                Step::Error("e".into()),
            ]
        );
    }

    #[test]
    fn http_error_must_come_before_any_token() {
        assert!(parse_line(r#"{"events":[{"delay_ms":1},{"http_error":{"status":500}}]}"#).is_ok());
        let err =
            parse_line(r#"{"events":[{"text":"a"},{"http_error":{"status":500}}]}"#).unwrap_err();
        assert!(err.contains("before any token"), "{err}");
        let err = parse_line(r#"{"events":[{"http_error":{"status":200}}]}"#).unwrap_err();
        assert!(err.contains("not an error"), "{err}");
    }
}
