//! What the HTTP providers share: sending a streaming request with retries,
//! reading its server-sent events with an idle timeout, and wording failures
//! so the user knows what to fix. Each provider only supplies the request
//! body and an [`SseDecoder`] for its event format.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{HeaderMap, CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::time::Instant;

use super::retry::{AttemptError, Retrier, RetryPolicy};
use super::stream::{generate, Emitter};
use super::{BuildError, ModelError, ModelEvent, ModelStream};
use crate::protocol::TurnErrorCode;

/// Longest piece of a server's error body quoted in a message.
const MAX_QUOTED: usize = 300;

/// How long a stream may stay silent after the reply ended (a finish or
/// stop reason) before it is taken as complete: the usage and end marker
/// that may follow come at once.
const AFTER_THE_END: Duration = Duration::from_secs(2);

/// Turns one provider's server-sent events into [`ModelEvent`]s.
pub(crate) trait SseDecoder: Send {
    /// Handles one event. An `Err` ends the attempt; it is retried only if it
    /// is retryable and nothing was emitted yet.
    fn decode(&mut self, event: &Event) -> Result<Vec<ModelEvent>, AttemptError>;
    /// Whether the event marking the end of the stream has arrived: nothing
    /// more is read.
    fn is_complete(&self) -> bool;
    /// Whether the reply said it is over (a finish or stop reason), so a
    /// stream that ends here lost at most the bookkeeping after it (usage,
    /// the end marker) — servers that leave out OpenAI's `[DONE]` do just
    /// that. A stream that ends before is cut off: the reply is incomplete.
    fn has_ended(&self) -> bool;
    /// Decodes a whole reply that a server sent as one JSON document instead
    /// of a stream (it ignored `stream: true`). `None`: the document is not
    /// a reply of this format.
    fn decode_whole(&mut self, body: &Value) -> Option<Result<Vec<ModelEvent>, AttemptError>>;
    /// Whether the reply stopped at the output limit: the events decoded so
    /// far are delivered (the cut block is kept as far as it got), then the
    /// call ends with this error rather than passing for a complete answer.
    fn cut_off(&mut self) -> Option<AttemptError> {
        None
    }
}

/// Why an empty successful stream is retried once and not more:
/// llama-cpp-python answers `200` with no events when the prompt does not
/// fit the context or it cannot honour the tool choice, and says so only in
/// its own log — a second identical request fails identically.
const EMPTY_REPLY: &str = "the server answered with an empty stream; servers such as \
     llama-cpp-python do this when the conversation does not fit the model's context or \
     they cannot use the tools offered (see docs/providers.md, local servers)";

/// The answer [`Endpoint::with_unstreamed`]'s repair is called with for a
/// stream that ended properly without a word: unlike a stream without any
/// event, which llama-cpp-python sends only for what it cannot stream, this
/// is also how a model says nothing, so later requests keep streaming.
pub(crate) const ENDED_EMPTY: &str = "the reply ended without a word";

/// A fix for a request a server refused because of one of its fields, read
/// from the error answer. The fixed request is sent at once — not a retry:
/// the server said exactly what it refused — and the provider writes later
/// requests the fixed way.
pub(crate) trait Repair: Send + Sync {
    /// The body to send instead of `body`, if `answer` (an error body) says
    /// what was wrong with it.
    fn repair(&self, body: &[u8], answer: &str) -> Option<Vec<u8>>;
}

/// Where `field` occurs in `body`. A field's bytes, unescaped quotes and
/// all, cannot occur inside a JSON string, so this is the field itself.
pub(crate) fn find(body: &[u8], field: &[u8]) -> Option<usize> {
    body.windows(field.len()).position(|window| window == field)
}

/// A request field that some compatible servers refuse although the API
/// documents it (OpenAI's `stream_options`: Azure, Mistral, LiteLLM in
/// front of Bedrock answer 400, 422 or 500 naming it): when an error answer
/// names it, it is left out.
pub(crate) struct Refusable {
    /// The field's bytes exactly as the provider writes them, with the comma
    /// before it.
    pub bytes: &'static [u8],
    /// Words in an error message that mean the field was refused.
    pub names: &'static [&'static str],
    /// Set once a server refused it; the provider's body writer reads it.
    pub refused: Arc<AtomicBool>,
}

