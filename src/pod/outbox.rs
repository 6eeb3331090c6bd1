//! A connection's outbound stream: the handle everyone who answers a client
//! holds ([`Outbox`]), and the bounded queue on the broadcaster's thread that
//! writes to the socket ([`Queue`]) with its writer task ([`Drain`]).
//!
//! Every frame for a client is pushed onto its queue on one thread, the
//! broadcaster's: broadcasts there directly, and a client's own frames
//! (responses, errors) by way of the broadcaster's mailbox ([`Deliver`]).
//! That is enforced by the types, not by a comment: a [`Queue`] is neither
//! `Send` nor `Clone`, and the only way to get one is [`ClientSocket::open`]
//! on the thread that will push to it — the broadcaster calls it when it
//! registers the connection. So the queue needs no lock, and its frames
//! have one order: the broadcaster's mailbox order.
//!
//! Producers never wait on a socket, so a client that stops reading cannot
//! slow anyone else. A frame pushed while nothing is pending is written to
//! the socket at once if the socket takes it whole (a non-blocking write:
//! the common case, and no task wake-up per frame per client). Otherwise it
//! is queued, and the writer task gathers whatever is pending into one
//! vectored `write` per wake-up — small frames copied together, large ones
//! (a snapshot's log lines) referenced where they lie — which is what lets
//! one delta reach hundreds of clients at a high rate, and a long session
//! reach a client without being copied again.
//!
//! A client that lets more pile up than `limit` is *lagged*: the rule —
//! what counts as lag, what happens then — is [`Backlog`]'s, one type that
//! both lanes (this socket's and a WebSocket's feed) count their frames
//! in. The queue is dropped, the client gets an `error` with code `lagged`
//! (when its socket still takes it) and the connection is closed, so that
//! it reconnects and gets a fresh snapshot. A client that stops reading
//! therefore holds at most one frame plus `limit` bytes of the pod's
//! memory.
//!
//! A lagged client whose socket took part of a frame gets the rest of that
//! frame before its `lagged` error, so that what it reads stays whole
//! lines.
//!
//! A remote client's frames take the same path up to its queue; only the
//! sink differs ([`Sink::WebSocket`]): the queue hands them to a [`Feed`]
//! that the WebSocket's response body takes them from when its connection
//! can write (see `feed.rs`), with the same lag accounting and rule.

mod backlog;
mod feed;

use std::cell::{Cell, RefCell};
use std::io::{IoSlice, Write};
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix::{Message, Recipient};
use bytes::{Buf, Bytes, BytesMut};
use bytes_utils::SegmentedBuf;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ErrorCode, Event, Response};

use backlog::Backlog;
pub use feed::Feed;

/// How long a lagged client gets to take its `lagged` error before the socket
/// is dropped anyway.
const LAGGED_GRACE: Duration = Duration::from_secs(2);

pub type ConnId = u64;

/// A frame for one client alone (a response, an error), on its way to the
/// broadcaster's thread, where it joins the client's queue in mailbox order.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Deliver {
    pub to: ConnId,
    pub frame: Bytes,
}

/// A connection's way to send frames to its own client, from any thread:
/// each push is a [`Deliver`] to the broadcaster's thread, which owns the queue.
#[derive(Clone)]
pub struct Outbox {
    id: ConnId,
    deliver: Recipient<Deliver>,
    /// Fired when the connection is over (lag, shutdown, client gone,
    /// socket error): shared with the [`Queue`].
    closed: CancellationToken,
}

/// Where a connection's frames go.
pub enum Sink {
    /// A Unix socket (a local client, or a test's socket pair), written from
    /// the broadcaster's thread.
    Socket(std::os::unix::net::UnixStream),
    /// A WebSocket's response body, which takes them on the HTTP server's
    /// thread (a remote client).
    WebSocket(Arc<Feed>),
}

