//! Switching the pod's current session: compaction, `new_session`, `fork`,
//! `resume_session` — one path for all four.
//!
//! The order is what makes a crash at any instant recoverable:
//! 1. the new log is written and synced, its directory entry too (or, to
//!    resume, the existing log is opened and `flock`ed);
//! 2. the pod pointer is atomically replaced (temporary file, fsync,
//!    rename, fsync of the directory);
//! 3. the actor takes the new file and mirror (dropping the old file, which
//!    releases its lock) and announces the switch.
//!
//! A crash before 2 leaves the old session current and complete; after it,
//! the new one. No old log is ever written to: a fork copies the lines it
//! keeps into a log of its own.

use actix::prelude::*;
use bytes::Bytes;
use uuid::Uuid;

use super::{LineRef, SessionLog};
use crate::pod::broadcaster::Published;
use crate::protocol::{ErrorCode, ForkPoint, LogEntry, LogLine, SwitchReason};
use crate::store::{pointer, sessions, LogError, LogFile};

/// Make another session current. Answered once the switch is durable and
/// announced; on an error nothing changed and nothing was announced.
#[derive(Message)]
#[rtype(result = "Result<NewSession, SwitchError>")]
pub struct Switch {
    pub to: SwitchTo,
    /// Recorded in a new session's `session_start` (unused by `Resume`).
    pub provider: String,
    pub model: String,
}

pub enum SwitchTo {
    /// A new session starting with `first_entries` (the summary), with
    /// `compacted_from` = the current one. Announced as `compact_done`
    /// followed by the new entries.
    Compacted {
        first_entries: Vec<LogEntry>,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// An empty session. Announced, like the two below, as
    /// `session_switched` followed by a `snapshot`.
    New,
    /// A copy of the current session up to `at_seq` (default: the last
    /// entry), which must be a `turn_end` or the last entry.
    Fork { at_seq: Option<u64> },
    /// A `rewind` of the conversation: a copy of the current session up to
    /// `at_seq` (any entry: the one just before a user message), followed
    /// by `then` (the rewind's checkpoint and entry), all durable before the
    /// switch is announced with reason `rewind`.
    Rewind { at_seq: u64, then: Vec<LogEntry> },
    /// An earlier session, by full id or unique prefix. Resuming the current
    /// session is `invalid_params`: nothing would happen, and a client
    /// waiting for `session_switched` should hear so.
    Resume { session_id: String },
}

/// The session that is now current.
pub struct NewSession {
    pub session_id: Uuid,
    /// Its entries, starting with `session_start`.
    pub entries: Vec<LogEntry>,
}

/// Why a switch did not happen; `code` is what the client is told.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SwitchError {
    pub code: ErrorCode,
    pub message: String,
}

impl SwitchError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn storage(at: &std::path::Path, e: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::StorageError, format!("{}: {e}", at.display()))
    }
}

/// The session being switched to, ready to become current.
struct Target {
    session_id: Uuid,
    file: LogFile,
    lines: Vec<Bytes>,
    entries: Vec<LogEntry>,
}

/// How the switch is announced.
enum Announce {
    Compacted {
        tokens_before: u64,
        tokens_after: u64,
    },
    Switched(SwitchReason),
}

impl Handler<Switch> for SessionLog {
    type Result = Result<NewSession, SwitchError>;

