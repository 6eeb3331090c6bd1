//! A remote client's outbound frames, between two threads: the broadcaster
//! pushes them (through the client's [`Queue`](super::Queue), in the one
//! order of its mailbox, as for any client) and the WebSocket's response
//! body takes them on the HTTP server's thread whenever its connection can
//! write (`remote/bridge.rs`).
//!
//! It takes the place of the socket a local client's frames are written
//! to, without a socket: the frames are the same newline-terminated byte
//! stream, queued here instead of in the kernel. The body is polled only
//! while the HTTP connection's write buffer is short, so while the client
//! reads slowly (its TCP window full) frames pile up here — and are taken
//! together, as one write, when it catches up — exactly as they pile up in
//! a slow Unix client's queue. What has been pushed and not taken is the
//! client's *lag*, counted and bounded by the same rule ([`Backlog`]).
//!
//! A push wakes the body only when the feed was empty: while it holds
//! frames the body is already due to run, so a burst of deltas costs one
//! wake-up of the HTTP thread, not one per delta.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Context;

use bytes::Bytes;
use futures::task::AtomicWaker;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::Backlog;

pub struct Feed {
    state: Mutex<State>,
    /// The response body's task.
    waker: AtomicWaker,
    /// The connection's outbox token: fired when the connection is over
    /// (lag, shutdown, the client gone, the bridge closing).
    pub(super) closed: CancellationToken,
    /// Fired when the body has ended (everything taken and the close
    /// frame written) or been dropped (the client went).
    done: CancellationToken,
}

#[derive(Default)]
struct State {
    /// The frames pushed and not yet taken, in order: whole frames, and a
    /// snapshot as its parts (the last ends with its newline).
    stream: VecDeque<Bytes>,
    backlog: Backlog,
    /// The body has taken part of a line and not its end.
    mid_line: bool,
}

impl Feed {
    pub fn new() -> Arc<Feed> {
        Arc::new(Feed {
            state: Mutex::default(),
            waker: AtomicWaker::new(),
            closed: CancellationToken::new(),
            done: CancellationToken::new(),
        })
    }

    /// A push cannot panic while holding the lock, but a poisoned lock
    /// holds consistent state anyway: every change is one field at a time.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Queue::push`](super::Queue::push) for a feed: the same lag rule.
    pub(super) fn push(&self, frame: Bytes, limit: usize) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        let mut state = self.state();
        let was_empty = state.stream.is_empty();
        if !state.backlog.admit(frame.len(), limit) {
            let rest = match state.mid_line {
                true => rest_of_line(&mut state.stream),
                false => VecDeque::new(),
            };
            state.stream = rest;
            drop(state);
            self.close();
            return false;
        }
        state.stream.push_back(frame);
        drop(state);
        if was_empty {
            self.waker.wake();
        }
        true
    }

    /// [`Queue::push_snapshot`](super::Queue::push_snapshot) for a feed:
    /// one frame however long, its parts queued where they lie.
    pub(super) fn push_snapshot(&self, parts: Vec<Bytes>, limit: usize) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        let len = parts.iter().map(Bytes::len).sum();
        let mut state = self.state();
        state.backlog.admit_snapshot(len, limit);
        state.stream.extend(parts);
        drop(state);
        self.waker.wake();
        true
    }

    /// Ends the connection: the body sends what is queued, then closes.
    pub fn close(&self) {
        self.closed.cancel();
        self.waker.wake();
    }

    /// Whether the connection is over (see [`Feed::close`]).
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the connection is over.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// [`Feed::closed`] as a future that owns what it waits on (the body
    /// keeps it, to wake when the connection is over however it ended).
    pub fn closed_owned(&self) -> WaitForCancellationFutureOwned {
        self.closed.clone().cancelled_owned()
    }

    /// Resolves once the body has ended or been dropped.
    pub async fn done(&self) {
        self.done.cancelled().await
    }

    /// Wakes the body, for what the bridge has to send itself (pings, its
    /// own frames, the close).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// For the body: moves up to `budget` bytes of the stream into `into`
    /// (splitting a frame if need be) and counts them taken, with `cx` to
    /// be woken when there is more. Answers `Some(lagged)` once the
    /// connection is over and everything was taken: the body's turn to
    /// close.
    pub fn take(&self, cx: &Context<'_>, budget: usize, into: &mut Vec<Bytes>) -> Option<bool> {
        // Registered before looking, so a push after the look wakes it.
        self.waker.register(cx.waker());
        let mut state = self.state();
        let mut taken = 0;
        while taken < budget {
            let Some(front) = state.stream.front_mut() else {
                break;
            };
            let room = budget - taken;
            let part = if front.len() <= room {
                state.stream.pop_front().unwrap_or_default()
            } else {
                front.split_to(room)
            };
            taken += part.len();
            into.push(part);
        }
        state.backlog.taken(taken);
        if let Some(last) = into.last().filter(|_| taken > 0) {
            state.mid_line = last.last() != Some(&b'\n');
        }
        (state.stream.is_empty() && self.closed.is_cancelled()).then_some(state.backlog.is_lagged())
    }

    /// For the body: it has ended, or its client is gone. Whatever was
    /// not taken is dropped.
    pub fn finish(&self) {
        self.closed.cancel();
        self.done.cancel();
        let mut state = self.state();
        state.stream.clear();
        state.backlog.forget();
    }
}