impl Repair for Refusable {
    fn repair(&self, body: &[u8], answer: &str) -> Option<Vec<u8>> {
        if !self.names.iter().any(|name| answer.contains(name)) {
            return None;
        }
        let at = find(body, self.bytes)?;
        self.refused.store(true, Ordering::Relaxed);
        let mut stripped = Vec::with_capacity(body.len() - self.bytes.len());
        stripped.extend_from_slice(&body[..at]);
        stripped.extend_from_slice(&body[at + self.bytes.len()..]);
        Some(stripped)
    }
}

/// Who is called and how, shared by every attempt of every call.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// `openai` or `anthropic`: prefixes every message.
    pub provider: &'static str,
    pub url: String,
    /// The variable holding this provider's key, named when the key is refused.
    pub key_env: &'static str,
    /// What a `--base-url` for this provider looks like, told when the URL
    /// seems wrong.
    pub base_url_form: &'static str,
    pub headers: HeaderMap,
    pub client: reqwest::Client,
    pub policy: RetryPolicy,
    pub repairs: Vec<Arc<dyn Repair>>,
    /// How to ask for a reply whole after an empty stream (see
    /// [`Endpoint::with_unstreamed`]).
    unstreamed: Option<Arc<dyn Repair>>,
    /// The length of the last request body: the next one (the same
    /// conversation and a little more) is written into a buffer that large
    /// from the start instead of one doubled a dozen times.
    last_body: Arc<AtomicUsize>,
    /// Whether the call being made carries images: a refusal then says
    /// the model may not take them.
    with_images: bool,
}