    fn handle(&mut self, msg: Switch, _: &mut Context<Self>) -> Self::Result {
        let Switch {
            to,
            provider,
            model,
        } = msg;
        if matches!(to, SwitchTo::Compacted { .. }) {
            self.faults.switch_step("summarised");
        }
        // Anything still pending belongs to the old session: settle it first.
        self.flush();
        let start = |session_id, compacted_from, forked_from| LogEntry::SessionStart {
            session_id,
            created_at: LogEntry::now(),
            compacted_from,
            forked_from,
            provider: Some(provider.clone()),
            model: Some(model.clone()),
            workspace: Some(self.dirs.workspace.display().to_string()),
            parent: self.dirs.parent.clone(),
        };
        let (target, announce) = match to {
            SwitchTo::Compacted {
                first_entries,
                tokens_before,
                tokens_after,
            } => {
                let id = Uuid::new_v4();
                let mut fresh = vec![start(id, Some(self.session_id), None)];
                fresh.extend(first_entries);
                (
                    self.create(id, fresh, &[])?,
                    Announce::Compacted {
                        tokens_before,
                        tokens_after,
                    },
                )
            }
            SwitchTo::New => {
                let id = Uuid::new_v4();
                let fresh = vec![start(id, None, None)];
                (
                    self.create(id, fresh, &[])?,
                    Announce::Switched(SwitchReason::New),
                )
            }
            SwitchTo::Fork { at_seq } => {
                let at = self.fork_point(at_seq)?;
                let id = Uuid::new_v4();
                let forked_from = ForkPoint {
                    session_id: self.session_id,
                    seq: Some(at),
                };
                let fresh = vec![start(id, self.compacted_from(), Some(forked_from))];
                let copies = self.mirror[1..=at as usize].to_vec();
                (
                    self.create(id, fresh, &copies)?,
                    Announce::Switched(SwitchReason::Fork),
                )
            }
            SwitchTo::Rewind { at_seq, then } => {
                let last = self.mirror.len().saturating_sub(1) as u64;
                if at_seq > last {
                    return Err(SwitchError::new(
                        ErrorCode::InvalidParams,
                        format!("seq {at_seq} is past the last entry of the session ({last})"),
                    ));
                }
                let id = Uuid::new_v4();
                let forked_from = ForkPoint {
                    session_id: self.session_id,
                    seq: Some(at_seq),
                };
                let fresh = vec![start(id, self.compacted_from(), Some(forked_from))];
                let copies = self.mirror[1..=at_seq as usize].to_vec();
                (
                    self.create_with(id, fresh, &copies, then)?,
                    Announce::Switched(SwitchReason::Rewind),
                )
            }
            SwitchTo::Resume { session_id } => (
                self.open_existing(&session_id)?,
                Announce::Switched(SwitchReason::Resume),
            ),
        };
        self.faults.switch_step("new_session_written");
        self.move_pointer(target.session_id)?;
        self.faults.switch_step("pointer_moved");

        let Target {
            session_id,
            file,
            lines,
            entries,
        } = target;
        // The old file is dropped here, which releases its lock.
        self.file = file;
        self.synced_len = self.file.len();
        self.session_id = session_id;
        self.mirror = lines;
        match announce {
            Announce::Compacted {
                tokens_before,
                tokens_after,
            } => {
                self.broadcaster.do_send(Published::Compacted {
                    new_session_id: session_id,
                    tokens_before,
                    tokens_after,
                });
                for line in &self.mirror {
                    self.broadcaster.do_send(Published::Entry {
                        session_id,
                        line: line.clone(),
                    });
                }
            }
            Announce::Switched(reason) => self.broadcaster.do_send(Published::SessionSwitched {
                new_session_id: session_id,
                reason,
                entries: self.mirror.clone(),
            }),
        }
        Ok(NewSession {
            session_id,
            entries,
        })
    }
}

impl SessionLog {
    /// Writes a new log durably: `fresh` entries serialised from seq 0, then
    /// `copies`, lines of the current session kept byte for byte (their seq
    /// must follow on, which a fork's do: it keeps 1..=at after its own
    /// `session_start`).
    fn create(
        &self,
        session_id: Uuid,
        fresh: Vec<LogEntry>,
        copies: &[Bytes],
    ) -> Result<Target, SwitchError> {
        self.create_with(session_id, fresh, copies, Vec::new())
    }

    /// [`SessionLog::create`], with `then` entries after the copies.
    fn create_with(
        &self,
        session_id: Uuid,
        fresh: Vec<LogEntry>,
        copies: &[Bytes],
        then: Vec<LogEntry>,
    ) -> Result<Target, SwitchError> {
        let path = LogFile::path_for(&self.dirs.sessions, session_id);
        let failed = |e: &dyn std::fmt::Display| SwitchError::storage(&path, e);
        // `create` syncs the directory, so the file's name is durable too.
        let mut file = LogFile::create(&path).map_err(|e| failed(&e))?;
        let mut lines = Vec::with_capacity(fresh.len() + copies.len());
        for (seq, entry) in fresh.iter().enumerate() {
            let line = serde_json::to_vec(&LineRef {
                seq: seq as u64,
                entry,
            })
            .map_err(|e| failed(&e))?;
            lines.push(line);
        }
        lines.extend(copies.iter().map(|line| line.to_vec()));
        let first_then = (fresh.len() + copies.len()) as u64;
        for (i, entry) in then.iter().enumerate() {
            let line = serde_json::to_vec(&LineRef {
                seq: first_then + i as u64,
                entry,
            })
            .map_err(|e| failed(&e))?;
            lines.push(line);
        }
        let mut written = Vec::with_capacity(lines.len());
        for mut line in lines {
            file.write_line(&mut line).map_err(|e| failed(&e))?;
            written.push(Bytes::from(line));
            self.faults.switch_step("new_session_partial");
        }
        file.sync().map_err(|e| failed(&e))?;
        let mut entries = fresh;
        for line in copies {
            let line: LogLine = serde_json::from_slice(line).map_err(|e| failed(&e))?;
            entries.push(line.entry);
        }
        entries.extend(then);
        Ok(Target {
            session_id,
            file,
            lines: written,
            entries,
        })
    }

