//! What the HTTP providers share: sending a streaming request with retries,
//! reading its server-sent events with an idle timeout, and wording failures
//! so the user knows what to fix. Each provider only supplies the request
//! body and an [`SseDecoder`] for its event format.

use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{HeaderMap, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::Value;

use super::retry::{AttemptError, Retrier, RetryPolicy};
use super::stream::{generate, Emitter};
use super::{ModelEvent, ModelStream};

/// Longest piece of a server's error body quoted in a message.
const MAX_QUOTED: usize = 300;

/// Turns one provider's server-sent events into [`ModelEvent`]s.
pub(crate) trait SseDecoder: Send {
    /// Handles one event. An `Err` ends the attempt; it is retried only if it
    /// is retryable and nothing was emitted yet.
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, AttemptError>;
    /// Whether the event marking a complete reply has arrived. A stream that
    /// ends before it was cut off, and the reply is incomplete.
    fn is_complete(&self) -> bool;
}

/// Who is called and how, shared by every attempt of every call.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// `openai` or `anthropic`: prefixes every message.
    pub provider: &'static str,
    pub url: String,
    /// The variable holding this provider's key, named when the key is refused.
    pub key_env: &'static str,
    pub headers: HeaderMap,
    pub client: reqwest::Client,
    pub policy: RetryPolicy,
}

impl Endpoint {
    pub fn new(
        provider: &'static str,
        url: String,
        key_env: &'static str,
        headers: HeaderMap,
        policy: RetryPolicy,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(policy.connect_timeout)
            .build()
            .map_err(|e| format!("{provider}: cannot set up the HTTP client: {e}"))?;
        Ok(Self {
            provider,
            url,
            key_env,
            headers,
            client,
            policy,
        })
    }

    /// POSTs `body` and streams the decoded reply, retrying failures that
    /// happen before the first event reaches the consumer.
    pub fn stream<D, F>(&self, body: &Value, decoder: F) -> ModelStream
    where
        D: SseDecoder,
        F: Fn() -> D + Send + 'static,
    {
        let endpoint = self.clone();
        let body = Bytes::from(body.to_string());
        generate(move |mut out| async move {
            let mut retrier = Retrier::new(&endpoint.policy);
            loop {
                let failure = match endpoint.attempt(&body, decoder(), &mut out).await {
                    Ok(()) => return Ok(()),
                    Err(failure) => failure,
                };
                if out.emitted() {
                    return Err(failure.error);
                }
                retrier.after_failure(failure).await?;
            }
        })
    }

    async fn attempt(
        &self,
        body: &Bytes,
        mut decoder: impl SseDecoder,
        out: &mut Emitter,
    ) -> Result<(), AttemptError> {
        let idle = self.policy.idle_timeout;
        let request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send();
        let response = tokio::time::timeout(idle, request)
            .await
            .map_err(|_| self.silence(idle, "for the response"))?
            .map_err(|e| self.send_error(&e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let text = tokio::time::timeout(idle, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(AttemptError {
                retry_after,
                ..status_error(self.provider, Some(self.key_env), status, &text)
            });
        }
        if is_json(response.headers()) {
            // A server that ignored `stream: true` or reports an error with a
            // success status: say what it sent rather than "stream ended".
            let text = tokio::time::timeout(idle, response.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(AttemptError::fatal(format!(
                "{}: expected an event stream from {} but got JSON: {}",
                self.provider,
                self.url,
                error_detail(&text)
            )));
        }
        let mut events = response
            .bytes_stream()
            .flat_map(|chunk| futures::stream::iter(split_lines(chunk)))
            .eventsource();
        loop {
            let next = tokio::time::timeout(idle, events.next())
                .await
                .map_err(|_| self.silence(idle, "in the middle of the reply"))?;
            match next {
                Some(Ok(event)) => {
                    for model_event in decoder.decode(&event)? {
                        out.emit(model_event).await;
                    }
                    if decoder.is_complete() {
                        return Ok(());
                    }
                }
                Some(Err(EventStreamError::Transport(e))) => {
                    return Err(AttemptError::retryable(format!(
                        "{}: the connection to {} broke during the reply: {}",
                        self.provider,
                        self.url,
                        root_cause(&e)
                    )))
                }
                Some(Err(e)) => {
                    return Err(AttemptError::fatal(format!(
                        "{}: the server at {} sent a malformed event stream: {e}",
                        self.provider, self.url
                    )))
                }
                None => {
                    return Err(AttemptError::retryable(format!(
                        "{}: the stream from {} ended before the reply was complete",
                        self.provider, self.url
                    )))
                }
            }
        }
    }

    fn silence(&self, idle: Duration, when: &str) -> AttemptError {
        AttemptError::fatal(format!(
            "{}: no data from {} for {}s {when}; gave up waiting",
            self.provider,
            self.url,
            idle.as_secs_f32()
        ))
    }

    fn send_error(&self, error: &reqwest::Error) -> AttemptError {
        let cause = root_cause(error);
        if error.is_connect() {
            AttemptError::retryable(format!(
                "{}: cannot connect to {}: {cause} (is the server running? --base-url changes the address)",
                self.provider, self.url
            ))
        } else {
            AttemptError::retryable(format!(
                "{}: request to {} failed: {cause}",
                self.provider, self.url
            ))
        }
    }
}

/// The failure for an HTTP status other than success, shared with the script
/// provider's simulated HTTP errors so both read and retry alike: 429 and 5xx
/// are retryable, everything else is final.
pub(crate) fn status_error(
    provider: &str,
    key_env: Option<&str>,
    status: StatusCode,
    body: &str,
) -> AttemptError {
    let detail = error_detail(body);
    let mut message = format!("{provider}: HTTP {status}");
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    if let (Some(env), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) = (key_env, status) {
        message.push_str(&format!(
            " (the API key was refused: set {env} to a valid key)"
        ));
    }
    let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
    AttemptError {
        retryable,
        ..AttemptError::fatal(message)
    }
}

/// The human part of an error body: OpenAI and Anthropic both send
/// `{"error":{"message":...}}`, Ollama `{"error":"..."}`; anything else is
/// quoted as is.
fn error_detail(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
    });
    truncate(message.unwrap_or(body).trim())
}

/// Shortens text quoted from a server to keep messages readable.
pub(crate) fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// `retry-after` in seconds; the HTTP-date form is rare for these APIs and
/// falls back to the policy's backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The innermost error, e.g. "Connection refused (os error 111)" rather than
/// reqwest's generic "error sending request".
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = error;
    while let Some(source) = inner.source() {
        inner = source;
    }
    inner.to_string()
}

