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
//! registered, then every orphan its tool processes left (see
//! [`kill_orphans`]: a daemon that left its group and session), then exits.
//!
//! The reaper runs in a process group of its own, so the terminal's Ctrl+C
//! (sent to the foreground group) does not take it down with the pod: it
//! outlives the pod by design, just long enough to clean up after it.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustix::process::{getppid, kill_process, kill_process_group, Pid, Signal};

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
/// then kills the groups still registered and the orphans the pod left.
pub fn run() -> ExitCode {
    let pod = getppid();
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
    if let Some(pod) = pod {
        kill_orphans(pod);
    }
    ExitCode::SUCCESS
}

/// How long the reaper waits to be handed to the pod's adopter.
const ADOPTION_WAIT: Duration = Duration::from_secs(2);

/// Kills what the pod's tool processes left behind: a daemon that called
/// `setsid` and forked twice is in no registered group. The pod is a child
/// subreaper, so while it lived every such orphan became its child; when it
/// died, the kernel handed all its children — this reaper among them — to
/// one adopter (the nearest subreaper above the pod, or init). So the
/// orphans are the processes carrying the tool marker (more seccomp filters
/// than this reaper, which is not a tool process) whose nearest unmarked
/// ancestor is that adopter (or the dying pod itself): they and everything
/// below them are killed, round after round, until none is left — each
/// killed process's children are handed to the adopter in turn.
fn kill_orphans(pod: Pid) {
    let started = Instant::now();
    while getppid() == Some(pod) && started.elapsed() < ADOPTION_WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let Some(adopter) = getppid() else { return };
    let adopters = [pod.as_raw_nonzero().get(), adopter.as_raw_nonzero().get()];
    for _ in 0..100 {
        let orphans = orphans_of(&adopters);
        if orphans.is_empty() {
            return;
        }
        for pid in orphans {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = kill_process(pid, Signal::Kill);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The marked processes whose nearest unmarked ancestor is one of
/// `adopters`, from one pass over `/proc`.
fn orphans_of(adopters: &[i32]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // pid → (parent, marked)
    let table: HashMap<i32, (i32, bool)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let (state, parent) = stat(pid)?;
            // A zombie is dead already; its parent's `wait` is what it needs.
            if state == 'Z' {
                return None;
            }
            let marked =
                super::process::seccomp_filters(pid as u32).is_some_and(|n| n > own_filters());
            Some((pid, (parent, marked)))
        })
        .collect();
    let is_orphan = |pid: i32| {
        let mut current = pid;
        for _ in 0..4096 {
            match table.get(&current) {
                Some(&(parent, true)) => current = parent,
                _ => return adopters.contains(&current),
            }
        }
        false
    };
    table
        .iter()
        .filter(|(_, &(_, marked))| marked)
        .map(|(&pid, _)| pid)
        .filter(|&pid| is_orphan(pid))
        .collect()
}

/// How many seccomp filters the reaper runs under: as many as the pod.
fn own_filters() -> u32 {
    super::process::seccomp_filters(std::process::id()).unwrap_or(0)
}

/// The state and parent pid from `/proc/PID/stat`, read after the command
/// name's last `)` (the name may hold spaces and parentheses).
fn stat(pid: i32) -> Option<(char, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}