impl Outbox {
    /// The handle of connection `id` and the write half it sends to the
    /// broadcaster's thread (in `Subscribe`, then `Register`), where it becomes
    /// the connection's queue. A socket must be in non-blocking mode.
    pub fn new(
        id: ConnId,
        sink: Sink,
        limit: usize,
        deliver: Recipient<Deliver>,
    ) -> (Outbox, ClientSocket) {
        // A feed's body ends the connection when its client goes: it fires
        // the token it was made with.
        let closed = match &sink {
            Sink::Socket(_) => CancellationToken::new(),
            Sink::WebSocket(feed) => feed.closed.clone(),
        };
        let outbox = Outbox {
            id,
            deliver,
            closed: closed.clone(),
        };
        (
            outbox,
            ClientSocket {
                sink,
                limit,
                closed,
            },
        )
    }

    /// Sends a frame to this client, after every frame the broadcaster's thread
    /// has queued for it so far. False when the connection is over.
    pub fn push(&self, frame: Bytes) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        self.deliver.do_send(Deliver { to: self.id, frame });
        true
    }

    pub fn push_event(&self, event: &Event) -> bool {
        self.push(event.to_frame())
    }

    /// Stops the connection: the writer flushes what is queued, then closes.
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Resolves once the connection is over.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }
}

/// The client a method came from, so answers reach it alone.
#[derive(Clone)]
pub struct Client {
    pub outbox: Outbox,
    pub request_id: Option<String>,
}

impl Client {
    /// Sends the method's answer ([`crate::protocol::answer`]: its type
    /// says what the method answers), under the method's `request_id`.
    pub fn respond(&self, answer: impl Into<Response>) {
        self.outbox.push_event(&Event::Response(Response {
            request_id: self.request_id.clone(),
            ..answer.into()
        }));
    }

    /// Acknowledges a method that has no result of its own; only clients that
    /// asked (sent a `request_id`) get one.
    pub fn ack(&self) {
        if self.request_id.is_some() {
            self.respond(crate::protocol::answer::Ack);
        }
    }

    pub fn error(&self, code: ErrorCode, message: impl Into<String>) {
        self.outbox
            .push_event(&Event::error(code, message, self.request_id.clone()));
    }
}

/// A client's write half on its way to the broadcaster's thread: `Send`, but
/// good for nothing until [`ClientSocket::open`] makes it a [`Queue`] there.
pub struct ClientSocket {
    sink: Sink,
    limit: usize,
    closed: CancellationToken,
}

impl ClientSocket {
    /// The connection's queue and, for a socket, its writer task, which must
    /// be spawned on this same thread. The socket joins this thread's event
    /// loop, so its writes never wait for another thread's. (A feed's writer
    /// is the WebSocket's response body, already running.)
    pub fn open(self) -> std::io::Result<(Queue, Option<Drain>)> {
        let socket = match self.sink {
            Sink::Socket(socket) => socket,
            Sink::WebSocket(feed) => {
                let queue = Queue(Lane::Feed {
                    feed,
                    limit: self.limit,
                    thread: PhantomData,
                });
                return Ok((queue, None));
            }
        };
        if let Err(e) = socket.set_nonblocking(true) {
            self.closed.cancel();
            return Err(e);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Rc::new(Shared {
            socket,
            backlog: RefCell::new(Backlog::default()),
            limit: self.limit,
            at_boundary: Cell::new(true),
            closed: self.closed,
            done: CancellationToken::new(),
        });
        Ok((
            Queue(Lane::Socket {
                tx,
                shared: shared.clone(),
            }),
            Some(Drain { rx, shared }),
        ))
    }
}

/// The queue of frames for one client, owned by the broadcaster. Not `Send`
/// (see the module's doc): every push comes from the broadcaster's thread, which
/// is what lets a push write to the socket directly when nothing is
/// pending — the writer task, on the same thread, writes only while
/// something is. A feed's queue is no exception, though its frames leave
/// on another thread: they enter the feed in this thread's order.
pub struct Queue(Lane);

enum Lane {
    Socket {
        tx: mpsc::UnboundedSender<Piece>,
        shared: Rc<Shared>,
    },
    Feed {
        feed: Arc<Feed>,
        limit: usize,
        /// Keeps a feed's queue on the broadcaster's thread like any other.
        thread: PhantomData<Rc<()>>,
    },
}

/// Part of a frame on its way to the writer task, and whether the frame
/// ends with it.
struct Piece {
    bytes: Bytes,
    ends_frame: bool,
}

impl Piece {
    fn whole(frame: Bytes) -> Piece {
        Piece {
            bytes: frame,
            ends_frame: true,
        }
    }
}

struct Shared {
    /// The write half, non-blocking. It joins the event loop only while the
    /// writer waits for it to take more (see [`Drain::writable`]): a socket
    /// registered for writability for good would wake the loop every time
    /// its client reads, which with hundreds of clients is hundreds of
    /// wake-ups per delta for nothing.
    socket: std::os::unix::net::UnixStream,
    backlog: RefCell<Backlog>,
    limit: usize,
    /// What the socket took last ended a frame: where a `lagged` error may
    /// go. (Otherwise the rest of that frame is in the channel.)
    at_boundary: Cell<bool>,
    /// Fired when the outbox is closed (lag, shutdown, client gone).
    closed: CancellationToken,
    /// Fired when the writer task has finished: everything was written, or
    /// the client was given up on.
    done: CancellationToken,
}

impl Shared {
    fn backlog(&self) -> std::cell::RefMut<'_, Backlog> {
        self.backlog.borrow_mut()
    }
}

