//! One WebSocket ↔ one pod connection.
//!
//! A remote client is a `Connection` like any other: the server makes a
//! Unix socket pair, hands one end to the pod's accept path (with the
//! connection's access) and pumps the other end to and from the WebSocket
//! here — one newline-terminated frame ↔ one text message. Everything the
//! protocol promises (the snapshot first, the invariant, `lagged`) is the
//! pod's, unchanged. A client that reads slowly stops this pump, which
//! stops reading the socket pair, whose bytes then wait in the pod's outbox
//! exactly as for a slow local client.
//!
//! Inbound messages are streamed into the socket pair fragment by
//! fragment, never assembled here: the pod's frame decoder counts the
//! bytes and skips an oversized message (`frame_too_large`). A newline
//! inside a message becomes a space, so a message is one frame (JSON has
//! no raw newline inside a string, so valid JSON stays valid, and two
//! objects in one message are `bad_frame`).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix_ws::{CloseCode, CloseReason, Item, Message, MessageStream, Session};
use bytes::{Bytes, BytesMut};
use bytestring::ByteString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::protocol::{ErrorCode, Event};

/// How often the server pings.
const PING_EVERY: Duration = Duration::from_secs(30);
/// A client that has not answered a ping for this long is closed.
const PONG_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs until either side closes. `revoked` fires when the connection's
/// token is revoked; `_slot` holds its place among `--max-remote-clients`.
pub async fn run<T>(
    session: Session,
    messages: MessageStream,
    pod: tokio::net::UnixStream,
    revoked: CancellationToken,
    _slot: T,
) {
    let (from_pod, to_pod) = pod.into_split();
    let closer = session.clone();
    // Frames the bridge itself says (`bad_frame` for a binary message…),
    // sent between two of the pod's frames and never before the snapshot.
    let (say, said) = mpsc::unbounded_channel::<Bytes>();
    let last_pong = Rc::new(Cell::new(Instant::now()));
    let inbound = inbound(session.clone(), messages, to_pod, say, last_pong.clone());
    let outbound = outbound(session, from_pod, said, revoked, last_pong);
    tokio::pin!(inbound, outbound);
    if let futures::future::Either::Left((reason, _)) =
        futures::future::select(inbound, outbound).await
    {
        let _ = closer.close(reason).await;
    }
}

/// Client → pod, until the client closes; says how to close.
async fn inbound(
    mut session: Session,
    mut messages: MessageStream,
    mut to_pod: OwnedWriteHalf,
    say: mpsc::UnboundedSender<Bytes>,
    last_pong: Rc<Cell<Instant>>,
) -> Option<CloseReason> {
    // Inside a fragmented message: a text one (streamed on) or a binary one
    // (discarded up to its last fragment).
    let mut in_text = false;
    let mut in_binary = false;
    while let Some(message) = messages.recv().await {
        let written = match message {
            Ok(Message::Text(text)) => write_message(&mut to_pod, text.as_bytes(), true).await,
            Ok(Message::Continuation(Item::FirstText(part))) => {
                in_text = true;
                write_message(&mut to_pod, &part, false).await
            }
            Ok(Message::Continuation(Item::Continue(part))) if in_text => {
                write_message(&mut to_pod, &part, false).await
            }
            Ok(Message::Continuation(Item::Last(part))) if in_text => {
                in_text = false;
                write_message(&mut to_pod, &part, true).await
            }
            Ok(Message::Continuation(Item::FirstBinary(_))) => {
                in_binary = true;
                Ok(())
            }
            Ok(Message::Continuation(Item::Last(_))) if in_binary => {
                in_binary = false;
                refuse_binary(&say);
                Ok(())
            }
            Ok(Message::Continuation(_)) => Ok(()),
            Ok(Message::Binary(_)) => {
                refuse_binary(&say);
                Ok(())
            }
            Ok(Message::Ping(payload)) => match session.pong(&payload).await {
                Ok(()) => Ok(()),
                Err(_) => return None,
            },
            Ok(Message::Pong(_)) => {
                last_pong.set(Instant::now());
                Ok(())
            }
            Ok(Message::Close(_)) => return None,
            Ok(Message::Nop) => Ok(()),
            Err(actix_ws::ProtocolError::Overflow) => {
                // One frame above the limit: the WebSocket stack cannot skip
                // a frame it has not read, so this one ends the connection.
                let frame = error_text(
                    ErrorCode::FrameTooLarge,
                    "a WebSocket frame longer than the pod's --max-frame-bytes; the connection \
                     is closed (send large messages in fragments: an oversized fragmented \
                     message is skipped and the connection kept)",
                );
                if let Ok(text) = ByteString::try_from(frame) {
                    let _ = session.text(text).await;
                }
                return Some(CloseReason {
                    code: CloseCode::Size,
                    description: Some("frame too large".into()),
                });
            }
            Err(_) => {
                return Some(CloseReason {
                    code: CloseCode::Protocol,
                    description: None,
                })
            }
        };
        if written.is_err() {
            return None;
        }
    }
    None
}

