//! The connection to the pod: methods sent with a `request_id` of their
//! own, and their answers matched back to whoever waits for them.
//!
//! One reader — the bridge's event loop — reads every frame; it hands the
//! `response`s and `error`s that carry an id of ours to [`Link::resolve`],
//! so a handler can await its answer without reading the stream itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

use crate::client::{ClientError, Endpoint, EventStream, RequestSink};
use crate::protocol::{ErrorCode, Event, Method, Request, Response, Snapshot};

/// Where the pod of a session's `cwd` is, found (and started) by the
/// front end.
#[derive(Debug, Clone)]
pub struct Place {
    pub endpoint: Endpoint,
    /// The pod's name, for messages.
    pub name: String,
}

/// An `error` the pod answered with: its own code and message.
#[derive(Debug, Clone)]
pub struct PodError {
    /// As the protocol spells it (`model_error`, `busy`, …).
    pub code: String,
    pub message: String,
}

impl PodError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let code = serde_json::to_value(code)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "error".to_owned());
        Self {
            code,
            message: message.into(),
        }
    }

    /// The connection itself failed: nothing the pod said.
    fn gone(message: impl Into<String>) -> Self {
        Self {
            code: "pod_gone".to_owned(),
            message: message.into(),
        }
    }
}

type Answer = Result<Response, PodError>;

pub struct Link {
    pub place: Place,
    sink: tokio::sync::Mutex<RequestSink>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    next: AtomicU64,
}

impl Link {
    /// Connects and reads the pod's snapshot (always its first frame).
    pub async fn connect(place: Place) -> anyhow::Result<(Link, EventStream, Box<Snapshot>)> {
        let (mut events, sink) = crate::client::connect(&place.endpoint).await?;
        let snapshot = match events.next().await {
            Some(Ok(Event::Snapshot(snapshot))) => snapshot,
            Some(Ok(other)) => anyhow::bail!(
                "the pod at {} began with {other:?} instead of its snapshot",
                place.endpoint
            ),
            Some(Err(e)) => return Err(e.into()),
            None => anyhow::bail!(
                "the pod at {} closed the connection before its snapshot",
                place.endpoint
            ),
        };
        let link = Link {
            place,
            sink: tokio::sync::Mutex::new(sink),
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        };
        Ok((link, events, snapshot))
    }

    /// A `request_id` no other method of this connection has.
    pub fn fresh_id(&self) -> String {
        format!("acp-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends `method` with `request_id`, not waiting for its answer (a
    /// `run`, whose end is its `turn_end`).
    pub async fn send(&self, method: Method, request_id: &str) -> Result<(), PodError> {
        let request = Request::with_id(method, request_id);
        self.sink
            .lock()
            .await
            .send(&request)
            .await
            .map_err(|e: ClientError| PodError::gone(self.gone_message(&e.to_string())))
    }

    /// Sends `method` and waits for the pod's answer to it.
    pub async fn call(&self, method: Method) -> Answer {
        let id = self.fresh_id();
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        if let Err(e) = self.send(method, &id).await {
            self.lock().remove(&id);
            return Err(e);
        }
        rx.await.unwrap_or_else(|_| {
            Err(PodError::gone(
                self.gone_message("it closed the connection"),
            ))
        })
    }

    /// Hands a `response` or `error` to the call waiting for it, or gives
    /// `event` back when none waits (a `run`'s, or one that is not ours).
    /// Moved, not cloned: a `get_session` answer holds the whole session.
    pub fn resolve(&self, event: Event) -> Option<Event> {
        let id = match &event {
            Event::Response(response) => response.request_id.as_ref(),
            Event::Error { request_id, .. } => request_id.as_ref(),
            _ => None,
        };
        let Some(waiter) = id.and_then(|id| self.lock().remove(id)) else {
            return Some(event);
        };
        let answer = match event {
            Event::Response(response) => Ok(response),
            Event::Error { code, message, .. } => Err(PodError::new(code, message)),
            _ => return None,
        };
        let _ = waiter.send(answer);
        None
    }

    /// The pod is gone: every call still waiting fails with `why`.
    pub fn fail_all(&self, why: &str) {
        for (_, waiter) in self.lock().drain() {
            let _ = waiter.send(Err(PodError::gone(why)));
        }
    }

    /// What to tell the editor when the pod can no longer be reached.
    pub fn gone_message(&self, why: &str) -> String {
        format!(
            "the pod {:?} at {} is gone ({why}); `pod acp` ends. Its log is in the data \
             directory's pods/{}.log; starting the agent again starts the pod again",
            self.place.name, self.place.endpoint, self.place.name
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        // A panic while holding it cannot leave the map half-changed.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
