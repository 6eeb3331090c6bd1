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

use std::path::PathBuf;

use actix::prelude::*;
use bytes::Bytes;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::broadcaster::{Broadcaster, ConnId, Published, Register};
use super::fault::Faults;
use super::frames;
use super::outbox::ClientSocket;
use crate::protocol::LogEntry;
use crate::store::{log_file, pointer, sessions, LogFile};

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
    /// The connection's write half, for the broadcaster.
    pub socket: ClientSocket,
    /// Fired once the snapshot is queued on the outbox.
    pub registered: oneshot::Sender<()>,
}

impl Handler<Subscribe> for SessionLog {
    type Result = ();

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) {
        self.broadcaster.do_send(Register {
            id: msg.id,
            socket: msg.socket,
            session_id: self.session_id,
            entries: self.mirror.clone(),
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

/// Start a new session (compaction): write its first entries durably, move
/// the pod pointer to it, switch, and publish `compact_done` followed by the
/// new entries. Until the pointer moves, a crash leaves the old session
/// current; after, the new one is complete.
#[derive(Message)]
#[rtype(result = "Result<NewSession, StorageError>")]
pub struct StartSession {
    pub compacted_from: Uuid,
    pub first_entries: Vec<LogEntry>,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

pub struct NewSession {
    pub session_id: Uuid,
    /// The new session's entries, starting with `session_start`.
    pub entries: Vec<LogEntry>,
}

impl Handler<StartSession> for SessionLog {
    type Result = Result<NewSession, StorageError>;

    fn handle(&mut self, msg: StartSession, _: &mut Context<Self>) -> Self::Result {
        self.faults.compaction_step("summarised");
        // Anything still pending belongs to the old session: settle it first.
        self.flush();
        let session_id = Uuid::new_v4();
        let mut entries = vec![LogEntry::SessionStart {
            session_id,
            created_at: LogEntry::now(),
            compacted_from: Some(msg.compacted_from),
            forked_from: None,
            provider: None,
            model: None,
        }];
        entries.extend(msg.first_entries);
        let path = LogFile::path_for(&self.dirs.sessions, session_id);
        let failed = |at: &std::path::Path, e: &dyn std::fmt::Display| StorageError {
            path: at.display().to_string(),
            message: e.to_string(),
        };
        let mut file = LogFile::create(&path).map_err(|e| failed(&path, &e))?;
        let mut lines = Vec::with_capacity(entries.len());
        for (seq, entry) in entries.iter().enumerate() {
            let mut line = serde_json::to_vec(&LineRef {
                seq: seq as u64,
                entry,
            })
            .map_err(|e| failed(&path, &e))?;
            file.write_line(&mut line).map_err(|e| failed(&path, &e))?;
            lines.push(Bytes::from(line));
            self.faults.compaction_step("new_session_partial");
        }
        file.sync().map_err(|e| failed(&path, &e))?;
        self.faults.compaction_step("new_session_written");
        if let Err(e) = pointer::write(&self.dirs.pointer, pointer::Pointer { session_id }) {
            // The rename may have happened before the error (a failed
            // directory sync): point back at the session that goes on, so
            // a restart cannot resume the one just abandoned.
            let back = pointer::Pointer {
                session_id: self.session_id,
            };
            if let Err(e) = pointer::write(&self.dirs.pointer, back) {
                tracing::error!("{}", failed(&self.dirs.pointer, &e));
            }
            return Err(failed(&self.dirs.pointer, &e));
        }
        self.faults.compaction_step("pointer_moved");

        self.file = file;
        self.synced_len = self.file.len();
        self.session_id = session_id;
        self.mirror = lines.clone();
        self.broadcaster.do_send(Published::SessionSwitched {
            new_session_id: session_id,
            tokens_before: msg.tokens_before,
            tokens_after: msg.tokens_after,
        });
        for line in lines {
            self.broadcaster
                .do_send(Published::Entry { session_id, line });
        }
        Ok(NewSession {
            session_id,
            entries,
        })
    }
}
