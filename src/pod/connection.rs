//! The `Connection` actor: one per attached client.
//!
//! It reads frames, turns each into a method for the right actor, and answers
//! what concerns this client alone (`response`, frame errors) through its own
//! outbox. It never writes to the socket itself: everything goes through the
//! outbox, so its frames and the broadcaster's share one ordered stream.
//! Nothing a client sends can end the connection or reach another client:
//! a bad frame gets an `error` here and is otherwise dropped.

use actix::prelude::*;
use tokio::net::unix::OwnedReadHalf;
use tokio::net::UnixStream;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, Decoder, FramedRead};

use super::broadcaster::{ConnId, Unregister};
use super::outbox::Outbox;
use super::session_log::{GetSession, ListSessions, SessionLookupError, Subscribe};
use super::worker;
use super::{Client, Hub};
use crate::protocol::{ErrorCode, Event, Method, Request, Response};

pub struct Connection {
    id: ConnId,
    outbox: Outbox,
    hub: Hub,
    /// The client's `hello` label, for `approval_decision.client`.
    label: Option<String>,
    /// The peer is the pod itself or one of its descendants (a tool's
    /// process): it may only read, so a tool can never approve itself.
    read_only: bool,
    /// Taken in `started`, where the actor can attach it as a stream.
    reader: Option<FramedRead<OwnedReadHalf, FrameDecoder>>,
}

impl Connection {
    /// Splits the socket: the write half goes to an outbox writer task, the
    /// read half becomes this actor's input stream.
    pub fn start(id: ConnId, stream: UnixStream, hub: Hub, read_only: bool) -> Addr<Connection> {
        let (read, write) = stream.into_split();
        let (outbox, drain) = Outbox::new(write, hub.config.max_client_lag_bytes);
        actix::spawn(drain.run());
        let reader = FramedRead::new(read, FrameDecoder::new(hub.config.max_frame_bytes));
        Connection {
            id,
            outbox,
            hub,
            label: None,
            read_only,
            reader: Some(reader),
        }
        .start()
    }

    fn reply(&self, event: Event) {
        self.outbox.push_event(&event);
    }

    fn error(&self, code: ErrorCode, message: impl Into<String>, request_id: Option<String>) {
        self.reply(Event::error(code, message, request_id));
    }

    fn handle_request(&mut self, request: Request, ctx: &mut Context<Self>) {
        let Request { request_id, method } = request;
        if self.read_only && !method.is_read_only() {
            return self.error(
                ErrorCode::Forbidden,
                "this connection comes from a process the pod started (a tool or an MCP \
                 server): it may only read (hello, get_session, list_sessions, \
                 list_completions)",
                request_id,
            );
        }
        let client = Client {
            outbox: self.outbox.clone(),
            request_id: request_id.clone(),
        };
        let worker = &self.hub.worker;
        match method {
            Method::Run { segments } => worker.do_send(worker::Run { segments, client }),
            Method::Notify { message } => worker.do_send(worker::Notify { message, client }),
            Method::Cancel { run } => worker.do_send(worker::Control::Cancel(client, run)),
            Method::Hello { client: label } => {
                self.label = Some(label);
                client.ack();
            }
            Method::Approve {
                call_id,
                decision,
                scope,
                message,
            } => worker.do_send(worker::Approve {
                call_id,
                decision,
                scope: scope.unwrap_or_default(),
                message,
                label: self.label.clone(),
                client,
            }),
            Method::SetApproval { mode } => {
                worker.do_send(worker::Control::SetApproval(client, mode))
            }
            Method::SetModel { model } => worker.do_send(worker::Control::SetModel(client, model)),
            Method::Pause => worker.do_send(worker::Control::Pause(client)),
            Method::Resume => worker.do_send(worker::Control::Resume(client)),
            Method::Compact => worker.do_send(worker::Control::Compact(client)),
            Method::Shutdown => worker.do_send(worker::Control::Shutdown(client)),
            Method::ListCompletions { prefix, .. } => {
                let completions = self.hub.workspace.completions(&prefix, 200);
                self.reply(Event::Response(Response {
                    request_id,
                    completions: Some(completions),
                    ..Response::default()
                }));
            }
            Method::GetSession { session_id } => {
                let outbox = self.outbox.clone();
                self.hub
                    .session_log
                    .send(GetSession(session_id))
                    .into_actor(self)
                    .map(move |result, _, _| {
                        let frame = match result {
                            Ok(Ok((session_id, entries))) => super::frames::session_response(
                                request_id.as_deref(),
                                session_id,
                                &entries,
                            ),
                            Ok(Err(SessionLookupError::Lookup(e))) => {
                                Event::error(e.code(), e.to_string(), request_id).to_frame()
                            }
                            Ok(Err(e)) => {
                                Event::error(ErrorCode::StorageError, e.to_string(), request_id)
                                    .to_frame()
                            }
                            Err(e) => Event::error(
                                ErrorCode::ShuttingDown,
                                format!("the pod is stopping: {e}"),
                                request_id,
                            )
                            .to_frame(),
                        };
                        outbox.push(frame);
                    })
                    .spawn(ctx);
            }
            Method::ListSessions => {
                let outbox = self.outbox.clone();
                self.hub
                    .session_log
                    .send(ListSessions)
                    .into_actor(self)
                    .map(move |result, _, _| {
                        let event = match result {
                            Ok(Ok(sessions)) => Event::Response(Response {
                                request_id,
                                sessions: Some(sessions),
                                ..Response::default()
                            }),
                            Ok(Err(e)) => Event::error(ErrorCode::StorageError, e, request_id),
                            Err(e) => Event::error(
                                ErrorCode::ShuttingDown,
                                format!("the pod is stopping: {e}"),
                                request_id,
                            ),
                        };
                        outbox.push_event(&event);
                    })
                    .spawn(ctx);
            }
            _ => self.error(
                ErrorCode::UnknownMethod,
                "this pod does not implement that method yet",
                request_id,
            ),
        }
    }
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The snapshot must be the first frame: read nothing from the client
        // (whose answers could overtake it) until it is queued.
        let (registered, snapshot_queued) = tokio::sync::oneshot::channel();
        self.hub.session_log.do_send(Subscribe {
            id: self.id,
            outbox: self.outbox.clone(),
            registered,
        });
        let reader = self.reader.take();
        async move { snapshot_queued.await.is_ok() }
            .into_actor(self)
            .map(move |ok, _, ctx| match (ok, reader) {
                (true, Some(reader)) => {
                    ctx.add_stream(reader);
                }
                _ => ctx.stop(),
            })
            .wait(ctx);
        // Stop reading when the outbox closes (lag, shutdown, socket error).
        let outbox = self.outbox.clone();
        async move { outbox.closed().await }
            .into_actor(self)
            .map(|(), _, ctx| ctx.stop())
            .spawn(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.hub.broadcaster.do_send(Unregister(self.id));
        self.outbox.close();
    }
}