/// Joins a base URL and a path without doubling or dropping the slash.
pub(crate) fn join(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Parses an event's JSON data, naming the provider when it is garbage.
pub(crate) fn parse_data<T: serde::de::DeserializeOwned>(
    provider: &str,
    event: &Event,
) -> Result<T, AttemptError> {
    serde_json::from_str(&event.data).map_err(|e| {
        AttemptError::fatal(format!(
            "{provider}: unparseable data in the response stream ({e}): {}",
            truncate(&event.data)
        ))
    })
}

/// Cuts a network chunk after each newline (without copying). The SSE
/// parser re-buffers everything after each line it reads, which is
/// quadratic in the chunk: a server that sends a burst of thousands of
/// events in one write would otherwise cost milliseconds before the first
/// token is seen. A newline never falls inside a UTF-8 sequence, so no
/// character is split.
fn split_lines<E>(chunk: Result<Bytes, E>) -> Vec<Result<Bytes, E>> {
    let bytes = match chunk {
        Ok(bytes) => bytes,
        Err(e) => return vec![Err(e)],
    };
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, _) in bytes.iter().enumerate().filter(|(_, &b)| b == b'\n') {
        pieces.push(Ok(bytes.slice(start..=i)));
        start = i + 1;
    }
    if start < bytes.len() {
        pieces.push(Ok(bytes.slice(start..)));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_lines_cuts_after_each_newline_and_loses_nothing() {
        let chunk = Bytes::from_static(b"data: {\"a\":\"\xc3\xa9\"}\n\ndata: [DONE]\n\ndata: par");
        let pieces: Vec<Bytes> = split_lines::<()>(Ok(chunk.clone()))
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pieces.len(), 5);
        assert!(pieces[..4].iter().all(|p| p.ends_with(b"\n")));
        assert_eq!(pieces.concat(), chunk.to_vec());
        assert!(split_lines::<&str>(Err("broken")).pop().unwrap().is_err());
    }

    #[test]
    fn error_detail_reads_the_usual_shapes() {
        assert_eq!(
            error_detail(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_detail(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_detail("  plain text \n"), "plain text");
        assert_eq!(
            error_detail(&"x".repeat(400)).chars().count(),
            MAX_QUOTED + 1
        );
    }

    #[test]
    fn join_handles_slashes() {
        assert_eq!(
            join("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(join("http://h/p", "v1/messages"), "http://h/p/v1/messages");
    }

    #[test]
    fn statuses_map_to_retryability_and_key_hints() {
        let e = status_error(
            "openai",
            Some("OPENAI_API_KEY"),
            StatusCode::UNAUTHORIZED,
            "",
        );
        assert!(!e.retryable);
        assert!(
            e.error.message.contains("OPENAI_API_KEY"),
            "{}",
            e.error.message
        );
        assert!(status_error("x", None, StatusCode::TOO_MANY_REQUESTS, "").retryable);
        assert!(status_error("x", None, StatusCode::BAD_GATEWAY, "").retryable);
        assert!(!status_error("x", None, StatusCode::BAD_REQUEST, "").retryable);
    }
}
