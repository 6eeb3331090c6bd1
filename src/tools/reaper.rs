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

use std::collections::HashSet;
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

/// The longest pause between two passes over `/proc` while a process that
/// was stopped already is still found running (one stuck in an
/// uninterruptible wait stops when that wait ends).
const STUCK_PAUSE: Duration = Duration::from_secs(1);

/// Kills what the pod's tool processes left behind: a daemon that called
/// `setsid` and forked twice is in no registered group. The pod is a child
/// subreaper, so while it lived every such orphan became its child; when it
/// died, the kernel handed all its children — this reaper among them — to
/// one adopter (the nearest subreaper above the pod, or init). So the
/// orphans are the processes carrying the tool marker (more seccomp filters
/// than this reaper, which is not a tool process) whose nearest unmarked
/// ancestor is that adopter (or the dying pod itself): they and everything
/// below them are stopped, then killed ([`stop_then_kill`]), pass after
/// pass until two passes in a row find none — there is no limit on the
/// passes, so a daemon that keeps forking cannot outlast it.
fn kill_orphans(pod: Pid) {
    let started = Instant::now();
    while getppid() == Some(pod) && started.elapsed() < ADOPTION_WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    let Some(adopter) = getppid() else { return };
    let adopters = [pod.as_raw_nonzero().get(), adopter.as_raw_nonzero().get()];
    kill_all_orphans(&adopters, &[]);
}

/// Kills the tool processes a live pod (this process) adopted — daemons its
/// commands left, which would go on writing the workspace — sparing the
/// processes in `spare` (its MCP servers) and everything below them; the
/// pids killed. Blocking: call it on the blocking pool. A `rewind` calls it
/// before it puts files back, so that nothing a tool left writes over them.
pub fn stop_adopted(spare: &[u32]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let spare: Vec<i32> = spare
        .iter()
        .filter_map(|p| i32::try_from(*p).ok())
        .collect();
    kill_all_orphans(&[me], &spare)
}

/// Stops, then kills, every orphan of `adopters` (see [`is_orphan`]) not in
/// or below `spare` (see [`stop_then_kill`]); returns them.
fn kill_all_orphans(adopters: &[i32], spare: &[i32]) -> Vec<i32> {
    let own = own_filters();
    stop_then_kill(2, |pid| is_orphan(pid, adopters, spare, own)).killed
}

/// What [`stop_then_kill`] did.
#[derive(Debug, Default)]
pub struct Swept {
    /// The processes it stopped, then killed.
    pub killed: Vec<i32>,
    /// Those the kernel refused to signal (`EPERM`): they still run.
    pub refused: Vec<i32>,
}

