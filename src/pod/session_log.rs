//! The `SessionLog` actor: the only writer of the session log, the owner of
//! its in-memory mirror, and the gate every entry passes to reach a client.
//!
//! For each entry, in this order and inside this actor only:
//! 1. write the line and `fdatasync` it;
//! 2. push its bytes onto the mirror;
//! 3. publish it to the broadcaster.
//!
//! If step 1 fails the entry is neither mirrored nor published and the error
//! goes back to the sender. Appends that arrive while a sync is due are
//! written one after another and made durable by a single `fdatasync` (group
//! commit): the handler writes the line and schedules a [`Flush`]; actix runs
//! scheduled items only after draining the mailbox, so every append already
//! queued joins the same sync. Nobody is answered, and nothing is published,
//! before that sync returns.
//!
//! The actor runs on its own arbiter (thread), so a slow disk stalls
//! commits — as it must — but never the sockets.
//!
//! It also switches the current session ([`Switch`], in `switch.rs`) and
//! lists the sessions ([`ListSessions`], on a blocking thread).

pub mod switch;

pub use switch::{Switch, SwitchTo};

use std::path::PathBuf;

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::broadcaster::{Broadcaster, ConnId, Published, Register};
use super::fault::Faults;
use super::frames;
use super::outbox::ClientSocket;
use crate::protocol::{LogEntry, SessionInfo};
use crate::store::{index, log_file, sessions, LogFile};

/// A durable write failed. The entry was not published.
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not write the session log {path}: {message}")]
pub struct StorageError {
    pub path: String,
    pub message: String,
}

pub struct SessionLog {
    file: LogFile,
    session_id: Uuid,
    /// Every durable line of the current session, as written.
    mirror: Vec<Bytes>,
    /// Lines written but not yet synced, with whoever waits for them.
    pending: Vec<PendingLine>,
    /// File length when `pending` was empty: where to cut back if a sync fails.
    synced_len: u64,
    flush_scheduled: bool,
    broadcaster: Addr<Broadcaster>,
    dirs: Dirs,
    faults: Faults,
}

struct PendingLine {
    line: Bytes,
    reply: oneshot::Sender<Result<u64, StorageError>>,
}

/// Where sessions and the pod pointer live.
#[derive(Clone, Debug)]
pub struct Dirs {
    pub sessions: PathBuf,
    pub pointer: PathBuf,
    /// The pod's workspace: recorded in every `session_start` and in the
    /// pointer.
    pub workspace: PathBuf,
    /// A child pod's parent: every session it switches to keeps it (in
    /// `session_start.parent` and the pointer), so a compacted child is
    /// still its parent's.
    pub parent: Option<crate::protocol::ParentRef>,
}

impl SessionLog {
    pub fn new(
        file: LogFile,
        session_id: Uuid,
        mirror: Vec<Bytes>,
        broadcaster: Addr<Broadcaster>,
        dirs: Dirs,
        faults: Faults,
    ) -> Self {
        let synced_len = file.len();
        Self {
            file,
            session_id,
            mirror,
            pending: Vec::new(),
            synced_len,
            flush_scheduled: false,
            broadcaster,
            dirs,
            faults,
        }
    }

    fn next_seq(&self) -> u64 {
        (self.mirror.len() + self.pending.len()) as u64
    }

    fn storage_error(&self, e: impl std::fmt::Display) -> StorageError {
        StorageError {
            path: self.file.path().display().to_string(),
            message: e.to_string(),
        }
    }

    /// Write one line (not yet durable).
    fn write(&mut self, entry: &LogEntry) -> Result<Bytes, StorageError> {
        let seq = self.next_seq();
        let mut line =
            serde_json::to_vec(&LineRef { seq, entry }).map_err(|e| self.storage_error(e))?;
        self.faults
            .before_write()
            .and_then(|()| self.file.write_line(&mut line))
            .map_err(|e| self.storage_error(e))?;
        Ok(Bytes::from(line))
    }

    /// Sync everything pending, then mirror and publish it in order.
    fn flush(&mut self) {
        self.flush_scheduled = false;
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        match self.file.sync() {
            Ok(()) => {
                self.synced_len = self.file.len();
                for p in pending {
                    let seq = self.mirror.len() as u64;
                    self.mirror.push(p.line.clone());
                    self.broadcaster.do_send(Published::Entry {
                        session_id: self.session_id,
                        line: p.line,
                    });
                    let _ = p.reply.send(Ok(seq));
                }
            }
            Err(e) => {
                // The lines were never acknowledged: cut them so a restart
                // cannot resurrect entries no client was ever shown.
                let err = self.storage_error(e);
                if let Err(cut) = self.file.truncate_to(self.synced_len) {
                    tracing::error!("{}", self.storage_error(cut));
                }
                for p in pending {
                    let _ = p.reply.send(Err(err.clone()));
                }
            }
        }
    }
}

impl Actor for SessionLog {
    type Context = Context<Self>;
}

/// A log line serialised from a borrowed entry (a `LogLine` would need
/// the entry cloned just to be written).
#[derive(serde::Serialize)]
struct LineRef<'a> {
    seq: u64,
    entry: &'a LogEntry,
}

/// Appends one entry durably: resolves with its `seq` once it is on disk,
/// mirrored and published, or with the error that kept it off the disk.
pub async fn append(log: &Addr<SessionLog>, entry: LogEntry) -> Result<u64, StorageError> {
    let gone = |e: &dyn std::fmt::Display| StorageError {
        path: String::new(),
        message: format!("the session log stopped: {e}"),
    };
    match log.send(Append(entry)).await {
        Ok(durable) => durable.await.unwrap_or_else(|e| Err(gone(&e))),
        Err(e) => Err(gone(&e)),
    }
}

