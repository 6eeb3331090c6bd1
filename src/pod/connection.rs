//! The `Connection` actor: one per attached client.
//!
//! It reads frames, turns each into a method for the right actor, and answers
//! what concerns this client alone (`response`, frame errors) through its own
//! outbox. It never writes to the socket itself: it hands the socket's write
//! half (for a remote client, its WebSocket's feed) to the broadcaster, and
//! its own frames go through the broadcaster's mailbox too (`outbox.rs`), so
//! they and the broadcasts share one ordered stream.
//! Nothing a client sends can end the connection or reach another client:
//! a bad frame gets an `error` here and is otherwise dropped.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{ready, Context as TaskContext, Poll};

use actix::prelude::*;
use bytes::BytesMut;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio_util::codec::{Decoder, FramedRead};

use super::access::Access;
use super::broadcaster::{Broadcaster, ConnId, Unregister};
use super::outbox::{Client, ClientSocket, Feed, Outbox, Sink};
use super::session_log::{
    GetEntries, GetSession, ListSessions, SessionLog, SessionLookupError, Subscribe, SwitchTo,
};
use super::worker;
use crate::input;
use crate::protocol::{answer, ErrorCode, Event, Method, Request, Response};
use crate::workspace::Workspace;

/// The refusal when the blob store could not be opened at start.
fn blobs_off() -> crate::blobs::BlobError {
    crate::blobs::BlobError::Io(std::io::Error::other(
        "the image store could not be opened when the pod started (see its log)",
    ))
}

/// How often a client that closed its write half is checked for having
/// hung up altogether.
const HANG_UP_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Limits a connection obeys.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_frame_bytes: usize,
    /// Bytes that may wait for a client before it is disconnected as lagged.
    pub max_client_lag_bytes: usize,
}

/// What every connection needs to reach the rest of the pod.
#[derive(Clone)]
pub struct Hub {
    pub session_log: Addr<SessionLog>,
    pub broadcaster: Addr<Broadcaster>,
    pub worker: Addr<worker::Worker>,
    pub workspace: Workspace,
    pub config: ConnectionLimits,
    pub checkpoints: crate::checkpoint::serve::Handle,
    /// The device tokens remote clients show (made by the token methods).
    pub tokens: std::sync::Arc<crate::store::device_tokens::Tokens>,
    /// Where the pod listens (`--listen`), for pairing links.
    pub listening: Option<super::listening::Listening>,
    /// The image store (`None`: it could not be opened; images are refused).
    pub blobs: Option<crate::blobs::Blobs>,
}

pub struct Connection {
    id: ConnId,
    outbox: Outbox,
    hub: Hub,
    /// The client's `hello` label, for `approval_decision.client`.
    label: Option<String>,
    /// What this client may do (`access.rs` decides `forbidden`).
    access: Access,
    /// Taken in `started`, where the actor can attach it as a stream.
    reader: Option<FramedRead<ReadHalf, FrameDecoder>>,
    /// Taken in `started`, where it goes to the broadcaster.
    socket: Option<ClientSocket>,
    /// The socket, to ask whether the client hung up.
    peer: OwnedFd,
    /// A tail snapshot was asked for (`GET /v1/ws?tail=N`).
    tail: Option<usize>,
}

impl Connection {
    /// Splits the socket in two descriptors: one the broadcaster writes to,
    /// on its own thread (see `outbox.rs`), and one this actor reads from.
    /// `stream` must be non-blocking (its duplicates share that mode).
    pub fn start(
        id: ConnId,
        stream: UnixStream,
        hub: Hub,
        access: Access,
    ) -> std::io::Result<Addr<Connection>> {
        let write = stream.try_clone()?;
        Self::begin(id, stream, Sink::Socket(write), hub, access, None)
    }

    /// A remote client: it reads from `stream` (the client's messages, which
    /// the bridge writes there), and its frames go to `feed`, which the
    /// WebSocket's response body drains (see `outbox/feed.rs`). `tail`: the
    /// snapshot carries only the last this many entries (`/v1/ws?tail=N`).
    pub fn start_remote(
        id: ConnId,
        stream: UnixStream,
        feed: std::sync::Arc<Feed>,
        hub: Hub,
        access: Access,
        tail: Option<usize>,
    ) -> std::io::Result<Addr<Connection>> {
        Self::begin(id, stream, Sink::WebSocket(feed), hub, access, tail)
    }