/// Writes part of a message to the pod, each newline as a space, and the
/// frame's newline after its last part.
async fn write_message(
    to_pod: &mut OwnedWriteHalf,
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

fn refuse_binary(say: &mpsc::UnboundedSender<Bytes>) {
    let _ = say.send(error_text(
        ErrorCode::BadFrame,
        "binary messages are not part of the protocol: send each frame as one text message \
         holding one JSON object",
    ));
}

fn error_text(code: ErrorCode, message: &str) -> Bytes {
    let frame = Event::error(code, message, None).to_frame();
    frame.slice(..frame.len().saturating_sub(1))
}

/// The bridge's read from the socket pair, and the most of one line it
/// holds before sending what it has as a fragment.
const CHUNK: usize = 256 * 1024;

/// Pod → client, with the pings and the bridge's own frames.
///
/// A line that fits in [`CHUNK`] goes out as one text message. A longer
/// one (the snapshot of a long session: megabytes) goes out as fragments
/// of one text message, each as soon as its bytes are read: the client
/// receives the same message, but its first bytes leave while the pod is
/// still writing the rest, and no buffer here grows to the size of the
/// line (store-and-forward of a 10 MiB snapshot cost three passes over
/// multi-MiB buffers and their page faults before the first byte left;
/// see docs/performance.md, scenario 10).
async fn outbound(
    mut session: Session,
    mut from_pod: OwnedReadHalf,
    mut said: mpsc::UnboundedReceiver<Bytes>,
    revoked: CancellationToken,
    last_pong: Rc<Cell<Instant>>,
) {
    let mut buf = BytesMut::with_capacity(CHUNK);
    // Bytes at the start of `buf` already searched for a newline.
    let mut scanned = 0;
    let mut snapshot_sent = false;
    // Fragments of the line in progress have gone out, its last one not:
    // nothing but a control frame may go out before it.
    let mut mid_message = false;
    // The token was revoked while a line was going out in fragments: the
    // error follows once that line is whole.
    let mut revoking = false;
    let mut pings = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    let reason = loop {
        if revoking && !mid_message {
            break revoke(&mut session).await;
        }
        tokio::select! {
            read = from_pod.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break None,
                Ok(_) => {
                    while let Some(at) = memchr::memchr(b'\n', &buf[scanned..]) {
                        let mut line = buf.split_to(scanned + at + 1);
                        line.truncate(line.len() - 1);
                        scanned = 0;
                        let sent = if mid_message {
                            mid_message = false;
                            session.continuation(Item::Last(line.freeze())).await
                        } else {
                            // The pod's frames are serde_json's output,
                            // always UTF-8; a line that were not is dropped
                            // rather than sent as text.
                            let Ok(text) = ByteString::try_from(line.freeze()) else {
                                continue;
                            };
                            session.text(text).await
                        };
                        if sent.is_err() {
                            return;
                        }
                        snapshot_sent = true;
                    }
                    scanned = buf.len();
                    if buf.len() >= CHUNK {
                        // No newline in a whole chunk: a long line, sent
                        // on as a fragment. A fragment may end inside a
                        // UTF-8 sequence; the message as a whole is valid.
                        let part = buf.split().freeze();
                        scanned = 0;
                        let item = if mid_message {
                            Item::Continue(part)
                        } else {
                            Item::FirstText(part)
                        };
                        mid_message = true;
                        if session.continuation(item).await.is_err() {
                            return;
                        }
                    }
                    if buf.capacity() - buf.len() < CHUNK / 4 {
                        buf.reserve(CHUNK);
                    }
                }
            },
            Some(frame) = said.recv(), if snapshot_sent && !mid_message => {
                let Ok(text) = ByteString::try_from(frame) else { continue };
                if session.text(text).await.is_err() {
                    return;
                }
            },
            _ = pings.tick() => {
                if last_pong.get().elapsed() > PONG_TIMEOUT {
                    break Some(CloseReason {
                        code: CloseCode::Away,
                        description: Some("no answer to pings for 60 s".into()),
                    });
                }
                if session.ping(b"pod").await.is_err() {
                    return;
                }
            },
            () = revoked.cancelled(), if !revoking => {
                revoking = true;
            },
        }
    };
    let _ = session.close(reason).await;
}

/// Says the token was revoked (between two lines); how to close.
async fn revoke(session: &mut Session) -> Option<CloseReason> {
    let frame = error_text(ErrorCode::Unauthorized, "this device token was revoked");
    if let Ok(text) = ByteString::try_from(frame) {
        let _ = session.text(text).await;
    }
    Some(CloseReason {
        code: CloseCode::Policy,
        description: Some("token revoked".into()),
    })
}