/// Append one entry. Answered at once with a receiver that resolves when the
/// entry is durable: the sync that covers it answers the sender directly,
/// with no task in between (see [`append`]).
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<u64, StorageError>>")]
pub struct Append(pub LogEntry);

impl Handler<Append> for SessionLog {
    type Result = MessageResult<Append>;

    fn handle(&mut self, msg: Append, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        match self.write(&msg.0) {
            Ok(line) => {
                self.pending.push(PendingLine { line, reply: tx });
                if !self.flush_scheduled {
                    self.flush_scheduled = true;
                    ctx.notify(Flush);
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
        MessageResult(rx)
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Flush;

impl Handler<Flush> for SessionLog {
    type Result = ();

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {
        self.flush();
    }
}

/// Attach a connection: its snapshot is the mirror as of this message, and it
/// is registered with the broadcaster for every entry published after.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Subscribe {
    pub id: ConnId,
    /// What the connection may do, for its snapshot's greeting.
    pub access: super::broadcaster::GreetingAccess,
    /// The connection's write half, for the broadcaster.
    pub socket: ClientSocket,
    /// A tail snapshot: only the last this many entries (`None`: all).
    pub tail: Option<usize>,
    /// Fired once the snapshot is queued on the outbox.
    pub registered: oneshot::Sender<()>,
}

impl Handler<Subscribe> for SessionLog {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        // A tail costs its own lines only: the older ones are not touched.
        let (first_seq, lines) = frames::tail_of(&self.mirror, msg.tail);
        self.broadcaster.do_send(Register {
            id: msg.id,
            access: msg.access,
            socket: msg.socket,
            session_id: self.session_id,
            tail: msg.tail,
            first_seq,
            entries: lines.to_vec(),
            registered: msg.registered,
        });
    }
}

/// The lines of a session, named by id or unique prefix: the current one
/// from the mirror, an earlier one from its file. Answers the full id and
/// the encoded `entries` array.
#[derive(Message)]
#[rtype(result = "Result<(Uuid, Bytes), SessionLookupError>")]
pub struct GetSession(pub String);

#[derive(Debug, thiserror::Error)]
pub enum SessionLookupError {
    #[error(transparent)]
    Lookup(#[from] sessions::LookupError),
    #[error("{0}")]
    Unreadable(String),
}

impl Handler<GetSession> for SessionLog {
    type Result = Result<(Uuid, Bytes), SessionLookupError>;

    fn handle(&mut self, msg: GetSession, _: &mut Context<Self>) -> Self::Result {
        if msg.0 == self.session_id.to_string() {
            return Ok((self.session_id, frames::entries_array(&self.mirror)));
        }
        let id = sessions::resolve(&self.dirs.sessions, &msg.0)?;
        if id == self.session_id {
            return Ok((id, frames::entries_array(&self.mirror)));
        }
        let path = LogFile::path_for(&self.dirs.sessions, id);
        log_file::read_lines(&path)
            .map(|r| (id, frames::entries_array(&r.lines)))
            .map_err(|e| SessionLookupError::Unreadable(e.to_string()))
    }
}

/// Some lines of a session (`get_entries`): the `limit` just before
/// `before_seq`, as an encoded `entries` array, with the session's full id.
/// The current session's come from the mirror, an earlier one's from its
/// file.
#[derive(Message)]
#[rtype(result = "Result<(Uuid, Bytes), SessionLookupError>")]
pub struct GetEntries {
    pub session_id: String,
    pub before_seq: u64,
    pub limit: u64,
}

impl Handler<GetEntries> for SessionLog {
    type Result = Result<(Uuid, Bytes), SessionLookupError>;

    fn handle(&mut self, msg: GetEntries, _: &mut Context<Self>) -> Self::Result {
        let page = |lines: &[Bytes]| {
            frames::entries_array(frames::lines_before(lines, msg.before_seq, msg.limit))
        };
        let id = if msg.session_id == self.session_id.to_string() {
            self.session_id
        } else {
            sessions::resolve(&self.dirs.sessions, &msg.session_id)?
        };
        if id == self.session_id {
            return Ok((id, page(&self.mirror)));
        }
        let path = LogFile::path_for(&self.dirs.sessions, id);
        log_file::read_lines(&path)
            .map(|r| (id, page(&r.lines)))
            .map_err(|e| SessionLookupError::Unreadable(e.to_string()))
    }
}

/// Every session of the data directory, newest first, the current one
/// marked (see `store::index`). The listing reads files, so it runs on a
/// blocking thread and commits go on meanwhile.
#[derive(Message)]
#[rtype(result = "Result<Vec<SessionInfo>, String>")]
pub struct ListSessions;

impl Handler<ListSessions> for SessionLog {
    type Result = ResponseFuture<Result<Vec<SessionInfo>, String>>;

    fn handle(&mut self, _: ListSessions, _: &mut Context<Self>) -> Self::Result {
        let dir = self.dirs.sessions.clone();
        let current = self.session_id;
        Box::pin(async move {
            let listed = tokio::task::spawn_blocking(move || {
                index::list(&dir, Some(current))
                    .map_err(|e| format!("cannot list the sessions in {}: {e}", dir.display()))
            });
            listed
                .await
                .map_err(|e| format!("the session listing failed: {e}"))?
        })
    }
}
