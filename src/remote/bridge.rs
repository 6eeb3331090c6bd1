//! One WebSocket ↔ one pod connection.
//!
//! A remote client is a `Connection` like any other: the same actor, the
//! same outbox and queue on the broadcaster's thread, the same order, lag
//! rule and snapshot first. Only the transport differs. Its frames reach
//! the WebSocket with no socket in between: the queue hands them to a
//! [`Feed`], and the WebSocket's response body here ([`Outgoing`]) takes
//! them whenever the HTTP connection can write — one newline-terminated
//! frame, one text message, encoded with actix-http's WebSocket framing. A
//! client that reads slowly leaves the body unpolled (actix-http polls a
//! body only while its write buffer is short), so its frames wait in the
//! feed, counted as lag, and go out together once it catches up, exactly
//! as for a slow local client.
//!
//! Inbound messages (few and small) go through a Unix socket pair to the
//! connection's reader, streamed on as their bytes arrive ([`inbound`](super::inbound)
//! reads the WebSocket frames without assembling them, however long one
//! is): the pod's frame decoder counts the bytes and skips an oversized
//! message (`frame_too_large`), and the bridge stops handing one on past
//! the limit. A newline inside a message becomes a space,
//! so a message is one frame (JSON has no raw newline inside a string, so
//! valid JSON stays valid, and two objects in one message are
//! `bad_frame`).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use actix_http::ws::{CloseCode, CloseReason, OpCode, Parser};
use actix_web::body::{BodyStream, BoxBody, MessageBody as _};
use bytes::{Bytes, BytesMut};
use futures::{Future as _, Stream, StreamExt as _};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use super::inbound::{Part, Reader, Violation};
use crate::pod::Feed;
use crate::protocol::{ErrorCode, Event};

/// How often the server pings.
const PING_EVERY: Duration = Duration::from_secs(30);
/// A client that has not answered a ping for this long is closed.
const PONG_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a closing connection keeps its place among
/// `--max-remote-clients` for its last frames to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The most the body takes from the feed at a time, and the most of one
/// line it holds before sending what it has as a fragment: a long line
/// (the snapshot of a long session: megabytes) goes out as fragments of one
/// text message, so no buffer here grows to the size of the line. Small
/// enough that the line, its encoding and the HTTP connection's copy of it
/// stay in the CPU's cache: of those copies only the first reads the
/// session's lines from memory.
const CHUNK: usize = 64 * 1024;

/// The most of the bridge's own frames (`bad_frame` for binary messages)
/// that may wait for a client to read them. A client that sends binary
/// messages and never reads would otherwise grow this queue by one frame
/// per message, without end; past it the client is cut off as lagged.
const MAX_SAID: usize = 256;

/// Starts serving one accepted WebSocket: answers the response body, and
/// spawns the task that carries the client's messages to the pod (`to_pod`)
/// and says the bridge's own frames. `revoked` fires when the connection's
/// token is revoked; `slot` holds its place among `--max-remote-clients`.
pub fn open<T: 'static>(
    feed: Arc<Feed>,
    payload: actix_web::web::Payload,
    to_pod: tokio::net::UnixStream,
    revoked: CancellationToken,
    slot: T,
    max_frame_bytes: usize,
) -> BoxBody {
    let side = Rc::new(Side::default());
    let body = Outgoing {
        closed: Some(Box::pin(feed.closed_owned())),
        feed: feed.clone(),
        side: side.clone(),
        taken: Vec::new(),
        line: BytesMut::new(),
        mid_message: false,
        lines_sent: false,
        out: BytesMut::new(),
        ended: false,
    };
    let inbound = Inbound {
        payload,
        to_pod,
        max_frame_bytes,
    };
    actix_web::rt::spawn(run(feed, side, inbound, revoked, slot));
    BodyStream::new(body).boxed()
}

