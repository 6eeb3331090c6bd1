//! The connection to the pod: connect, forward every event in order,
//! send methods, and on any loss reconnect with backoff.
//!
//! It runs as its own task so that a slow or silent pod never blocks the
//! terminal. Every (re)connect starts with a fresh snapshot from the pod, and
//! the app rebuilds its whole view from it: nothing is patched across a
//! reconnect.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::client;
use crate::protocol::{Event, Request};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Consecutive unreadable frames after which the connection is considered
/// broken rather than the pod having sent one bad frame.
const MAX_BAD_FRAMES: usize = 8;

/// What the connection task reports to the app.
#[derive(Debug)]
pub enum ConnEvent {
    /// Connected; a snapshot is expected next.
    Connected,
    Event(Box<Event>),
    /// A frame that could not be read as an event; the connection goes on.
    BadFrame(String),
    /// Not connected (never was, or lost); the next attempt is in `retry_in`.
    Retrying {
        retry_in: Duration,
        error: String,
    },
    /// A request that could not be sent because the pod is not connected.
    NotSent(Request),
}

/// What the app asks of the connection task.
#[derive(Debug)]
pub enum Outgoing {
    Request(Request),
    /// Drop the connection and reconnect, for a fresh snapshot.
    Reconnect,
}

/// The connection as the status bar shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    Connecting,
    /// Connected, but the snapshot has not arrived yet.
    WaitingForSnapshot,
    Connected,
    Retrying {
        at: Instant,
        /// Whether any connection ever succeeded: "reconnecting" vs "offline".
        was_connected: bool,
    },
}

/// Runs until the app drops its end of `outgoing`.
pub async fn run(
    endpoint: client::Endpoint,
    events: mpsc::Sender<ConnEvent>,
    mut outgoing: mpsc::Receiver<Outgoing>,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let error = match client::connect(&endpoint).await {
            Ok((mut stream, mut sink)) => {
                backoff = BACKOFF_MIN;
                if events.send(ConnEvent::Connected).await.is_err() {
                    return;
                }
                let mut bad = 0;
                loop {
                    tokio::select! {
                        event = stream.next() => match event {
                            None => break "the pod closed the connection".to_owned(),
                            Some(Ok(event)) => {
                                bad = 0;
                                if events.send(ConnEvent::Event(Box::new(event))).await.is_err() {
                                    return;
                                }
                            }
                            Some(Err(e)) => {
                                bad += 1;
                                if bad >= MAX_BAD_FRAMES {
                                    break e.to_string();
                                }
                                if events.send(ConnEvent::BadFrame(e.to_string())).await.is_err() {
                                    return;
                                }
                            }
                        },
                        out = outgoing.recv() => match out {
                            None => return,
                            Some(Outgoing::Reconnect) => break "resynchronising".to_owned(),
                            Some(Outgoing::Request(request)) => {
                                if let Err(e) = sink.send(&request).await {
                                    let _ = events.send(ConnEvent::NotSent(request)).await;
                                    break e.to_string();
                                }
                            }
                        },
                    }
                }
            }
            Err(e) => e.to_string(),
        };
        let retry = ConnEvent::Retrying {
            retry_in: backoff,
            error,
        };
        if events.send(retry).await.is_err() {
            return;
        }
        let deadline = tokio::time::Instant::now() + backoff;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => break,
                out = outgoing.recv() => match out {
                    None => return,
                    Some(Outgoing::Reconnect) => {}
                    Some(Outgoing::Request(request)) => {
                        if events.send(ConnEvent::NotSent(request)).await.is_err() {
                            return;
                        }
                    }
                },
            }
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}