    fn begin(
        id: ConnId,
        stream: UnixStream,
        sink: Sink,
        hub: Hub,
        access: Access,
        tail: Option<usize>,
    ) -> std::io::Result<Addr<Connection>> {
        let peer = OwnedFd::from(stream.try_clone()?);
        let read = ReadHalf::new(stream)?;
        let (outbox, socket) = Outbox::new(
            id,
            sink,
            hub.config.max_client_lag_bytes,
            hub.broadcaster.clone().recipient(),
        );
        let reader = FramedRead::new(read, FrameDecoder::new(hub.config.max_frame_bytes));
        Ok(Connection {
            id,
            outbox,
            hub,
            label: None,
            access,
            reader: Some(reader),
            socket: Some(socket),
            peer,
            tail,
        }
        .start())
    }

    /// Whether the client has closed its end entirely (not just its write
    /// half): a zero-timeout `poll` for `POLLHUP`, which a Unix stream
    /// socket reports only once both directions are shut.
    fn peer_hung_up(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.peer, PollFlags::empty())];
        match poll(&mut fds, 0) {
            Ok(_) => fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR),
            Err(_) => false,
        }
    }

    fn reply(&self, event: Event) {
        self.outbox.push_event(&event);
    }

    fn error(&self, code: ErrorCode, message: impl Into<String>, request_id: Option<String>) {
        self.reply(Event::error(code, message, request_id));
    }

    fn handle_request(&mut self, request: Request, ctx: &mut Context<Self>) {
        let Request { request_id, method } = request;
        if let Err(why) = self.access.check(&method) {
            return self.error(ErrorCode::Forbidden, why, request_id);
        }
        let client = Client {
            outbox: self.outbox.clone(),
            request_id: request_id.clone(),
        };
        let worker = &self.hub.worker;
        match method {
            Method::Run { segments } => {
                // File refs are checked on the blocking pool; this client's
                // later frames wait for it, so its runs keep their order.
                let worker = worker.clone();
                input::check_async(&segments, &self.hub.workspace, self.hub.blobs.as_ref())
                    .into_actor(self)
                    .map(move |checked, _, _| match checked {
                        Ok(resolved) => worker.do_send(worker::Run {
                            segments,
                            resolved,
                            client,
                        }),
                        Err(e) => client.error(e.code, e.message),
                    })
                    .wait(ctx);
            }
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
                remote: self.access.remote,
                client,
            }),
            Method::ListRules => worker.do_send(worker::Control::ListRules(client)),
            Method::ListJobs => worker.do_send(worker::Control::ListJobs(client)),
            Method::ListAgents => worker.do_send(worker::Control::ListAgents(client)),
            Method::RemoveAgent { name } => {
                worker.do_send(worker::Control::RemoveAgent(client, name))
            }
            Method::KillJob { job } => worker.do_send(worker::Control::KillJob(client, job)),
            Method::GetJobOutput { job } => {
                worker.do_send(worker::Control::GetJobOutput(client, job))
            }
            Method::RevokeRule { rule } => worker.do_send(worker::Control::RevokeRule {
                client,
                rule,
                label: self.label.clone(),
                remote: self.access.remote,
            }),
            Method::SetApproval { mode } => {
                worker.do_send(worker::Control::SetApproval(client, mode))
            }
            Method::SetModel { model } => worker.do_send(worker::Control::SetModel(client, model)),
            Method::Pause => worker.do_send(worker::Control::Pause(client)),
            Method::Resume => worker.do_send(worker::Control::Resume(client)),
            Method::Compact => worker.do_send(worker::Control::Compact(client)),
            Method::Shutdown => worker.do_send(worker::Control::Shutdown(client)),
            Method::ListCompletions { .. } if self.access.sees_only_the_conversation() => {
                // A read-only link cannot send input to complete, and a
                // listing would show files the conversation never did.
                client.respond(answer::Completions { items: Vec::new() });
            }
            Method::ListCompletions { kind, prefix } => {
                // A directory walk: on the blocking pool, never on the
                // thread every client shares.
                let workspace = self.hub.workspace.clone();
                tokio::task::spawn_blocking(move || {
                    crate::completion::completions(&workspace, kind, &prefix, 200)
                })
                .into_actor(self)
                .map(move |items, _, _| {
                    client.respond(answer::Completions {
                        items: items.unwrap_or_default(),
                    });
                })
                .spawn(ctx);
            }
            Method::GetSession { session_id } => {
                let outbox = self.outbox.clone();
                self.hub
                    .session_log
                    .send(GetSession(session_id))
                    .into_actor(self)
                    .map(move |result, _, _| {
                        outbox.push(lines_answer(result, request_id));
                    })
                    .spawn(ctx);
            }
            Method::GetEntries {
                session_id,
                before_seq,
                limit,
            } => {
                let outbox = self.outbox.clone();
                self.hub
                    .session_log
                    .send(GetEntries {
                        session_id,
                        before_seq,
                        limit,
                    })
                    .into_actor(self)
                    .map(move |result, _, _| {
                        outbox.push(lines_answer(result, request_id));
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
                                ..answer::Sessions { sessions }.into()
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
            Method::Rewind {
                before_seq,
                session_id,
                checkpoint,
                files,
                conversation,
                force,
                kill_jobs,
                abort_on_conflict,
            } => worker.do_send(worker::Control::Rewind(
                client,
                worker::RewindRequest {
                    before_seq,
                    session_id,
                    checkpoint,
                    files: files.unwrap_or(true),
                    conversation,
                    force: force.unwrap_or(false),
                    kill_jobs: kill_jobs.unwrap_or(false),
                    abort_on_conflict: abort_on_conflict.unwrap_or(false),
                },
            )),
            Method::GetDiff {
                from,
                to,
                path,
                binary,
            } => {
                let checkpoints = self.hub.checkpoints.clone();
                if let Err(why) = self
                    .access
                    .check_read(path.as_deref(), to.is_none(), |p| checkpoints.shown(p))
                {
                    return client.error(ErrorCode::Forbidden, why);
                }
                // A walk of the workspace and reads of the store: on the
                // blocking pool.
                tokio::task::spawn_blocking(move || {
                    let binary = if binary {
                        crate::checkpoint::diff::Binary::Patch
                    } else {
                        crate::checkpoint::diff::Binary::Mention
                    };
                    checkpoints.get_diff(&from, to.as_deref(), path.as_deref(), binary)
                })
                .into_actor(self)
                .map(move |result, _, _| match result {
                    Ok(Ok((diff, files, truncated))) => client.respond(answer::Diff {
                        diff,
                        files,
                        truncated,
                    }),
                    Ok(Err(refusal)) => client.error(refusal.code, refusal.message),
                    Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
                })
                .spawn(ctx);
            }
            Method::GetFile { checkpoint, path } => {
                let checkpoints = self.hub.checkpoints.clone();
                if let Err(why) = self
                    .access
                    .check_read(Some(&path), false, |p| checkpoints.shown(p))
                {
                    return client.error(ErrorCode::Forbidden, why);
                }
                tokio::task::spawn_blocking(move || checkpoints.get_file(&checkpoint, &path))
                    .into_actor(self)
                    .map(move |result, _, _| match result {
                        Ok(Ok((bytes, kind))) => client.respond(answer::File {
                            content: base64::Engine::encode(
                                &base64::engine::general_purpose::STANDARD,
                                bytes,
                            ),
                            file_type: kind.into(),
                        }),
                        Ok(Err(refusal)) => client.error(refusal.code, refusal.message),
                        Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
                    })
                    .spawn(ctx);
            }
            Method::PutBlob { media_type, data } => {
                // Hashed and fsynced on the blocking pool; this client's
                // later frames wait, so a `run` naming the blob finds it.
                let blobs = self.hub.blobs.clone();
                tokio::task::spawn_blocking(move || {
                    blobs.ok_or_else(blobs_off)?.put_base64(&media_type, &data)
                })
                .into_actor(self)
                .map(move |result, _, _| match result {
                    Ok(Ok(info)) => client.respond(answer::BlobStored {
                        blob: info.digest.id(),
                        size: info.size,
                        media_type: info.media_type.into(),
                    }),
                    Ok(Err(e)) => client.error(e.code(), e.to_string()),
                    Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
                })
                .wait(ctx);
            }
            Method::GetBlob { blob } => {
                let blobs = self.hub.blobs.clone();
                tokio::task::spawn_blocking(move || {
                    let (info, bytes) = blobs.ok_or_else(blobs_off)?.get(&blob)?;
                    Ok::<_, crate::blobs::BlobError>((
                        info,
                        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes),
                    ))
                })
                .into_actor(self)
                .map(move |result, _, _| match result {
                    Ok(Ok((info, data))) => client.respond(answer::Blob {
                        blob: info.digest.id(),
                        media_type: info.media_type.into(),
                        data,
                    }),
                    Ok(Err(e)) => client.error(e.code(), e.to_string()),
                    Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
                })
                .spawn(ctx);
            }
            Method::NewSession => worker.do_send(worker::Control::Switch(client, SwitchTo::New)),
            Method::Fork { at_seq } => {
                worker.do_send(worker::Control::Switch(client, SwitchTo::Fork { at_seq }))
            }
            Method::ResumeSession { session_id } => worker.do_send(worker::Control::Switch(
                client,
                SwitchTo::Resume { session_id },
            )),
            Method::IssueToken { .. }
            | Method::IssuePairing { .. }
            | Method::ListTokens
            | Method::RevokeToken { .. } => self.token_method(method, client, ctx),
        }
    }

    /// The token methods (local and full connections only, checked above).
    /// The token file is written on the blocking pool.
    fn token_method(&mut self, method: Method, client: Client, ctx: &mut Context<Self>) {
        let tokens = self.hub.tokens.clone();
        let listening = self.hub.listening.clone();
        tokio::task::spawn_blocking(move || token_answer(&tokens, listening.as_ref(), method))
            .into_actor(self)
            .map(move |answer, _, _| match answer {
                Ok(Ok(response)) => client.respond(response),
                Ok(Err((code, message))) => client.error(code, message),
                Err(e) => client.error(ErrorCode::StorageError, e.to_string()),
            })
            .spawn(ctx);
    }
}

