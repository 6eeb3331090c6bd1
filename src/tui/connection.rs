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
    /// `Open` could not switch to that child (over `--url`): why. The
    /// connection stays where it was.
    CannotOpen(String),
}

/// What the app asks of the connection task.
#[derive(Debug)]
pub enum Outgoing {
    Request(Request),
    /// Drop the connection and reconnect, for a fresh snapshot.
    Reconnect,
    /// Connect to this child pod (its full name) of the pod in view
    /// instead: `/agents`.
    Open(String),
    /// Connect back to the pod the view came from.
    Back,
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

/// Runs until the app drops its end of `outgoing`. `Open` and `Back` move
/// the connection between a pod and its children (each beside its parent's
/// socket); the endpoints left behind are kept to come back to.
pub async fn run(
    endpoint: client::Endpoint,
    events: mpsc::Sender<ConnEvent>,
    mut outgoing: mpsc::Receiver<Outgoing>,
) {
    let mut stack = vec![endpoint];
    let mut backoff = BACKOFF_MIN;
    loop {
        let Some(endpoint) = stack.last() else { return };
        let error = match client::connect(endpoint).await {
            Ok((mut stream, mut sink)) => {
                backoff = BACKOFF_MIN;
                if events.send(ConnEvent::Connected).await.is_err() {
                    return;
                }
                let mut bad = 0;
                loop {
                    tokio::select! {
                        event = stream.next() => match event {
                            None => break Some("the pod closed the connection".to_owned()),
                            Some(Ok(event)) => {
                                bad = 0;
                                if events.send(ConnEvent::Event(Box::new(event))).await.is_err() {
                                    return;
                                }
                            }
                            Some(Err(e)) => {
                                bad += 1;
                                if bad >= MAX_BAD_FRAMES {
                                    break Some(e.to_string());
                                }
                                if events.send(ConnEvent::BadFrame(e.to_string())).await.is_err() {
                                    return;
                                }
                            }
                        },
                        out = outgoing.recv() => match out {
                            None => return,
                            Some(Outgoing::Reconnect) => break Some("resynchronising".to_owned()),
                            Some(Outgoing::Open(name)) => match move_to(&mut stack, Some(&name)) {
                                Ok(()) => break None,
                                Err(why) => {
                                    if events.send(ConnEvent::CannotOpen(why)).await.is_err() {
                                        return;
                                    }
                                }
                            },
                            Some(Outgoing::Back) => {
                                if move_to(&mut stack, None).is_ok() {
                                    break None;
                                }
                            }
                            Some(Outgoing::Request(request)) => {
                                if let Err(e) = sink.send(&request).await {
                                    let _ = events.send(ConnEvent::NotSent(request)).await;
                                    break Some(e.to_string());
                                }
                            }
                        },
                    }
                }
            }
            Err(e) => Some(e.to_string()),
        };
        // A switch to another pod connects at once, without a word of
        // disconnection: the new snapshot replaces the view.
        let Some(error) = error else { continue };
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
                    Some(Outgoing::Open(name)) => match move_to(&mut stack, Some(&name)) {
                        Ok(()) => break,
                        Err(why) => {
                            if events.send(ConnEvent::CannotOpen(why)).await.is_err() {
                                return;
                            }
                        }
                    },
                    Some(Outgoing::Back) => {
                        if move_to(&mut stack, None).is_ok() {
                            break;
                        }
                    }
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

/// Moves the connection's target: into the child `name` of the pod in view,
/// or (`None`) back to the pod the view came from.
fn move_to(stack: &mut Vec<client::Endpoint>, child: Option<&str>) -> Result<(), String> {
    match child {
        Some(name) => {
            let here = stack.last().ok_or("no pod in view")?;
            let there = here.child(name).ok_or_else(|| {
                format!(
                    "child pod {name} cannot be opened over --url: attach to it on the pod's \
                     machine (`pod attach --name {name}`)"
                )
            })?;
            stack.push(there);
            Ok(())
        }
        None if stack.len() > 1 => {
            stack.pop();
            Ok(())
        }
        None => Err("the view is the attached pod's own".into()),
    }
}
