//! A public handle on the `SessionLog` actor for `examples/bench`.
//!
//! A durable commit (write + fdatasync + mirror + publish) can only be timed
//! in-process, where nothing else is on the clock. [`DurableLog`] starts the
//! same actors `pod serve` starts for it — the log on an arbiter (thread) of
//! its own, publishing to a broadcaster — and sends it the same `Append` the
//! worker sends. It adds nothing to the path it measures.

use std::path::{Path, PathBuf};

use actix::prelude::*;
use anyhow::Context as _;
use uuid::Uuid;

use super::broadcaster::Broadcaster;
use super::fault::Faults;
use super::host::{start_session, Start};
use super::session_log::{self, Dirs, SessionLog};
use crate::protocol::{Greeting, LogEntry};
use crate::store::{pointer, LogFile};

pub use super::session_log::StorageError;

/// A fresh session's log, its actor running as in `pod serve`.
pub struct DurableLog {
    log: Addr<SessionLog>,
    path: PathBuf,
    /// The log's thread; stopped on drop.
    arbiter: actix_rt::Arbiter,
}

impl DurableLog {
    /// Creates a session under `data_dir` (its `session_start` already
    /// durable) and starts its actors. Call it inside an actix `System`.
    pub fn create(data_dir: &Path) -> anyhow::Result<DurableLog> {
        let sessions = data_dir.join("sessions");
        let pods = data_dir.join("pods");
        for dir in [&sessions, &pods] {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let session_id = Uuid::new_v4();
        let path = LogFile::path_for(&sessions, session_id);
        let pointer_path = pointer::path(&pods, "bench");
        let start = Start {
            new_session: true,
            session: None,
            force: false,
            provider: "none".into(),
            model: "none".into(),
            workspace: data_dir.to_owned(),
            parent: None,
            fresh_id: None,
            replay_of: None,
        };
        let (file, session_id, recovered) =
            start_session(LogFile::create(&path)?, session_id, &pointer_path, &start)?;
        let broadcaster = Broadcaster::new(Greeting {
            pod: "bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            session_id,
            provider: "none".into(),
            model: "none".into(),
            workspace: data_dir.display().to_string(),
            pid: std::process::id(),
            approval: Default::default(),
            sandbox: Default::default(),
            mcp_servers: Vec::new(),
            access: Default::default(),
            access_reason: None,
            listen: None,
            allow_remote_always: false,
            warnings: Vec::new(),
        })
        .start();
        let arbiter = actix_rt::Arbiter::new();
        let dirs = Dirs {
            sessions,
            pointer: pointer_path,
            workspace: data_dir.to_owned(),
            parent: None,
        };
        let log = SessionLog::start_in_arbiter(&arbiter.handle(), move |_| {
            SessionLog::new(
                file,
                session_id,
                recovered.lines,
                broadcaster,
                dirs,
                Faults::default(),
            )
        });
        Ok(DurableLog { log, path, arbiter })
    }

    /// Appends one entry; resolves with its `seq` once it is durable,
    /// mirrored and published.
    pub async fn append(&self, entry: LogEntry) -> Result<u64, StorageError> {
        session_log::append(&self.log, entry).await
    }

    /// The session's log file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DurableLog {
    fn drop(&mut self) {
        self.arbiter.stop();
    }
}