/// The frame answering `get_session` or `get_entries`: the lines spliced
/// into a `response`, or the error that kept them.
fn lines_answer(
    result: Result<Result<(uuid::Uuid, bytes::Bytes), SessionLookupError>, MailboxError>,
    request_id: Option<String>,
) -> bytes::Bytes {
    match result {
        Ok(Ok((session_id, entries))) => {
            super::frames::session_response(request_id.as_deref(), session_id, &entries)
        }
        Ok(Err(SessionLookupError::Lookup(e))) => {
            Event::error(e.code(), e.to_string(), request_id).to_frame()
        }
        Ok(Err(e)) => Event::error(ErrorCode::StorageError, e.to_string(), request_id).to_frame(),
        Err(e) => Event::error(
            ErrorCode::ShuttingDown,
            format!("the pod is stopping: {e}"),
            request_id,
        )
        .to_frame(),
    }
}

/// What a token method answers.
fn token_answer(
    tokens: &crate::store::device_tokens::Tokens,
    listening: Option<&super::listening::Listening>,
    method: Method,
) -> Result<Response, (ErrorCode, String)> {
    let storage = |e: std::io::Error| {
        (
            ErrorCode::StorageError,
            format!("cannot write the token file: {e}"),
        )
    };
    Ok(match method {
        Method::IssueToken { read_only, label } => {
            let issued = tokens.issue(read_only, label).map_err(storage)?;
            answer::Token {
                token: issued.token,
                id: issued.info.id,
                scope: issued.info.scope,
            }
            .into()
        }
        Method::IssuePairing { read_only, host } => {
            let Some(listening) = listening else {
                return Err((
                    ErrorCode::NotListening,
                    "this pod does not listen on the network; start it with `pod serve \
                     --listen ADDR`"
                        .into(),
                ));
            };
            let code = tokens.issue_pairing(read_only);
            let url = listening
                .pairing_url(host.as_deref(), &code)
                .map_err(|why| (ErrorCode::InvalidParams, why))?;
            answer::Pairing { url }.into()
        }
        Method::ListTokens => answer::Tokens {
            tokens: tokens.list(),
        }
        .into(),
        Method::RevokeToken { id } => {
            if !tokens.revoke(&id).map_err(storage)? {
                return Err((
                    ErrorCode::NotFound,
                    format!("no device token has the id {id:?}"),
                ));
            }
            answer::Ack.into()
        }
        _ => Response::default(),
    })
}