impl StreamHandler<Result<Inbound, std::io::Error>> for Connection {
    fn handle(&mut self, item: Result<Inbound, std::io::Error>, ctx: &mut Context<Self>) {
        match item {
            Ok(Inbound::Frame(line)) => match Request::parse(&line) {
                Ok(request) => self.handle_request(request, ctx),
                Err(e) => self.error(e.code, e.message, e.request_id),
            },
            Ok(Inbound::TooLong) => self.error(
                ErrorCode::FrameTooLarge,
                format!(
                    "frame longer than {} bytes was skipped",
                    self.hub.config.max_frame_bytes
                ),
                None,
            ),
            // The peer reset or the socket broke: nobody else hears of it.
            Err(_) => ctx.stop(),
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// One inbound frame, or the fact that one was too long and skipped.
pub enum Inbound {
    Frame(bytes::Bytes),
    TooLong,
}

/// Newline framing with a length limit that, unlike the codec it wraps,
/// reports an oversized frame as an item instead of an error (a
/// `FramedRead` ends its stream after any error) and leaves UTF-8 checking to
/// the protocol parser, which answers it with `bad_frame`.
pub struct FrameDecoder {
    inner: AnyDelimiterCodec,
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            inner: AnyDelimiterCodec::new_with_max_length(
                b"\n".to_vec(),
                Vec::new(),
                max_frame_bytes,
            ),
        }
    }
}

impl Decoder for FrameDecoder {
    type Item = Inbound;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut bytes::BytesMut) -> Result<Option<Inbound>, std::io::Error> {
        loop {
            return match self.inner.decode(src) {
                Ok(Some(frame)) if frame.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Some(frame)) => Ok(Some(Inbound::Frame(frame))),
                Ok(None) => Ok(None),
                Err(AnyDelimiterCodecError::MaxChunkLengthExceeded) => Ok(Some(Inbound::TooLong)),
                Err(AnyDelimiterCodecError::Io(e)) => Err(e),
            };
        }
    }

    fn decode_eof(&mut self, src: &mut bytes::BytesMut) -> Result<Option<Inbound>, std::io::Error> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            // A last frame without its newline: treat it as a frame.
            None => {
                let rest = src.split();
                Ok(Some(Inbound::Frame(rest.freeze())))
            }
        }
    }
}