/// What the bridge sends besides the pod's frames; shared by its task and
/// the body, which run on the same thread.
#[derive(Default)]
struct Side {
    /// A ping and the answer to the client's latest ping, at most one
    /// each: sent first, even between two fragments of a message.
    control: RefCell<Vec<(OpCode, Bytes)>>,
    /// The bridge's own frames (`bad_frame` for a binary message): sent
    /// between two of the pod's frames, never before the snapshot.
    said: RefCell<VecDeque<Bytes>>,
    /// The bridge is closing the connection: its last frame, if any, and
    /// the close frame's reason.
    ending: RefCell<Option<Ending>>,
}

struct Ending {
    text: Option<Bytes>,
    reason: Option<CloseReason>,
}

impl Side {
    /// Queues a ping or a pong in place of one of the same kind not yet
    /// sent: a pong need answer only the latest ping (RFC 6455, 5.5.3),
    /// so a client that pings and never reads queues nothing more.
    fn control(&self, feed: &Feed, op: OpCode, payload: Bytes) {
        let mut control = self.control.borrow_mut();
        control.retain(|(queued, _)| *queued != op);
        control.push((op, payload));
        feed.wake();
    }

    /// Queues one of the bridge's frames; false when [`MAX_SAID`] wait
    /// already (the client does not read).
    fn say(&self, feed: &Feed, frame: Bytes) -> bool {
        let mut said = self.said.borrow_mut();
        if said.len() >= MAX_SAID {
            return false;
        }
        said.push_back(frame);
        feed.wake();
        true
    }

    /// Closes the connection: the pod stops queueing for it, the body sends
    /// what is queued, then `ending`.
    fn end(&self, feed: &Feed, ending: Ending) {
        self.ending.borrow_mut().get_or_insert(ending);
        feed.close();
    }
}

/// The client's side: its bytes, and where its messages go.
struct Inbound {
    /// The request's body: after the upgrade, the client's frames.
    payload: actix_web::web::Payload,
    to_pod: tokio::net::UnixStream,
    max_frame_bytes: usize,
}

/// Runs until the connection is over; holds `_slot` until the body has
/// sent its last frame (or a grace period has passed).
async fn run<T>(
    feed: Arc<Feed>,
    side: Rc<Side>,
    from_client: Inbound,
    revoked: CancellationToken,
    _slot: T,
) {
    let last_pong = Rc::new(Cell::new(Instant::now()));
    let inbound = inbound(&feed, &side, from_client, &last_pong);
    let watch = watch(&feed, &side, revoked, &last_pong);
    let ending = tokio::select! {
        ending = inbound => Some(ending),
        ending = watch => Some(ending),
        () = feed.closed() => None,
    };
    if let Some(ending) = ending {
        side.end(&feed, ending);
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, feed.done()).await;
}

/// Pings, and the token's revocation; says how to close.
async fn watch(
    feed: &Feed,
    side: &Side,
    revoked: CancellationToken,
    last_pong: &Cell<Instant>,
) -> Ending {
    let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    loop {
        tokio::select! {
            _ = pings.tick() => {
                if last_pong.get().elapsed() > PONG_TIMEOUT {
                    return Ending {
                        text: None,
                        reason: Some(CloseReason {
                            code: CloseCode::Away,
                            description: Some("no answer to pings for 60 s".into()),
                        }),
                    };
                }
                side.control(feed, OpCode::Ping, Bytes::from_static(b"pod"));
            },
            () = revoked.cancelled() => {
                return Ending {
                    text: Some(error_text(ErrorCode::Unauthorized, "this device token was revoked")),
                    reason: Some(CloseReason {
                        code: CloseCode::Policy,
                        description: Some("token revoked".into()),
                    }),
                };
            },
        }
    }
}