/// What is left of the line the body is in the middle of: the queue of a
/// lagged client is dropped, but a WebSocket message cannot be cut short,
/// so the client gets the end of the frame it is reading, then `lagged`.
/// (That frame was in memory already; the rule bounds what piles up
/// behind it.)
fn rest_of_line(stream: &mut VecDeque<Bytes>) -> VecDeque<Bytes> {
    let mut rest = VecDeque::new();
    while let Some(mut piece) = stream.pop_front() {
        if let Some(at) = memchr::memchr(b'\n', &piece) {
            rest.push_back(piece.split_to(at + 1));
            break;
        }
        rest.push_back(piece);
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context<'static> {
        Context::from_waker(futures::task::noop_waker_ref())
    }

    #[test]
    fn frames_are_taken_in_order_within_the_budget() {
        let feed = Feed::new();
        assert!(feed.push(Bytes::from_static(b"one\n"), 1000));
        assert!(feed.push_snapshot(
            vec![Bytes::from_static(b"[1,"), Bytes::from_static(b"2]\n")],
            1000
        ));
        let mut taken = Vec::new();
        assert_eq!(feed.take(&context(), 5, &mut taken), None);
        assert_eq!(taken, [&b"one\n"[..], b"["]);
        taken.clear();
        feed.close();
        assert_eq!(feed.take(&context(), 100, &mut taken), Some(false));
        assert_eq!(taken, [&b"1,"[..], b"2]\n"]);
        assert!(!feed.push(Bytes::from_static(b"late\n"), 1000));
    }

    /// A frame of `len` bytes, its newline included.
    fn frame(len: usize) -> Bytes {
        let mut frame = vec![b'x'; len - 1];
        frame.push(b'\n');
        Bytes::from(frame)
    }

    #[test]
    fn what_the_body_does_not_take_is_lag() {
        let feed = Feed::new();
        assert!(feed.push_snapshot(vec![frame(5000)], 1000));
        assert!(feed.push(frame(600), 1000));
        assert!(feed.push(frame(300), 1000));
        let mut taken = Vec::new();
        feed.take(&context(), 5000, &mut taken);
        assert!(feed.push(frame(500), 1000), "taken is not lag");
        assert!(!feed.push(frame(300), 1000), "over the limit");
        assert!(feed.is_closed());
        taken.clear();
        assert_eq!(feed.take(&context(), 5000, &mut taken), Some(true));
        assert!(taken.is_empty(), "a lagged client's queue is dropped");
    }

    #[test]
    fn a_lagged_client_gets_the_end_of_the_line_it_is_reading() {
        let feed = Feed::new();
        let line = Bytes::from(vec![b'x'; 5000]);
        assert!(feed.push_snapshot(vec![line.clone(), Bytes::from_static(b"]\n")], 1000));
        let mut taken = Vec::new();
        feed.take(&context(), 100, &mut taken);
        assert!(feed.push(Bytes::from(vec![b'y'; 900]), 1000));
        assert!(
            !feed.push(Bytes::from(vec![b'z'; 900]), 1000),
            "over the limit"
        );
        taken.clear();
        assert_eq!(feed.take(&context(), 100_000, &mut taken), Some(true));
        let rest: Vec<u8> = taken.concat();
        assert_eq!(rest.len(), 4900 + 2, "the snapshot's end, nothing after it");
        assert!(rest.ends_with(b"]\n"));
    }
}