impl Actor for Connection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // The snapshot must be the first frame: read nothing from the client
        // (whose answers could overtake it) until it is queued.
        let (registered, snapshot_queued) = tokio::sync::oneshot::channel();
        if let Some(socket) = self.socket.take() {
            self.hub.session_log.do_send(Subscribe {
                id: self.id,
                access: (self.access.level, self.access.reason),
                socket,
                tail: self.tail,
                registered,
            });
        }
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
        // Stop reading when the outbox closes (lag, shutdown, socket error)
        // — after a moment, so frames the client sent before it hung up
        // (a last `cancel`, say) are still read and carried out.
        let outbox = self.outbox.clone();
        async move { outbox.closed().await }
            .into_actor(self)
            .map(|(), _, ctx| {
                ctx.run_later(LAST_FRAMES_GRACE, |_, ctx| ctx.stop());
            })
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
                    "frame longer than {} bytes (the pod's --max-frame-bytes) was skipped",
                    self.hub.config.max_frame_bytes
                ),
                None,
            ),
            // The peer reset or the socket broke: nobody else hears of it.
            Err(_) => ctx.stop(),
        }
    }

    /// The client closed its write half. It may still be reading (`printf
    /// … | socat` does exactly this): it gets everything — responses, the
    /// turns it started — until it hangs up. The outbox closing (a failed
    /// write, lag, shutdown) stops the actor as before; a client that hangs
    /// up while nothing is being sent to it is noticed by polling.
    fn finished(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(HANG_UP_POLL, |this, ctx| {
            if this.peer_hung_up() {
                ctx.stop();
            }
        });
    }
}

