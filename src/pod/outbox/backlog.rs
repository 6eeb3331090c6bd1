//! The lag rule, in one place: what a client has been sent and not taken,
//! and whether that is too much. Both lanes of a queue — a Unix socket's
//! (`outbox.rs`) and a WebSocket's feed (`feed.rs`) — count their frames
//! here and ask it whether the next one may be queued; only where the
//! frames wait differs (a channel to the writer task, the feed's deque),
//! so only dropping them is theirs.
//!
//! *Lag* is the bytes queued for the client that it has not taken, except
//! one frame: the oldest one longer than the limit (else the one being
//! taken). So a single frame of any size — a long session's snapshot, a
//! 25 MB reply, a pasted file — is never lag while the client reads it;
//! what piles up besides it is, each frame counted with [`FRAME_COST`]
//! more for its place in the queue (so a flood of tiny frames lags by
//! their count, not only their bytes). Pending over the limit: the client
//! is *lagged* — its queue is dropped but for the rest of a frame it is in
//! the middle of, it gets an `error` with code `lagged`, and the connection
//! is closed, so that it reconnects and gets a fresh snapshot; never
//! silently skipped forward.

use std::collections::VecDeque;

/// What one queued frame costs besides its bytes, as lag: its handle in
/// the queue and its count here. Without it a client sent answers of a few
/// bytes each (a flood of requests it never reads the answers to) could
/// queue millions of frames, each taking more memory than its bytes, before
/// the bytes alone reached the limit: the lag rule bounds frames by count
/// as well as by bytes.
pub(super) const FRAME_COST: usize = 32;

/// What was queued for one client and not yet taken, frame by frame, and
/// whether the client was found lagged.
#[derive(Default)]
pub(super) struct Backlog {
    /// Untaken bytes of each queued frame, oldest first (a snapshot counts
    /// as one frame). `frames[i]` is frame number `done + i`.
    frames: VecDeque<usize>,
    /// Frames taken whole so far.
    done: u64,
    /// Numbers of the queued frames longer than the limit, oldest first.
    oversized: VecDeque<u64>,
    bytes: usize,
    lagged: bool,
}

impl Backlog {
    /// Counts a frame of `len` bytes queued behind the others. False when
    /// that puts the client over `limit`: it is lagged from now on and
    /// nothing is counted any more — the caller drops its queue (all but the
    /// rest of a frame the client is in the middle of), closes the
    /// connection, and ends the stream with [`lagged_frame`](super::lagged_frame).
    pub fn admit(&mut self, len: usize, limit: usize) -> bool {
        self.add(len, limit);
        if self.lag() <= limit {
            return true;
        }
        self.forget();
        self.lagged = true;
        false
    }

    /// Counts a snapshot of `len` bytes: one frame however long, so never
    /// lag by itself (see the module's doc).
    pub fn admit_snapshot(&mut self, len: usize, limit: usize) {
        self.add(len, limit);
    }

    /// Bytes queued and not taken.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_lagged(&self) -> bool {
        self.lagged
    }

    /// The queued bytes, except one frame's: the oldest one longer than the
    /// limit, or else the one being taken; and [`FRAME_COST`] for each
    /// other frame.
    fn lag(&self) -> usize {
        let exempt = match self.oversized.front() {
            Some(&n) => self.frames[(n - self.done) as usize],
            None => self.frames.front().copied().unwrap_or(0),
        };
        let others = self.frames.len().saturating_sub(1);
        self.bytes - exempt + others * FRAME_COST
    }

    fn add(&mut self, len: usize, limit: usize) {
        if len > limit {
            self.oversized
                .push_back(self.done + self.frames.len() as u64);
        }
        self.frames.push_back(len);
        self.bytes += len;
    }

    /// The client took `n` more bytes, from the oldest frames on.
    pub fn taken(&mut self, mut n: usize) {
        self.bytes = self.bytes.saturating_sub(n);
        while let Some(front) = self.frames.front_mut() {
            if *front > n {
                *front -= n;
                return;
            }
            n -= *front;
            self.frames.pop_front();
            if self.oversized.front() == Some(&self.done) {
                self.oversized.pop_front();
            }
            self.done += 1;
        }
    }

    /// Forgets every queued frame (the queue was dropped).
    pub fn forget(&mut self) {
        self.frames.clear();
        self.oversized.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_oversized_frame_is_exempt_until_it_is_taken() {
        let mut backlog = Backlog::default();
        assert!(backlog.admit(5000, 1000), "one frame is never lag");
        assert!(backlog.admit(600, 1000));
        assert!(backlog.admit(300, 1000));
        backlog.taken(5000);
        assert!(
            backlog.admit(600, 1000),
            "the big frame is gone: 300 + 600 lag"
        );
        assert!(!backlog.admit(100, 1000), "300 + 600 + 100 and their cost");
        assert!(backlog.is_lagged());
        assert_eq!(backlog.bytes(), 0, "a lagged client's queue is forgotten");
    }
}