    /// Opens and locks an earlier session's log, as startup does.
    fn open_existing(&self, query: &str) -> Result<Target, SwitchError> {
        let session_id = sessions::resolve(&self.dirs.sessions, query)
            .map_err(|e| SwitchError::new(e.code(), e.to_string()))?;
        if session_id == self.session_id {
            return Err(SwitchError::new(
                ErrorCode::InvalidParams,
                format!("session {session_id} is already the current session"),
            ));
        }
        let path = LogFile::path_for(&self.dirs.sessions, session_id);
        let (file, recovered) = LogFile::open(&path).map_err(|e| match e {
            LogError::Locked { .. } => SwitchError::new(
                ErrorCode::SessionLocked,
                format!(
                    "session {session_id} is being written by another pod (its log {} is \
                     locked); stop that pod, or fork the session there",
                    path.display()
                ),
            ),
            LogError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                SwitchError::new(
                    ErrorCode::SessionNotFound,
                    format!("session {session_id} has no log at {}", path.display()),
                )
            }
            e => SwitchError::new(ErrorCode::StorageError, e.to_string()),
        })?;
        if recovered.entries.is_empty() {
            return Err(SwitchError::new(
                ErrorCode::SessionNotFound,
                format!("{} is empty: its session never started", path.display()),
            ));
        }
        if let Some(warning) = &recovered.truncated_tail {
            tracing::warn!("{warning}");
        }
        Ok(Target {
            session_id,
            file,
            lines: recovered.lines,
            entries: recovered.entries,
        })
    }

    /// Where a fork ends: `at_seq`, or the last entry.
    fn fork_point(&self, at_seq: Option<u64>) -> Result<u64, SwitchError> {
        let last = self.mirror.len().saturating_sub(1) as u64;
        let at = at_seq.unwrap_or(last);
        if at > last {
            return Err(SwitchError::new(
                ErrorCode::InvalidParams,
                format!("at_seq {at} is past the last entry of the session ({last})"),
            ));
        }
        if at < last {
            let kind = serde_json::from_slice::<LogLine>(&self.mirror[at as usize])
                .map(|line| line.entry.kind())
                .unwrap_or("unreadable entry");
            if kind != "turn_end" {
                return Err(SwitchError::new(
                    ErrorCode::InvalidParams,
                    format!(
                        "entry {at} is a {kind}, not a turn_end: fork at a turn_end or at the \
                         last entry ({last})"
                    ),
                ));
            }
        }
        Ok(at)
    }

    /// The current session's `compacted_from`, which a fork keeps so the
    /// history chain goes on.
    fn compacted_from(&self) -> Option<Uuid> {
        let first = self.mirror.first()?;
        match serde_json::from_slice::<LogLine>(first).ok()?.entry {
            LogEntry::SessionStart { compacted_from, .. } => compacted_from,
            _ => None,
        }
    }

    /// Points the pod at `session_id`. If that fails the rename may still
    /// have happened (a failed directory sync): point back at the session
    /// that goes on, so a restart cannot resume one the pod did not switch to.
    fn move_pointer(&self, session_id: Uuid) -> Result<(), SwitchError> {
        let at = &self.dirs.pointer;
        let workspace = Some(self.dirs.workspace.clone());
        let parent = self.dirs.parent.as_ref().map(|p| p.pod.clone());
        let pointer = pointer::Pointer {
            session_id,
            workspace: workspace.clone(),
            parent: parent.clone(),
            removed: false,
        };
        pointer::write(at, pointer).map_err(|e| {
            let back = pointer::Pointer {
                session_id: self.session_id,
                workspace,
                parent,
                removed: false,
            };
            if let Err(e) = pointer::write(at, back) {
                tracing::error!("cannot point {} back: {e}", at.display());
            }
            SwitchError::storage(at, e)
        })
    }
}

#[cfg(test)]
mod tests;