/// How long a connection whose writes failed goes on reading what its
/// client had already sent.
const LAST_FRAMES_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// One inbound frame, or the fact that one was too long and skipped.
pub enum Inbound {
    Frame(bytes::Bytes),
    TooLong,
}

/// Newline framing with a length limit. An oversized frame is reported as
/// an item, not an error (a `FramedRead` ends its stream after any error),
/// and the rest of it up to its newline is skipped; UTF-8 checking is left
/// to the protocol parser, which answers it with `bad_frame`. A last frame
/// without its newline before EOF is a frame like any other.
///
/// Written here rather than wrapping `AnyDelimiterCodec`: that codec keeps
/// a scan offset into the buffer, so taking the unterminated tail out of the
/// buffer at EOF left it pointing past the end, and the next call panicked.
/// Here the only state is a count of bytes already scanned (reset whenever
/// the buffer is cut) and whether a too-long frame is being skipped.
pub struct FrameDecoder {
    max_frame_bytes: usize,
    /// Bytes at the start of the buffer already searched for a newline.
    scanned: usize,
    /// Skipping the rest of a frame that was already reported too long.
    skipping: bool,
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            max_frame_bytes,
            scanned: 0,
            skipping: false,
        }
    }

    /// A complete frame's bytes (without the newline) as an item; `None`
    /// for a blank line, which is ignored.
    fn frame(&self, bytes: BytesMut) -> Option<Inbound> {
        if bytes.len() > self.max_frame_bytes {
            return Some(Inbound::TooLong);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        Some(Inbound::Frame(bytes.freeze()))
    }
}