impl Endpoint {
    pub fn new(
        provider: &'static str,
        url: String,
        key_env: &'static str,
        base_url_form: &'static str,
        headers: HeaderMap,
        policy: RetryPolicy,
    ) -> Result<Self, BuildError> {
        // A user agent because some gateways in front of model servers
        // refuse requests without one.
        let client = reqwest::Client::builder()
            .user_agent(concat!("pod/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(policy.connect_timeout)
            .build()
            .map_err(|source| BuildError::HttpClient { provider, source })?;
        Ok(Self {
            provider,
            url,
            key_env,
            base_url_form,
            headers,
            client,
            policy,
            repairs: Vec::new(),
            unstreamed: None,
            last_body: Arc::default(),
            with_images: false,
        })
    }

    /// Repairs requests a server refuses with `repair` (see [`Repair`]),
    /// besides the repairs given before.
    pub fn with_repair(mut self, repair: impl Repair + 'static) -> Self {
        self.repairs.push(Arc::new(repair));
        self
    }

    /// Asks once more without streaming when a server answers a request
    /// with an empty stream and `unstream` gives a body for that (it is
    /// called with the request body and an empty answer): llama-cpp-python
    /// fails every streamed request in which the model chooses a tool
    /// ("Automatic streaming tool choice is not supported", in its own log
    /// only) but answers the same request unstreamed with the call. A
    /// stream that ends properly but says nothing — no text, reasoning or
    /// tool call — is asked again the same way, once, with the answer
    /// [`ENDED_EMPTY`]: LiteLLM in front of llama-cpp-python turns that
    /// empty stream into a bare `finish_reason: "stop"`.
    pub fn with_unstreamed(mut self, unstream: impl Repair + 'static) -> Self {
        self.unstreamed = Some(Arc::new(unstream));
        self
    }

    /// POSTs the body `write_body` writes (here, before this returns) and
    /// streams the decoded reply. The body is one buffer sent with a
    /// `Content-Length`, which every server takes. A failure is retried only
    /// while no part of the reply has reached the consumer (see
    /// [`Retrier::after_failure`]); each retry is announced on the stream as
    /// a [`ModelEvent::Retry`] before its delay.
    ///
    /// `with_images`: the body carries images (a 4xx then hints that the
    /// model may not support them).
    pub fn stream<W, D, F>(&self, with_images: bool, write_body: W, decoder: F) -> ModelStream
    where
        W: FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
        D: SseDecoder,
        F: Fn() -> D + Send + 'static,
    {
        let last = self.last_body.load(Ordering::Relaxed);
        let mut buffer = Vec::with_capacity(last + last / 8 + 4096);
        let body = match write_body(&mut buffer) {
            Ok(()) => {
                self.last_body.store(buffer.len(), Ordering::Relaxed);
                Bytes::from(buffer)
            }
            Err(e) => {
                let error = ModelError::new(format!(
                    "{}: the request could not be encoded as JSON: {e}",
                    self.provider
                ));
                return futures::stream::once(async move { Err(error) }).boxed();
            }
        };
        let endpoint = Self {
            with_images,
            ..self.clone()
        };
        generate(move |mut out| async move {
            let mut retrier = Retrier::new(&endpoint.policy);
            let mut body = body;
            loop {
                match endpoint.attempt(&mut body, decoder(), &mut out).await {
                    Ok(()) => return Ok(()),
                    Err(failure) => retrier.after_failure(failure, &mut out).await?,
                }
            }
        })
    }

    /// POSTs `body` and reads the reply, sending it again repaired if the
    /// server refuses it for a reason the [`Repair`] knows (which changes
    /// `body` for the attempts after this one too).
    async fn send(&self, body: &mut Bytes) -> Result<reqwest::Response, AttemptError> {
        let idle = self.policy.idle_timeout;
        // Each repair changes a field the answer named; a server that keeps
        // refusing is answered with its error, not an endless loop.
        let mut repairs = 0;
        loop {
            let request = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send();
            let response = tokio::time::timeout(idle, request)
                .await
                .map_err(|_| {
                    AttemptError::fatal_with(
                        TurnErrorCode::ProviderUnreachable,
                        self.silence(idle, "for the response"),
                    )
                })?
                .map_err(|e| self.send_error(&e))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = retry_after(response.headers());
            let page = content_type(response.headers()).starts_with("text/html");
            let text = read_text(idle, response).await;
            // A web page's markup quoted in a message buries what it says.
            let text = if page { page_text(&text) } else { text };
            if repairs < 2 {
                if let Some(repaired) = self.repairs.iter().find_map(|r| r.repair(body, &text)) {
                    repairs += 1;
                    *body = Bytes::from(repaired);
                    continue;
                }
            }
            let mut error = status_error(self.provider, Some(self.key_env), status, &text);
            error.retry_after = retry_after;
            if self.with_images && matches!(status.as_u16(), 400 | 413 | 415 | 422) {
                error.error.message.push_str(
                    " (the request carried images: this model may not support images; use a \
                     vision model, or send without them)",
                );
            }
            let not_the_api =
                matches!(status.as_u16(), 404 | 405 | 501) || (page && status.is_client_error());
            if not_the_api && !names_what_is_missing(status, &text) {
                // Not the API refusing a model or a request (those say
                // which) but no API at this address: another web server on
                // that port, say (Python's answers a POST with 501).
                error.error.message.push_str(&format!(
                    " (no API answers at {}: check --base-url; {})",
                    self.url, self.base_url_form
                ));
            }
            return Err(error);
        }
    }

    async fn attempt(
        &self,
        body: &mut Bytes,
        mut decoder: impl SseDecoder,
        out: &mut Emitter,
    ) -> Result<(), AttemptError> {
        let idle = self.policy.idle_timeout;
        let response = self.send(body).await?;
        if content_type(response.headers()).starts_with("text/html") {
            // A web page (a UI, a proxy's login) where the API should be.
            return Err(AttemptError::fatal(format!(
                "{}: expected an event stream from {} but got an HTML page: check --base-url; {}",
                self.provider, self.url, self.base_url_form
            )));
        }
        if is_json(response.headers()) {
            // A server that ignored `stream: true` sends the whole reply at
            // once; one that reports an error with a success status sends
            // that: say what it sent rather than "stream ended".
            let text = read_text(idle, response).await;
            let whole = serde_json::from_str::<Value>(&text)
                .ok()
                .filter(|v| v.get("error").is_none())
                .and_then(|v| decoder.decode_whole(&v));
            return match whole {
                Some(events) => {
                    for event in events? {
                        out.emit(event).await;
                    }
                    decoder.cut_off().map_or(Ok(()), Err)
                }
                None => Err(AttemptError::fatal(format!(
                    "{}: expected an event stream from {} but got JSON: {}",
                    self.provider,
                    self.url,
                    error_detail(&text)
                ))),
            };
        }
        let mut events = Lines::new(Box::pin(response.bytes_stream())).eventsource();
        // One timer for the whole reply, re-armed only when it fires early:
        // a `timeout` per event would put every chunk through the timer
        // wheel twice.
        let mut last_data = Instant::now();
        // Once the reply has ended, only bookkeeping may follow; a server
        // that then neither sends the end marker nor closes the stream is
        // not waited for as long as one in the middle of a reply.
        let mut quiet_limit = idle;
        let mut any_event = false;
        // Whether the reply said anything (see `with_unstreamed`).
        let mut said = false;
        let silence = tokio::time::sleep(idle);
        tokio::pin!(silence);
        loop {
            let next = tokio::select! {
                biased;
                next = events.next() => next,
                () = &mut silence => {
                    let quiet_until = last_data + quiet_limit;
                    if Instant::now() < quiet_until {
                        silence.as_mut().reset(quiet_until);
                        continue;
                    }
                    if decoder.has_ended() {
                        break;
                    }
                    return Err(AttemptError::fatal(
                        self.silence(idle, "in the middle of the reply"),
                    ));
                }
            };
            last_data = Instant::now();
            match next {
                Some(Ok(event)) => {
                    any_event = true;
                    for model_event in decoder.decode(&event)? {
                        said |= !matches!(
                            model_event,
                            ModelEvent::Usage(_) | ModelEvent::BlockEnd | ModelEvent::Retry { .. }
                        );
                        out.emit(model_event).await;
                    }
                    if decoder.is_complete() {
                        break;
                    }
                    if decoder.has_ended() && quiet_limit > AFTER_THE_END {
                        quiet_limit = AFTER_THE_END;
                        silence.as_mut().reset(last_data + quiet_limit);
                    }
                }
                // A connection dropped without a proper end after the reply
                // ended lost nothing of it.
                Some(Err(EventStreamError::Transport(_))) if decoder.has_ended() => break,
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
                None if decoder.has_ended() => break,
                None if !any_event => {
                    if let Some(whole) = self.unstreamed.as_ref().and_then(|u| u.repair(body, "")) {
                        *body = Bytes::from(whole);
                        return Err(AttemptError {
                            once: true,
                            ..AttemptError::retryable(format!(
                                "{}: {} sent no reply to a streamed request that offered tools \
                                 (llama-cpp-python cannot stream a tool call the model chose): \
                                 asking for the reply whole, without streaming",
                                self.provider, self.url
                            ))
                        });
                    }
                    return Err(AttemptError {
                        once: true,
                        ..AttemptError::retryable(format!(
                            "{}: {} sent no reply: {EMPTY_REPLY}",
                            self.provider, self.url
                        ))
                    });
                }
                None => {
                    return Err(AttemptError::retryable(format!(
                        "{}: the stream from {} ended before the reply was complete",
                        self.provider, self.url
                    )))
                }
            }
        }
        // A reply cut at the output limit has ended all the same: what
        // follows the cut (llama-server's and OpenAI's usage chunk) is read
        // before the call fails, so the turn's usage and the gauge count it.
        decoder.cut_off().map_or(Ok(()), Err)?;
        if !said {
            let whole = self.unstreamed.as_ref();
            if let Some(whole) = whole.and_then(|u| u.repair(body, ENDED_EMPTY)) {
                *body = Bytes::from(whole);
                return Err(AttemptError {
                    once: true,
                    ..AttemptError::retryable(format!(
                        "{}: {} ended a streamed reply to a request that offered tools without \
                         a word or a tool call (as LiteLLM passes on llama-cpp-python's failure \
                         to stream a tool call): asking for the reply whole, without streaming",
                        self.provider, self.url
                    ))
                });
            }
        }
        Ok(())
    }

    fn silence(&self, idle: Duration, when: &str) -> String {
        format!(
            "{}: no data from {} for {}s {when}; gave up waiting (a server that is slow \
             to read a long prompt, a local model on a busy CPU, needs a longer \
             --model-idle-timeout)",
            self.provider,
            self.url,
            idle.as_secs_f32()
        )
    }

    /// A request that got no HTTP answer. A URL that cannot be used and a
    /// TLS failure (a wrong scheme, an untrusted certificate) will fail the
    /// same way every time, so only the others are retried.
    fn send_error(&self, error: &reqwest::Error) -> AttemptError {
        let cause = root_cause(error);
        let (provider, url) = (self.provider, &self.url);
        let unreachable = TurnErrorCode::ProviderUnreachable;
        if error.is_builder() {
            AttemptError::fatal_with(
                unreachable,
                format!("{provider}: {url} is not a usable URL: {cause} (check --base-url)"),
            )
        } else if is_tls_failure(error) {
            AttemptError::fatal_with(
                unreachable,
                format!(
                    "{provider}: TLS with {url} failed: {cause} (a server without TLS needs an \
                     http:// --base-url)"
                ),
            )
        } else if error.is_connect() {
            AttemptError::retryable_with(
                unreachable,
                format!(
                    "{provider}: cannot connect to {url}: {cause} (is the server running? \
                     --base-url changes the address)"
                ),
            )
        } else {
            AttemptError::retryable_with(
                unreachable,
                format!("{provider}: request to {url} failed: {cause}"),
            )
        }
    }
}

/// The failure for an HTTP status other than success, shared with the script
/// provider's simulated HTTP errors so both read and retry alike: 408
/// (timeout), 409 (conflict), 429 (rate limit) and 5xx are retryable; every
/// other status (a refused key, a bad request, an unknown model) would be
/// answered the same way again and is final.
pub(crate) fn status_error(
    provider: &str,
    key_env: Option<&str>,
    status: StatusCode,
    body: &str,
) -> AttemptError {
    let detail = error_detail(body);
    // `StatusCode`'s Display says `529 <unknown status code>` for statuses
    // it has no name for (Anthropic's "overloaded"): the number alone reads
    // better.
    let mut message = match status.canonical_reason() {
        Some(reason) => format!("{provider}: HTTP {} {reason}", status.as_u16()),
        None => format!("{provider}: HTTP {}", status.as_u16()),
    };
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    if let (Some(env), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) = (key_env, status) {
        message.push_str(&format!(
            " (the API key was refused: set {env} to a valid key)"
        ));
    }
    // An overflow is no transient failure, whatever the status (some
    // servers send it as a 500): the turn loop compacts and tries again.
    if status != StatusCode::TOO_MANY_REQUESTS
        && (super::overflow::is_overflow(&detail) || super::overflow::is_overflow(body))
    {
        return AttemptError::fatal_with(TurnErrorCode::ContextOverflow, message);
    }
    // 501 "Not Implemented" is no passing failure: the server does not do
    // what was asked, and will not on the next try either.
    let retryable = matches!(
        status,
        StatusCode::REQUEST_TIMEOUT | StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS
    ) || (status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED);
    AttemptError {
        retryable,
        ..AttemptError::fatal_with(TurnErrorCode::ProviderHttp, message)
    }
}

/// The human part of an error body: OpenAI, Anthropic, LiteLLM and
/// OpenRouter send `{"error":{"message":...}}`, Ollama `{"error":"..."}`,
/// vLLM `{"message":...}`, FastAPI-based servers `{"detail":"..."}`;
/// anything else is quoted as is.
pub(crate) fn error_detail(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        ["/error/message", "/error", "/message", "/detail"]
            .iter()
            .find_map(|pointer| v.pointer(pointer).and_then(Value::as_str))
    });
    truncate(message.unwrap_or(body).trim())
}

