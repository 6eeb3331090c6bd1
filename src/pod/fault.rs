//! Fault injection for tests, driven by the `POD_FAULT` environment variable.
//!
//! Durability claims are only worth what their failure tests show, and some
//! failures (a full disk, a crash between two steps of a session switch) cannot
//! be caused from outside at the right instant. `POD_FAULT` is a comma-separated
//! list of:
//! - `fail_writes_after=N`: every session-log write after the first N fails
//!   with an I/O error, as on a full disk;
//! - `fail_writes_while=PATH`: session-log writes fail while the file PATH
//!   exists — a disk that fills up and is freed again, at instants the test
//!   chooses (even from inside a tool call);
//! - `crash_at=STEP`: the process kills itself with SIGKILL when a session
//!   switch (compaction, `new_session`, `fork`, `resume_session`) reaches
//!   STEP: `summarised` (compaction only: the summary is back),
//!   `new_session_partial` (the first line of a new log is written, not
//!   synced), `new_session_written` (the new log is durable, or the resumed
//!   one open and locked; the pointer has not moved), `pointer_moved`
//!   (nothing announced yet).
//!
//! Unset (the normal case) it costs one branch per write.

use std::cell::Cell;
use std::path::PathBuf;

#[derive(Debug, Default)]
pub struct Faults {
    fail_writes_after: Option<u64>,
    writes: Cell<u64>,
    fail_writes_while: Option<PathBuf>,
    crash_at: Option<String>,
}

impl Faults {
    /// Reads `POD_FAULT`; an unparseable value is an error, so a test never
    /// silently runs without the fault it asked for.
    pub fn from_env() -> anyhow::Result<Faults> {
        let mut faults = Faults::default();
        let Ok(spec) = std::env::var("POD_FAULT") else {
            return Ok(faults);
        };
        for item in spec.split(',').filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some(("fail_writes_after", n)) => {
                    faults.fail_writes_after = Some(n.parse().map_err(|_| {
                        anyhow::anyhow!("POD_FAULT: fail_writes_after needs a number, got {n:?}")
                    })?)
                }
                Some(("fail_writes_while", path)) => {
                    faults.fail_writes_while = Some(PathBuf::from(path))
                }
                Some(("crash_at", step)) => faults.crash_at = Some(step.to_owned()),
                Some(("fail_checkpoint_writes_while", _)) => {}
                _ => anyhow::bail!("POD_FAULT: unknown fault {item:?}"),
            }
        }
        Ok(faults)
    }

    pub fn before_write(&self) -> std::io::Result<()> {
        let n = self.writes.get() + 1;
        self.writes.set(n);
        if matches!(self.fail_writes_after, Some(limit) if n > limit) {
            return Err(std::io::Error::other(
                "injected write failure (POD_FAULT fail_writes_after)",
            ));
        }
        if self.fail_writes_while.as_ref().is_some_and(|p| p.exists()) {
            return Err(std::io::Error::other(
                "injected write failure (POD_FAULT fail_writes_while)",
            ));
        }
        Ok(())
    }

    pub fn switch_step(&self, step: &str) {
        if self.crash_at.as_deref() == Some(step) {
            tracing::warn!("POD_FAULT: crashing at session switch step {step}");
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::Kill,
            );
        }
    }
}