impl Queue {
    /// Queues a frame. Returns false when the connection is gone or lagged;
    /// the caller should forget it.
    pub fn push(&self, frame: Bytes) -> bool {
        let (tx, shared) = match &self.0 {
            Lane::Socket { tx, shared } => (tx, shared),
            Lane::Feed { feed, limit, .. } => return feed.push(frame, *limit),
        };
        if shared.closed.is_cancelled() {
            return false;
        }
        let mut frame = frame;
        let mut backlog = shared.backlog();
        if backlog.bytes() == 0 {
            match (&shared.socket).write(&frame) {
                Ok(n) if n == frame.len() => return true,
                Ok(n) => {
                    frame = frame.slice(n..);
                    shared.at_boundary.set(n == 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    drop(backlog);
                    shared.closed.cancel();
                    return false;
                }
            }
        }
        if !backlog.admit(frame.len(), shared.limit) {
            // Lagged. The writer drops the channel but for the rest of a
            // frame the socket took part of (lag needs a frame in front of
            // this one, so the socket took none of this).
            drop(backlog);
            shared.closed.cancel();
            return false;
        }
        tx.send(Piece::whole(frame)).is_ok()
    }

    /// Queues a snapshot — the first frame of every connection, and the one
    /// after `session_switched` — as the pieces it is made of (its log lines
    /// are the mirror's own bytes). It counts as one frame, so however long
    /// the session, it is not lag.
    pub fn push_snapshot(&self, parts: Vec<Bytes>) -> bool {
        let (tx, shared) = match &self.0 {
            Lane::Socket { tx, shared } => (tx, shared),
            Lane::Feed { feed, limit, .. } => return feed.push_snapshot(parts, *limit),
        };
        if shared.closed.is_cancelled() {
            return false;
        }
        let len = parts.iter().map(Bytes::len).sum();
        shared.backlog().admit_snapshot(len, shared.limit);
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.into_iter().enumerate() {
            let piece = Piece {
                bytes: part,
                ends_frame: i == last,
            };
            if tx.send(piece).is_err() {
                return false;
            }
        }
        true
    }

    /// Stops the connection: the writer flushes what is queued, then closes.
    pub fn close(&self) {
        match &self.0 {
            Lane::Socket { shared, .. } => shared.closed.cancel(),
            Lane::Feed { feed, .. } => feed.close(),
        }
    }

    /// Resolves once the writer task has finished: after a close, when
    /// everything queued was written or the client was given up on.
    pub async fn flushed(&self) {
        match &self.0 {
            Lane::Socket { shared, .. } => shared.done.cancelled().await,
            Lane::Feed { feed, .. } => feed.done().await,
        }
    }
}

/// The writer task of a [`Queue`]: spawned on the queue's thread.
pub struct Drain {
    rx: mpsc::UnboundedReceiver<Piece>,
    shared: Rc<Shared>,
}

impl Drain {
    /// Writes frames until the outbox closes or the socket fails. On a normal
    /// close everything already queued is flushed first.
    pub async fn run(mut self) {
        let _done = self.shared.done.clone().drop_guard();
        let mut batch: Vec<Piece> = Vec::with_capacity(64);
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

    async fn write_batch(&self, batch: &mut Vec<Piece>) -> bool {
        let Some(last) = batch.last() else {
            return true;
        };
        let ends_frame = last.ends_frame;
        let mut gathered = gather(batch);
        let written = self.write_all(&mut gathered).await.is_ok();
        self.shared.at_boundary.set(ends_frame);
        written
    }

    /// `write_all` for a shared socket: vectored non-blocking writes,
    /// waiting for the socket to take more in between.
    async fn write_all(&self, data: &mut SegmentedBuf<Bytes>) -> std::io::Result<()> {
        let mut socket = &self.shared.socket;
        while data.has_remaining() {
            let mut slices = [IoSlice::new(&[]); 64];
            let count = data.chunks_vectored(&mut slices);
            match socket.write_vectored(&slices[..count]) {
                Ok(n) => {
                    data.advance(n);
                    self.shared.backlog().taken(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits until the socket takes more, registered with the event loop
    /// for just that long. Registering reports readiness at once if the
    /// client has read meanwhile, so no wake-up is lost between the full
    /// write and the registration.
    async fn writable(&self) -> std::io::Result<()> {
        // SAFETY: the descriptor is borrowed from the socket `Shared` owns,
        // which outlives this registration, so it stays open and refers to
        // the same socket until the `AsyncFd` is dropped at the end here.
        let fd = unsafe {
            AsyncFd::register_with_interest(self.shared.socket.as_fd(), Interest::WRITABLE)?
        };
        fd.writable().await?.clear_ready();
        Ok(())
    }

    /// Ends the stream for the client: it reads EOF after what was written.
    fn shutdown(&self) {
        let _ = rustix::net::shutdown(&self.shared.socket, rustix::net::Shutdown::Write);
    }

    /// The outbox was closed: flush what is queued (or, for a lagged client,
    /// drop it — all but the end of a frame it is in the middle of — and
    /// say why), then close the socket.
    async fn finish(&mut self, batch: &mut Vec<Piece>) {
        self.rx.close();
        batch.clear();
        let lagged = self.shared.backlog().is_lagged();
        let mut at_boundary = self.shared.at_boundary.get();
        while !(lagged && at_boundary) {
            let Ok(piece) = self.rx.try_recv() else {
                break;
            };
            at_boundary = piece.ends_frame;
            batch.push(piece);
        }
        if lagged {
            batch.push(Piece::whole(lagged_frame()));
        }
        let _ = tokio::time::timeout(LAGGED_GRACE, self.write_batch(batch)).await;
        self.shutdown();
    }
}

/// The last frame a lagged client gets.
pub fn lagged_frame() -> Bytes {
    Event::error(
        ErrorCode::Lagged,
        "this client fell too far behind and was disconnected; reconnect for a fresh snapshot",
        None,
    )
    .to_frame()
}

/// Frames at least this long are written from where they lie; shorter ones
/// are copied together, so a burst of deltas is one buffer, not hundreds of
/// iovecs.
const GATHER_COPY_LIMIT: usize = 4096;

/// The batch as one buffer for a vectored write, emptying `batch`.
fn gather(batch: &mut Vec<Piece>) -> SegmentedBuf<Bytes> {
    let mut gathered = SegmentedBuf::new();
    let mut small = BytesMut::new();
    for Piece { bytes: frame, .. } in batch.drain(..) {
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

    fn shared(queue: &Queue) -> &Shared {
        match &queue.0 {
            Lane::Socket { shared, .. } => shared,
            Lane::Feed { .. } => panic!("a socket's queue"),
        }
    }

    /// A queue on one end of a socket pair, and the other end.
    fn queue(limit: usize) -> (tokio::net::UnixStream, Queue, Drain) {
        let (client, server) = std::os::unix::net::UnixStream::pair().unwrap();
        server.set_nonblocking(true).unwrap();
        let socket = ClientSocket {
            sink: Sink::Socket(server),
            limit,
            closed: CancellationToken::new(),
        };
        let (queue, drain) = socket.open().unwrap();
        let drain = drain.unwrap();
        client.set_nonblocking(true).unwrap();
        (
            tokio::net::UnixStream::from_std(client).unwrap(),
            queue,
            drain,
        )
    }

    #[actix_rt::test]
    async fn the_snapshot_does_not_count_as_lag_but_what_follows_does() {
        let (_client, outbox, _drain) = queue(1000);
        let line = Bytes::from(vec![b'x'; 50_000]);
        assert!(
            outbox.push_snapshot(vec![line.clone(), line]),
            "a big snapshot"
        );
        assert!(outbox.push(Bytes::from(vec![b'x'; 600])));
        assert!(outbox.push(Bytes::from(vec![b'x'; 300])));
        assert!(!outbox.push(Bytes::from(vec![b'x'; 200])), "over the limit");
        assert!(shared(&outbox).closed.is_cancelled());
    }

    #[actix_rt::test]
    async fn many_tiny_frames_lag_by_their_count() {
        let (_client, outbox, _drain) = queue(10_000);
        assert!(outbox.push_snapshot(vec![Bytes::from(vec![b'x'; 100_000])]));
        // One-byte frames: 10 000 of them would be under the limit by
        // bytes; their queue is not.
        let pushed = (0..10_000)
            .take_while(|_| outbox.push(Bytes::from_static(b"x")))
            .count();
        assert!(
            pushed < 10_000 / backlog::FRAME_COST + 1,
            "{pushed} frames queued"
        );
        assert!(shared(&outbox).closed.is_cancelled());
    }

    #[actix_rt::test]
    async fn a_frame_larger_than_the_limit_is_not_lag_for_the_frames_behind_it() {
        let (_client, outbox, _drain) = queue(1000);
        assert!(
            outbox.push(Bytes::from(vec![b'x'; 1_000_000])),
            "a big frame"
        );
        assert!(outbox.push(Bytes::from(vec![b'x'; 600])));
        assert!(outbox.push(Bytes::from(vec![b'x'; 300])));
        assert!(!outbox.push(Bytes::from(vec![b'x'; 200])), "over the limit");
        assert!(shared(&outbox).closed.is_cancelled());
    }

    #[actix_rt::test]
    async fn a_reader_of_big_frames_is_never_lagged() {
        let (client, outbox, drain) = queue(1000);
        actix_rt::spawn(drain.run());
        let reader = tokio::spawn(async move {
            let mut received = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut { client }, &mut received)
                .await
                .unwrap();
            received.len()
        });
        let mut sent = 0;
        for _ in 0..5 {
            for len in [300_000, 100, 200, 300] {
                assert!(outbox.push(Bytes::from(vec![b'x'; len])), "lagged");
                sent += len;
            }
            // The client reads the reply before it sends the next run.
            while shared(&outbox).backlog().bytes() > 0 {
                tokio::task::yield_now().await;
            }
        }
        outbox.close();
        assert_eq!(reader.await.unwrap(), sent);
    }

    #[actix_rt::test]
    async fn a_client_lagged_in_the_middle_of_a_frame_gets_its_end_then_lagged() {
        let (client, outbox, drain) = queue(1000);
        // Longer than the socket pair's buffers: the socket takes part of
        // it, the rest waits in the channel.
        let big = Bytes::from([vec![b'b'; 4_000_000], vec![b'\n']].concat());
        assert!(outbox.push(big.clone()));
        assert!(
            !shared(&outbox).at_boundary.get(),
            "the socket took part of it"
        );
        let mut pushed = 0;
        while outbox.push(Bytes::from_static(b"{\"type\":\"text_delta\"}\n")) {
            pushed += 1;
        }
        assert!(pushed > 0 && shared(&outbox).backlog().is_lagged());
        actix_rt::spawn(drain.run());
        let mut received = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut { client }, &mut received)
            .await
            .unwrap();
        let lines: Vec<&[u8]> = received.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3, "the big frame, `lagged`, nothing after");
        assert_eq!(lines[0], &big[..big.len() - 1], "the big frame, whole");
        assert_eq!(lines[1], &lagged_frame()[..lagged_frame().len() - 1]);
        assert!(lines[2].is_empty());
    }

    #[actix_rt::test]
    async fn gathered_frames_arrive_whole_and_in_order() {
        let (client, outbox, drain) = queue(1 << 20);
        actix_rt::spawn(drain.run());
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