/// What a web page says, as one line of text: its body converted (the
/// same converter `web_fetch` uses; the head's title mostly repeats the
/// first heading) and its whitespace collapsed.
fn page_text(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(vec!["head", "script", "style"])
        .build();
    let text = converter.convert(html).unwrap_or_else(|_| html.to_owned());
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !w.chars().all(|c| c == '#'))
        .collect();
    format!("(a web page) {}", words.join(" "))
}

/// Shortens text quoted from a server to keep messages readable.
pub(crate) fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The body of an answer that is not a stream (an error, a whole reply);
/// empty if it cannot be read within the idle timeout.
async fn read_text(idle: Duration, response: reqwest::Response) -> String {
    tokio::time::timeout(idle, response.text())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Whether an error body is an API's own error object (`{"error": ...}`)
/// that says more than the status itself: an unknown model, say, where
/// Anthropic's `{"error":{"message":"Not Found"}}` for an unknown path
/// says nothing more.
fn names_what_is_missing(status: StatusCode, body: &str) -> bool {
    let reason = status.canonical_reason().unwrap_or_default();
    serde_json::from_str::<Value>(body).is_ok_and(|v| v.get("error").is_some())
        && !error_detail(body).eq_ignore_ascii_case(reason)
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn is_json(headers: &HeaderMap) -> bool {
    content_type(headers).starts_with("application/json")
}

/// How long the server asked us to wait: OpenAI's `retry-after-ms` (more
/// precise, so it wins), else `retry-after` in seconds. The HTTP-date form
/// of `retry-after` is rare for these APIs and falls back to the policy's
/// backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    // `try_`: a server's absurd value (`1e300`) must not panic the pod.
    let seconds = number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number(RETRY_AFTER.as_str()))?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// Whether the request failed in the TLS handshake: rustls reports its
/// errors (bad certificate, a peer that does not speak TLS) as I/O errors of
/// kind `InvalidData`, which a plain TCP connect never produces. They may be
/// wrapped in another I/O error, whose `source()` skips them, so wrapped I/O
/// errors are opened with `get_ref()`.
fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut inner = Some(error);
    while let Some(e) = inner {
        let mut io = e.downcast_ref::<std::io::Error>();
        while let Some(current) = io {
            if current.kind() == std::io::ErrorKind::InvalidData {
                return true;
            }
            io = current
                .get_ref()
                .and_then(|wrapped| wrapped.downcast_ref::<std::io::Error>());
        }
        inner = e.source();
    }
    false
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

/// Joins a base URL and a path without doubling or dropping the slash; a
/// query the base carries (a gateway's `?api-version=...`) stays at the end.
pub(crate) fn join(base: &str, path: &str) -> String {
    let (base, query) = match base.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base, None),
    };
    let mut url = format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    );
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
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