impl Decoder for FrameDecoder {
    type Item = Inbound;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, std::io::Error> {
        loop {
            let newline = src[self.scanned..]
                .iter()
                .position(|&b| b == b'\n')
                .map(|i| self.scanned + i);
            let Some(end) = newline else {
                if self.skipping {
                    src.clear();
                    self.scanned = 0;
                    return Ok(None);
                }
                if src.len() > self.max_frame_bytes {
                    src.clear();
                    self.scanned = 0;
                    self.skipping = true;
                    return Ok(Some(Inbound::TooLong));
                }
                self.scanned = src.len();
                return Ok(None);
            };
            let mut line = src.split_to(end + 1);
            line.truncate(end);
            self.scanned = 0;
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            if let Some(item) = self.frame(line) {
                return Ok(Some(item));
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Inbound>, std::io::Error> {
        loop {
            if let Some(item) = self.decode(src)? {
                return Ok(Some(item));
            }
            if src.is_empty() {
                return Ok(None);
            }
            // A last frame without its newline.
            let rest = src.split();
            self.scanned = 0;
            if let Some(item) = self.frame(rest) {
                return Ok(Some(item));
            }
        }
    }
}

/// The read half of a client's socket, registered with the event loop for
/// readability alone. A `tokio::net::UnixStream` registers for writability
/// too, and the kernel reports a socket writable each time its client reads
/// what the pod wrote: with hundreds of clients following a stream, that
/// is hundreds of wake-ups per delta for nothing. (The write half joins the
/// loop only while a write waits, see `outbox.rs`.)
pub struct ReadHalf(AsyncFd<UnixStream>);

impl ReadHalf {
    fn new(socket: UnixStream) -> std::io::Result<ReadHalf> {
        // SAFETY: the `AsyncFd` owns the socket until it is dropped, so its
        // descriptor stays open and refers to the same socket all along.
        let fd = unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE)? };
        Ok(ReadHalf(fd))
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|socket| {
                let mut socket: &UnixStream = socket.get_ref();
                socket.read(unfilled)
            }) {
                Ok(Ok(len)) => {
                    buf.advance(len);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: wait for the next edge.
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(decoder: &mut FrameDecoder, buf: &mut BytesMut, eof: bool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let item = if eof {
                decoder.decode_eof(buf)
            } else {
                decoder.decode(buf)
            };
            match item.unwrap() {
                Some(Inbound::Frame(f)) => out.push(String::from_utf8_lossy(&f).into_owned()),
                Some(Inbound::TooLong) => out.push("<too long>".into()),
                None => return out,
            }
        }
    }

    #[test]
    fn a_last_frame_without_newline_is_decoded_once_at_eof() {
        let mut decoder = FrameDecoder::new(100);
        let mut buf = BytesMut::from(&b"{\"a\":1}\n\n  \n{\"b\":2}"[..]);
        assert_eq!(frames(&mut decoder, &mut buf, false), ["{\"a\":1}"]);
        assert_eq!(frames(&mut decoder, &mut buf, true), ["{\"b\":2}"]);
        assert_eq!(frames(&mut decoder, &mut buf, true), Vec::<String>::new());
    }

    #[test]
    fn a_too_long_frame_is_reported_once_and_skipped_to_its_newline() {
        let mut decoder = FrameDecoder::new(10);
        let mut buf = BytesMut::from(&b"0123456789abc"[..]);
        assert_eq!(frames(&mut decoder, &mut buf, false), ["<too long>"]);
        buf.extend_from_slice(b"def\nok\n0123456789abcdef\nfine");
        assert_eq!(frames(&mut decoder, &mut buf, false), ["ok", "<too long>"]);
        assert_eq!(frames(&mut decoder, &mut buf, true), ["fine"]);
    }

    #[test]
    fn frames_split_across_reads_are_joined() {
        let mut decoder = FrameDecoder::new(100);
        let mut buf = BytesMut::from(&b"{\"a\""[..]);
        assert!(frames(&mut decoder, &mut buf, false).is_empty());
        buf.extend_from_slice(b":1}\n");
        assert_eq!(frames(&mut decoder, &mut buf, false), ["{\"a\":1}"]);
    }
}