/// Client → pod, until the client closes; says how to close.
///
/// A text message's bytes go on to the pod as they arrive, up to one byte
/// more than `--max-frame-bytes`: enough for the pod's frame decoder to
/// answer `frame_too_large` and skip to the message's end, without the
/// rest of an oversized message crossing to the pod at all.
async fn inbound(
    feed: &Feed,
    side: &Side,
    from_client: Inbound,
    last_pong: &Cell<Instant>,
) -> Ending {
    let Inbound {
        mut payload,
        mut to_pod,
        max_frame_bytes,
    } = from_client;
    let quietly = Ending {
        text: None,
        reason: None,
    };
    let mut reader = Reader::default();
    // Bytes of the text message in progress handed to the pod so far.
    let mut handed = 0usize;
    loop {
        loop {
            let part = match reader.next_part() {
                Ok(Some(part)) => part,
                Ok(None) => break,
                Err(Violation(why)) => {
                    return Ending {
                        text: None,
                        reason: Some(CloseReason {
                            code: CloseCode::Protocol,
                            description: Some(why.into()),
                        }),
                    }
                }
            };
            let written = match part {
                Part::Text { bytes, last } => {
                    let room = max_frame_bytes.saturating_add(1).saturating_sub(handed);
                    let bytes = &bytes[..bytes.len().min(room)];
                    handed += bytes.len();
                    if last {
                        handed = 0;
                    }
                    write_message(&mut to_pod, bytes, last).await
                }
                Part::BinaryEnded => match side.say(feed, binary_refused()) {
                    true => Ok(()),
                    false => return not_reading(),
                },
                Part::Ping(payload) => {
                    side.control(feed, OpCode::Pong, payload);
                    Ok(())
                }
                Part::Pong => {
                    last_pong.set(Instant::now());
                    Ok(())
                }
                Part::Close => return quietly,
            };
            if written.is_err() {
                return quietly;
            }
        }
        match payload.next().await {
            Some(Ok(bytes)) => reader.extend(&bytes),
            Some(Err(_)) | None => return quietly,
        }
    }
}

/// The ending of a client that keeps sending what the bridge must answer
/// but does not read the answers: `lagged`, as for any client that falls
/// that far behind.
fn not_reading() -> Ending {
    let frame = crate::pod::lagged_frame();
    Ending {
        text: Some(frame.slice(..frame.len().saturating_sub(1))),
        reason: Some(CloseReason {
            code: CloseCode::Policy,
            description: Some("the client does not read".into()),
        }),
    }
}

/// Writes part of a message to the pod, each newline as a space, and the
/// frame's newline after its last part.
async fn write_message(
    to_pod: &mut tokio::net::UnixStream,
    part: &[u8],
    last: bool,
) -> std::io::Result<()> {
    if part.contains(&b'\n') {
        let part: Vec<u8> = part
            .iter()
            .map(|&b| if b == b'\n' { b' ' } else { b })
            .collect();
        to_pod.write_all(&part).await?;
    } else {
        to_pod.write_all(part).await?;
    }
    if last {
        to_pod.write_all(b"\n").await?;
    }
    Ok(())
}

fn binary_refused() -> Bytes {
    error_text(
        ErrorCode::BadFrame,
        "binary messages are not part of the protocol: send each frame as one text message \
         holding one JSON object",
    )
}

/// An `error` frame without its newline: a text message's payload.
fn error_text(code: ErrorCode, message: &str) -> Bytes {
    let frame = Event::error(code, message, None).to_frame();
    frame.slice(..frame.len().saturating_sub(1))
}

/// The WebSocket's response body: the feed's frames, one text message
/// each, with the bridge's pings, pongs, frames and close.
struct Outgoing {
    feed: Arc<Feed>,
    /// Resolves when the connection is over, however it ended, so the body
    /// wakes to close (`None` once it has).
    closed: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
    side: Rc<Side>,
    /// What one poll took from the feed (reused).
    taken: Vec<Bytes>,
    /// The line in progress that has not gone out (less than [`CHUNK`]).
    line: BytesMut,
    /// Fragments of the line in progress have gone out, its last one not.
    mid_message: bool,
    /// A whole line (the snapshot) has gone out: the bridge may speak.
    lines_sent: bool,
    /// The bytes for the HTTP connection. Taken by `split`, so its memory
    /// is used again once the connection has copied them out.
    out: BytesMut,
    ended: bool,
}