/// Cuts a reply stream into lines and rewrites llama.cpp's error lines on
/// the way.
///
/// Each network chunk is cut after each newline, without copying (a piece
/// is a slice of the chunk): the SSE parser re-buffers everything after
/// each line it reads, which is quadratic in the chunk, so a server that
/// sends a burst of thousands of events in one write would otherwise cost
/// milliseconds before the first token is seen. A newline never falls
/// inside a UTF-8 sequence, so no character is split. The pieces are cut
/// one at a time as the parser asks for them, so a chunk costs no
/// allocation (a `Vec` of its pieces per read was one of the pod's
/// per-chunk costs, `docs/performance.md`, scenario 7).
///
/// When its model fails mid-reply (typically: the prompt exceeds the
/// context size) llama-server sends `error: {"code":...,"message":...}` — a
/// field no SSE parser reads, so the stream would just end, unexplained.
/// Such a line becomes `event: error` with the JSON as its data, which a
/// decoder reports.
pub(super) struct Lines<S> {
    chunks: S,
    /// What is left of the last chunk read, not yet handed on.
    rest: Bytes,
    /// The last piece ended a line.
    continues_line: bool,
    /// The start of a line that may be `error:`, cut short by the network.
    held: Vec<u8>,
}

impl<S> Lines<S> {
    const ERROR: &'static [u8] = b"error:";

