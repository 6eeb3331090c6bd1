//! A connection's bounded outbound queue and the task that drains it.
//!
//! Producers (the broadcaster, the connection itself) push already-encoded
//! frames; they never wait on a socket, so a client that stops reading cannot
//! slow anyone else. A frame pushed while nothing is pending is written to
//! the socket at once if the socket takes it whole (a non-blocking write:
//! the common case, and no task wake-up per frame per client). Otherwise it
//! is queued, and the writer task gathers whatever is pending into one
//! vectored `write` per wake-up — small frames copied together, large ones
//! (a snapshot's log lines) referenced where they lie — which is what lets
//! one delta reach hundreds of clients at a high rate, and a long session
//! reach a client without being copied again. If more than `limit` bytes
//! pile up the client is *lagged*:
//! the queue is dropped, it gets an `error` with code `lagged` (when its
//! socket still takes it) and the connection is closed, so that it reconnects
//! and gets a fresh snapshot — never silently skipped forward.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::io::IoSlice;

use bytes::{Buf, Bytes, BytesMut};
use bytes_utils::SegmentedBuf;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ErrorCode, Event};

/// How long a lagged client gets to take its `lagged` error before the socket
/// is dropped anyway.
const LAGGED_GRACE: Duration = Duration::from_secs(2);

/// The producers' end. Pushes come from one thread (the main arbiter, where
/// the broadcaster, the connections and the worker run), which is what lets
/// `push` write to the socket directly when nothing is pending.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Bytes>,
    shared: Arc<Shared>,
}

struct Shared {
    /// The socket. Producers and the writer task run on one thread and the
    /// writer only writes while `queued` is non-zero, so the two never write
    /// at the same time.
    socket: OwnedWriteHalf,
    /// Bytes pushed and not yet written.
    queued: AtomicUsize,
    /// Bytes written so far.
    written: AtomicUsize,
    /// Size of the snapshot, which does not count towards the lag limit: a
    /// long session's snapshot is not lag, and counting it would cut off a
    /// slow reader of a big snapshot on every reconnect.
    snapshot: AtomicUsize,
    limit: usize,
    lagged: AtomicBool,
    /// Fired when the outbox is closed (lag, shutdown, client gone).
    closed: CancellationToken,
}