/// The one way the pod ends processes it cannot list in one look — a chain
/// of processes that each fork the next and exit lives about a millisecond
/// per link, less than one pass over every process takes: it stops
/// (`SIGSTOP`) each process `target` picks the moment a pass finds it, then
/// starts over from a fresh listing, until `quiet` passes in a row find
/// none that is not stopped already; then it kills them all. A stopped
/// process cannot fork, so a link stopped before it forks forks no more,
/// and one that forked first left a child that is now the newest process,
/// which a pass looks at first (the highest pids: a child gets a higher pid
/// than its parent until pids wrap). Stopping, not killing, keeps every
/// process found in place until the end, so the ancestry `target` walks
/// (whose tool, whose pod) stays as it was. There is no limit on the
/// passes, so a process that keeps forking cannot outlast it. Blocking.
pub fn stop_then_kill(quiet: u32, mut target: impl FnMut(i32) -> bool) -> Swept {
    let mut stopped = HashSet::new();
    let mut refused = HashSet::new();
    let mut quiet_passes = 0;
    let mut pause = Duration::ZERO;
    while quiet_passes < quiet {
        let Some(pid) = stop_one(&stopped, &refused, &mut target) else {
            quiet_passes += 1;
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        quiet_passes = 0;
        let Some(process) = Pid::from_raw(pid) else {
            continue;
        };
        match kill_process(process, Signal::Stop) {
            Err(rustix::io::Errno::PERM) => {
                refused.insert(pid);
                continue;
            }
            // ESRCH: it ended meanwhile.
            Err(_) => continue,
            Ok(()) => {}
        }
        // Found again, once stopped: the signal has not landed yet, the
        // process is stuck where a signal cannot reach it yet, or something
        // not found yet woke it; look again, more and more slowly.
        pause = if stopped.insert(pid) {
            Duration::ZERO
        } else {
            (pause * 2).clamp(Duration::from_millis(5), STUCK_PAUSE)
        };
        std::thread::sleep(pause);
    }
    let mut killed: Vec<i32> = stopped.into_iter().collect();
    killed.sort_unstable();
    for pid in &killed {
        if let Some(process) = Pid::from_raw(*pid) {
            let _ = kill_process(process, Signal::Kill);
        }
    }
    let mut refused: Vec<i32> = refused.into_iter().collect();
    refused.sort_unstable();
    Swept { killed, refused }
}

/// One pass over `/proc`, newest process first: the first process `target`
/// picks that is neither stopped by this sweep already nor refused to it;
/// `None` when there is none.
fn stop_one(
    stopped: &HashSet<i32>,
    refused: &HashSet<i32>,
    target: &mut impl FnMut(i32) -> bool,
) -> Option<i32> {
    let me = std::process::id() as i32;
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me && !refused.contains(&pid))
        .collect();
    pids.sort_unstable_by(|a, b| b.cmp(a));
    pids.into_iter().find(|&pid| {
        let held = stopped.contains(&pid)
            && status(pid).is_none_or(|status| status.zombie || status.stopped);
        !held && target(pid)
    })
}

/// Whether `pid` is a live marked process whose nearest unmarked ancestor
/// is one of `adopters`, with neither it nor a marked ancestor in `spare`.
/// An ancestor that vanishes between two reads has handed its children on:
/// the walk starts again from `pid`, which by then names its new parent.
/// Only `pid` itself vanishing ends it.
fn is_orphan(pid: i32, adopters: &[i32], spare: &[i32], own: u32) -> bool {
    match status(pid) {
        // A zombie is dead already; its parent's `wait` is what it needs.
        Some(Status { zombie: true, .. }) | None => return false,
        Some(Status { filters, .. }) if filters <= own => return false,
        Some(_) => {}
    }
    let mut current = pid;
    for _ in 0..4096 {
        if spare.contains(&current) {
            return false;
        }
        let Some(Status { parent, .. }) = status(current) else {
            if current == pid {
                return false;
            }
            current = pid;
            continue;
        };
        if parent <= 0 {
            return false;
        }
        match status(parent) {
            Some(Status { filters, .. }) if filters > own => current = parent,
            Some(_) => return adopters.contains(&parent),
            // The parent is gone: `current` is being handed on.
            None => current = pid,
        }
    }
    false
}

/// How many seccomp filters the reaper runs under: as many as the pod.
fn own_filters() -> u32 {
    super::process::seccomp_filters(std::process::id()).unwrap_or(0)
}

/// What the reaper reads of a process, all from `/proc/PID/status` in one
/// read: cheap enough to keep up with a chain of forks.
struct Status {
    zombie: bool,
    /// Stopped by a signal (or traced): it cannot fork until woken.
    stopped: bool,
    parent: i32,
    /// `Seccomp_filters` (Linux 5.9+; before that, one for mode 2).
    filters: u32,
}

fn status(pid: i32) -> Option<Status> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let (mut state, mut parent, mut filters, mut mode) = (None, None, None, None);
    for line in text.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name {
            "State" => state = value.chars().next(),
            "PPid" => parent = value.parse().ok(),
            "Seccomp" => mode = value.parse::<u32>().ok(),
            "Seccomp_filters" => filters = value.parse().ok(),
            _ => {}
        }
    }
    let state = state?;
    Some(Status {
        zombie: state == 'Z',
        stopped: matches!(state, 'T' | 't'),
        parent: parent?,
        filters: filters.or(mode.map(|mode| u32::from(mode == 2)))?,
    })
}