    pub fn new(chunks: S) -> Self {
        Self {
            chunks,
            rest: Bytes::new(),
            continues_line: false,
            held: Vec::new(),
        }
    }

    /// Rewrites `piece` in place if it starts an error line; `false`: it is
    /// held until the rest of its line start arrives.
    fn rewrite(&mut self, piece: &mut Bytes) -> bool {
        let at_start = !self.continues_line;
        self.continues_line = !piece.ends_with(b"\n");
        if !at_start || (self.held.is_empty() && piece.first() != Some(&b'e')) {
            return true;
        }
        if !self.held.is_empty() {
            self.held.extend_from_slice(piece);
            *piece = Bytes::from(std::mem::take(&mut self.held));
        }
        if let Some(rest) = piece.strip_prefix(Self::ERROR) {
            let mut rewritten = b"event: error\ndata:".to_vec();
            rewritten.extend_from_slice(rest);
            *piece = Bytes::from(rewritten);
        } else if self.continues_line && Self::ERROR.starts_with(piece) {
            self.held = piece.to_vec();
            self.continues_line = false;
            return false;
        }
        true
    }
}

impl<S, E> futures::Stream for Lines<S>
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if !this.rest.is_empty() {
                let end = memchr::memchr(b'\n', &this.rest).map_or(this.rest.len(), |at| at + 1);
                let mut piece = this.rest.split_to(end);
                if this.rewrite(&mut piece) {
                    return std::task::Poll::Ready(Some(Ok(piece)));
                }
                continue;
            }
            match futures::ready!(this.chunks.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => this.rest = chunk,
                other => return std::task::Poll::Ready(other),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_cpp_error_lines_become_error_events_however_they_are_cut() {
        let body: &[u8] = b"data: {\"a\":1}\n\nerror: {\"message\":\"too long\"}\n\nerrors: no\n";
        let expected: &[u8] =
            b"data: {\"a\":1}\n\nevent: error\ndata: {\"message\":\"too long\"}\n\nerrors: no\n";
        for size in 1..body.len() {
            let chunks = body.chunks(size).map(|c| Ok(Bytes::copy_from_slice(c)));
            let pieces = lines_of::<()>(chunks);
            let out: Vec<u8> = pieces.into_iter().flat_map(|p| p.unwrap()).collect();
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(expected),
                "reads of {size}"
            );
        }
    }

    /// Everything `Lines` makes of these chunks.
    fn lines_of<E>(chunks: impl Iterator<Item = Result<Bytes, E>>) -> Vec<Result<Bytes, E>> {
        let lines = Lines::new(futures::stream::iter(chunks));
        futures::executor::block_on(lines.collect())
    }

    #[test]
    fn lines_are_cut_after_each_newline_and_nothing_is_lost() {
        let chunk = Bytes::from_static(b"data: {\"a\":\"\xc3\xa9\"}\n\ndata: [DONE]\n\ndata: par");
        let pieces: Vec<Bytes> = lines_of::<()>([Ok(chunk.clone())].into_iter())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pieces.len(), 5);
        assert!(pieces[..4].iter().all(|p| p.ends_with(b"\n")));
        assert_eq!(pieces.concat(), chunk.to_vec());
        let broken = lines_of([Ok(chunk), Err("broken")].into_iter());
        assert_eq!(broken.len(), 6);
        assert!(broken[5].is_err());
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
        assert_eq!(
            join("http://h/openai/v1/?api-version=1", "chat/completions"),
            "http://h/openai/v1/chat/completions?api-version=1"
        );
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
        assert_eq!(e.error.code, TurnErrorCode::ProviderHttp);
        for status in [408, 409, 429, 500, 502, 529] {
            let status = StatusCode::from_u16(status).unwrap();
            assert!(status_error("x", None, status, "").retryable, "{status}");
        }
        for status in [400, 403, 404, 413, 422] {
            let status = StatusCode::from_u16(status).unwrap();
            assert!(!status_error("x", None, status, "").retryable, "{status}");
        }
    }
}