impl Outbox {
    /// Creates an outbox on `socket` and the writer task's end of it.
    pub fn new(socket: OwnedWriteHalf, limit: usize) -> (Outbox, Drain) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            socket,
            queued: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
            snapshot: AtomicUsize::new(0),
            limit,
            lagged: AtomicBool::new(false),
            closed: CancellationToken::new(),
        });
        (
            Outbox {
                tx,
                shared: shared.clone(),
            },
            Drain { rx, shared },
        )
    }

    /// Queues a frame. Returns false when the connection is gone or lagged;
    /// the caller should forget it.
    pub fn push(&self, frame: Bytes) -> bool {
        if self.shared.closed.is_cancelled() {
            return false;
        }
        let mut frame = frame;
        if self.shared.queued.load(Ordering::Acquire) == 0 {
            match self.shared.socket.try_write(&frame) {
                Ok(n) if n == frame.len() => {
                    self.shared.written.fetch_add(n, Ordering::AcqRel);
                    return true;
                }
                Ok(n) => {
                    self.shared.written.fetch_add(n, Ordering::AcqRel);
                    frame = frame.slice(n..);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    self.shared.closed.cancel();
                    return false;
                }
            }
        }
        let len = frame.len();
        let before = self.shared.queued.fetch_add(len, Ordering::AcqRel);
        // The snapshot went out first, so whatever of it is unwritten is at
        // the head of the queue; only what follows it counts as lag.
        let snapshot_left = self
            .shared
            .snapshot
            .load(Ordering::Acquire)
            .saturating_sub(self.shared.written.load(Ordering::Acquire));
        let lag = before.saturating_sub(snapshot_left);
        // A frame larger than the limit is still accepted into an empty
        // queue: a big entry is not lag.
        if lag > 0 && lag + len > self.shared.limit {
            self.shared.queued.fetch_sub(len, Ordering::AcqRel);
            self.shared.lagged.store(true, Ordering::Release);
            self.shared.closed.cancel();
            return false;
        }
        if self.tx.send(frame).is_err() {
            self.shared.queued.fetch_sub(len, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Queues the snapshot, the first frame of every connection, as the
    /// pieces it is made of (its log lines are the mirror's own bytes).
    pub fn push_snapshot(&self, parts: Vec<Bytes>) -> bool {
        let len = parts.iter().map(Bytes::len).sum();
        self.shared.snapshot.store(len, Ordering::Release);
        self.shared.queued.fetch_add(len, Ordering::AcqRel);
        for part in parts {
            if self.tx.send(part).is_err() {
                return false;
            }
        }
        true
    }

    pub fn push_event(&self, event: &Event) -> bool {
        self.push(event.to_frame())
    }

    /// Stops the connection: the writer flushes what is queued, then closes.
    pub fn close(&self) {
        self.shared.closed.cancel();
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Resolves once the outbox is closed.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.shared.queued.load(Ordering::Acquire)
    }
}

/// The writer task's end of an outbox.
pub struct Drain {
    rx: mpsc::UnboundedReceiver<Bytes>,
    shared: Arc<Shared>,
}

impl Drain {
    /// Writes frames until the outbox closes or the socket fails. On a normal
    /// close everything already queued is flushed first.
    pub async fn run(mut self) {
        let mut batch: Vec<Bytes> = Vec::with_capacity(64);
        loop {
            let closing = tokio::select! {
                biased;
                _ = self.shared.closed.cancelled() => true,
                n = self.rx.recv_many(&mut batch, 1024) => {
                    if n == 0 {
                        break;
                    }
                    false
                }
            };
            if closing {
                self.finish(&mut batch).await;
                return;
            }
            // A client that stopped reading blocks this write; once the
            // outbox is closed (lag, shutdown) it gets a grace period, then
            // the socket is dropped.
            let written = tokio::select! {
                ok = self.write_batch(&mut batch) => ok,
                _ = async {
                    self.shared.closed.cancelled().await;
                    tokio::time::sleep(LAGGED_GRACE).await;
                } => false,
            };
            if !written {
                self.shared.closed.cancel();
                return;
            }
        }
        self.shutdown();
    }

    async fn write_batch(&self, batch: &mut Vec<Bytes>) -> bool {
        let total: usize = batch.iter().map(Bytes::len).sum();
        let mut gathered = gather(batch);
        let result = self.write_all(&mut gathered).await;
        self.shared.written.fetch_add(total, Ordering::AcqRel);
        self.shared.queued.fetch_sub(total, Ordering::AcqRel);
        result.is_ok()
    }

    /// `write_all` for a shared socket: vectored non-blocking writes,
    /// waiting for the socket to take more in between.
    async fn write_all(&self, data: &mut SegmentedBuf<Bytes>) -> std::io::Result<()> {
        let socket = &self.shared.socket;
        while data.has_remaining() {
            socket.writable().await?;
            let mut slices = [IoSlice::new(&[]); 64];
            let count = data.chunks_vectored(&mut slices);
            match socket.try_write_vectored(&slices[..count]) {
                Ok(n) => data.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Ends the stream for the client: it reads EOF after what was written.
    fn shutdown(&self) {
        let _ = rustix::net::shutdown(self.shared.socket.as_ref(), rustix::net::Shutdown::Write);
    }

    /// The outbox was closed: flush what is queued (or, for a lagged client,
    /// drop it and say why), then close the socket.
    async fn finish(&mut self, batch: &mut Vec<Bytes>) {
        self.rx.close();
        batch.clear();
        let lagged = self.shared.lagged.load(Ordering::Acquire);
        if !lagged {
            while let Ok(frame) = self.rx.try_recv() {
                batch.push(frame);
            }
        }
        if lagged {
            batch.push(
                Event::error(
                    ErrorCode::Lagged,
                    "this client fell too far behind and was disconnected; reconnect for a \
                     fresh snapshot",
                    None,
                )
                .to_frame(),
            );
        }
        let _ = tokio::time::timeout(LAGGED_GRACE, self.write_batch(batch)).await;
        self.shutdown();
    }
}

/// Frames at least this long are written from where they lie; shorter ones
/// are copied together, so a burst of deltas is one buffer, not hundreds of
/// iovecs.
const GATHER_COPY_LIMIT: usize = 4096;

/// The batch as one buffer for a vectored write, emptying `batch`.
fn gather(batch: &mut Vec<Bytes>) -> SegmentedBuf<Bytes> {
    let mut gathered = SegmentedBuf::new();
    let mut small = BytesMut::new();
    for frame in batch.drain(..) {
        if frame.len() < GATHER_COPY_LIMIT {
            small.extend_from_slice(&frame);
            continue;
        }
        if !small.is_empty() {
            gathered.push(small.split().freeze());
        }
        gathered.push(frame);
    }
    if !small.is_empty() {
        gathered.push(small.freeze());
    }
    gathered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_snapshot_does_not_count_as_lag_but_what_follows_does() {
        let (_client, server) = tokio::net::UnixStream::pair().unwrap();
        let (_read, write) = server.into_split();
        let (outbox, _drain) = Outbox::new(write, 1000);
        let line = Bytes::from(vec![b'x'; 50_000]);
        assert!(
            outbox.push_snapshot(vec![line.clone(), line]),
            "a big snapshot"
        );
        assert!(outbox.push(Bytes::from(vec![b'x'; 600])));
        assert!(outbox.push(Bytes::from(vec![b'x'; 300])));
        assert!(!outbox.push(Bytes::from(vec![b'x'; 200])), "over the limit");
        assert!(outbox.is_closed());
    }

    #[tokio::test]
    async fn gathered_frames_arrive_whole_and_in_order() {
        let (client, server) = tokio::net::UnixStream::pair().unwrap();
        let (_read, write) = server.into_split();
        let (outbox, drain) = Outbox::new(write, 1 << 20);
        tokio::spawn(drain.run());
        let line = Bytes::from(vec![b'a'; 10_000]);
        outbox.push_snapshot(vec![
            Bytes::from_static(b"["),
            line.clone(),
            Bytes::from_static(b"]\n"),
        ]);
        for i in 0..100 {
            outbox.push(Bytes::from(format!("{i}\n")));
        }
        outbox.close();
        let mut received = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut { client }, &mut received)
            .await
            .unwrap();
        let mut expected = b"[".to_vec();
        expected.extend_from_slice(&line);
        expected.extend_from_slice(b"]\n");
        for i in 0..100 {
            expected.extend_from_slice(format!("{i}\n").as_bytes());
        }
        assert_eq!(received, expected);
    }
}