impl Outgoing {
    fn text(&mut self, payload: &[u8], op: OpCode, fin: bool) {
        Parser::write_message(&mut self.out, payload, op, fin, false);
    }

    /// Between two lines: where the bridge's own frames may go.
    fn at_boundary(&self) -> bool {
        self.line.is_empty() && !self.mid_message
    }

    /// Encodes a piece of the pod's byte stream: each line ending in it
    /// as a message (or its last fragment), the rest kept for later.
    fn encode(&mut self, mut piece: Bytes) {
        while let Some(at) = memchr::memchr(b'\n', &piece) {
            let line = piece.split_to(at + 1);
            let line = &line[..at];
            if self.at_boundary() {
                // The common case, a whole frame in one piece: no copy
                // besides the encoding.
                self.text(line, OpCode::Text, true);
            } else {
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line);
                let op = self.opcode();
                self.text(&whole, op, true);
                whole.clear();
                self.line = whole;
                self.mid_message = false;
            }
            self.lines_sent = true;
        }
        if piece.is_empty() {
            return;
        }
        self.line.extend_from_slice(&piece);
        if self.line.len() >= CHUNK {
            // A long line: sent on as a fragment. A fragment may end
            // inside a UTF-8 sequence; the message as a whole is valid.
            let op = self.opcode();
            let mut part = std::mem::take(&mut self.line);
            self.text(&part, op, false);
            part.clear();
            self.line = part;
            self.mid_message = true;
        }
    }

    fn opcode(&self) -> OpCode {
        if self.mid_message {
            OpCode::Continue
        } else {
            OpCode::Text
        }
    }

    /// The last frames: after everything queued, `lagged` or the bridge's
    /// last word (each only between two lines), then the close frame.
    fn close(&mut self, lagged: bool) {
        let ending = self.side.ending.borrow_mut().take();
        let (text, reason) = match ending {
            Some(Ending { text, reason }) => (text, reason),
            None => (None, None),
        };
        let text = if lagged {
            let frame = crate::pod::lagged_frame();
            Some(frame.slice(..frame.len().saturating_sub(1)))
        } else {
            text
        };
        if let Some(text) = text.filter(|_| self.at_boundary()) {
            self.text(&text, OpCode::Text, true);
        }
        Parser::write_close(&mut self.out, reason, false);
        self.ended = true;
    }
}

impl Stream for Outgoing {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        for (op, payload) in this.side.control.borrow_mut().drain(..) {
            Parser::write_message(&mut this.out, &payload, op, true, false);
        }
        let mut taken = std::mem::take(&mut this.taken);
        let end = this.feed.take(cx, CHUNK, &mut taken);
        for piece in taken.drain(..) {
            this.encode(piece);
        }
        this.taken = taken;
        if this.lines_sent && this.at_boundary() {
            let said = std::mem::take(&mut *this.side.said.borrow_mut());
            for frame in said {
                this.text(&frame, OpCode::Text, true);
            }
        }
        if let Some(lagged) = end {
            this.close(lagged);
            this.feed.finish();
        }
        if !this.out.is_empty() {
            // actix-http polls a body again until it is pending (or until
            // its write buffer is long, when nothing more could go out
            // anyway), so the watch on `closed` below is set by that poll:
            // once per wake-up rather than on every poll (callgrind: ~280
            // instructions per message and client, docs/performance.md §10).
            return Poll::Ready(Some(Ok(this.out.split().freeze())));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        // Pending: wake when the connection is over, however it ended.
        if let Some(closed) = &mut this.closed {
            if closed.as_mut().poll(cx).is_ready() {
                this.closed = None;
                cx.waker().wake_by_ref();
            }
        }
        Poll::Pending
    }
}

impl Drop for Outgoing {
    /// The client is gone (or the body ended): the connection is over.
    fn drop(&mut self) {
        self.feed.finish();
    }
}
