//! The reaper: a small process that kills the pod's running commands when
//! the pod dies without a chance to do it itself (`kill -9`, a crash, the
//! OOM killer).
//!
//! A command's `bash` asks the kernel to kill it when the pod dies
//! (`PR_SET_PDEATHSIG`), but that signal reaches `bash` alone: the
//! pipelines, `&` jobs and subshells it forked live on and may go on
//! changing the workspace with nobody left to record it. No kernel feature
//! kills a whole process group when a process dies, so a process outside
//! the group does: `pod serve` starts this program (itself, re-executed as
//! `pod __reaper`, which `main` routes here before parsing flags) once, and tells it each command's process
//! group as the command starts (`+PGID`) and once it is killed (`-PGID`),
//! one line each on the reaper's stdin. When that pipe reads end-of-file the
//! pod is gone — however it went — and the reaper kills every group still
//! registered, then exits.
//!
//! The reaper runs in a process group of its own, so the terminal's Ctrl+C
//! (sent to the foreground group) does not take it down with the pod: it
//! outlives the pod by design, just long enough to clean up after it.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::{Mutex, OnceLock};

use rustix::process::{kill_process_group, Pid, Signal};

/// The hidden subcommand the pod re-executes itself with.
pub const SUBCOMMAND: &str = "__reaper";

/// The pipe to this process's reaper, when one was started.
static REAPER: OnceLock<Mutex<ChildStdin>> = OnceLock::new();

/// Starts the reaper for this process. Logged, not fatal, when it cannot
/// be started: commands then die with the pod only as far as
/// `PR_SET_PDEATHSIG` reaches (their `bash`).
pub fn start() {
    // `/proc/self/exe` rather than the path the pod was started from: it
    // still names this program after a rebuild replaced the file.
    let spawned = Command::new("/proc/self/exe")
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        // It says nothing, and must not hold the pod's stderr open for
        // whoever reads it to its end.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    match spawned.map(|mut child| child.stdin.take()) {
        Ok(Some(stdin)) => {
            let _ = REAPER.set(Mutex::new(stdin));
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(
            "cannot start the reaper ({e}); if the pod is killed, processes its commands \
             started in the background may outlive it"
        ),
    }
}

/// Tells the reaper that a command's process group started (`true`) or was
/// killed (`false`). A no-op without a reaper (tests that run tools in
/// process); a reaper that died is not worth failing a command for.
pub fn watch(group: Pid, running: bool) {
    if let Some(reaper) = REAPER.get() {
        let mut pipe = reaper
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sign = if running { '+' } else { '-' };
        let _ = writeln!(pipe, "{sign}{}", group.as_raw_nonzero());
    }
}

/// The reaper itself: follows the registrations on stdin until end-of-file,
/// then kills the groups still registered.
pub fn run() -> ExitCode {
    let mut groups = HashSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (running, pgid) = match line.split_at_checked(1) {
            Some(("+", pgid)) => (true, pgid),
            Some(("-", pgid)) => (false, pgid),
            _ => continue,
        };
        let Some(pgid) = pgid.parse().ok().and_then(Pid::from_raw) else {
            continue;
        };
        if running {
            groups.insert(pgid);
        } else {
            groups.remove(&pgid);
        }
    }
    for group in groups {
        // ESRCH: the group ended on its own meanwhile.
        let _ = kill_process_group(group, Signal::Kill);
    }
    ExitCode::SUCCESS
}
