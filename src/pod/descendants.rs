//! Telling a tool process from the user: whether a socket peer is a pod's
//! tool process — this pod's or any other's — and reaping the orphans the
//! pod adopts.
//!
//! A tool must never approve itself, nor another pod's requests. `bash`
//! commands and MCP servers run as the user, so they may reach a socket;
//! what sets them apart is one of two things, and either makes a peer
//! read-only ([`is_tool_process`]):
//!
//! - **it descends from this pod.** The pod makes itself a *child
//!   subreaper* (`PR_SET_CHILD_SUBREAPER`), so a command that double-forks
//!   a daemon does not escape to init: the daemon is reparented to the pod
//!   and stays in its subtree. The price of adopting orphans is reaping
//!   them, which [`reap_orphans`] does.
//! - **it carries the marker of a tool process** of any pod: it runs under
//!   more seccomp filters than this pod (`Seccomp_filters` in
//!   `/proc/PID/status`). Every pod installs its filter in every tool
//!   process before `exec` ([`crate::tools::process`]); a filter is
//!   inherited by every child and can never be removed, so nothing a tool
//!   starts — a daemon of a pod that died, a command of another pod — can
//!   shed it. A client the user runs under some other seccomp sandbox than
//!   the pod's (a Flatpak terminal, a container the pod is not in) is read
//!   as a tool too: the safe mistake, said in docs/approvals.md.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use rustix::process::{getpid, Pid, WaitOptions};

use crate::tools::reaper;

/// How often adopted orphans are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

/// Makes the pod the subreaper of everything it starts. Logged, not fatal,
/// where the kernel refuses: peers are then still checked by ancestry, but a
/// double-forked daemon escapes to init.
pub fn become_subreaper() {
    if let Err(e) = rustix::process::set_child_subreaper(Some(getpid())) {
        tracing::warn!("cannot become a child subreaper ({e}); processes that tools daemonise will not count as the pod's");
    }
}

/// Whether the peer process `pid` is a tool process — of this pod or any
/// other — or this pod itself: such a peer may only read. Blocking (it
/// reads `/proc`): call it on the blocking pool. This is the one check
/// every door uses, the Unix socket and (for a local TCP peer whose pid is
/// known) the network.
pub fn is_tool_process(pid: u32) -> bool {
    crate::tools::process::carries_marker(pid) || is_pod_or_descendant(pid)
}

/// Whether `pid` is the pod itself or one of its descendants, by walking
/// its parents in `/proc` (blocking: call it on the blocking pool). A pid
/// that cannot be read (gone already) counts as a descendant: refusing a
/// stranger the right to approve is the safe mistake.
pub fn is_pod_or_descendant(pid: u32) -> bool {
    let me = getpid().as_raw_nonzero().get() as u32;
    let mut current = pid;
    for _ in 0..4096 {
        if current == me {
            return true;
        }
        if current <= 1 {
            return false;
        }
        match parent_of(current) {
            Some(parent) => current = parent,
            None => return true,
        }
    }
    true
}

/// The parent pid and state from `/proc/PID/stat`. The command name in
/// parentheses may hold spaces and parentheses itself, so fields are read
/// after its last `)`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

fn parent_of(pid: u32) -> Option<u32> {
    stat(pid).map(|(_, parent)| parent)
}

/// Whether `pid` is a tool process a dead pod left running in `workspace`:
/// it carries the marker, its working directory is in the workspace, and
/// no live pod is above it — neither a marked ancestor running pod's
/// program (a pod a tool started, with its own tools below it) nor its
/// nearest unmarked ancestor (a live pod's tools have that pod there: it is
/// their subreaper). The reaper kills these when a pod dies; any found as a
/// pod starts outlived it — a reaper that was killed first, or one of a pod
/// built before it looped without limit — and may still change the
/// workspace or wait for the user's next client. Blocking: reads `/proc`.
fn is_leftover(pid: u32, workspace: &Path, own: u32, pod: &PodProgram) -> bool {
    let marked = |pid: u32| crate::tools::process::seccomp_filters(pid).is_some_and(|n| n > own);
    // The cheapest test first: a starting pod makes several passes.
    let in_workspace =
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(workspace));
    if !in_workspace || !matches!(stat(pid), Some((state, _)) if state != 'Z') || !marked(pid) {
        return false;
    }
    let mut current = pid;
    for _ in 0..4096 {
        match parent_of(current) {
            Some(parent) if marked(parent) => {
                if pod.runs_in(parent) {
                    return false;
                }
                current = parent;
            }
            Some(parent) => return pod.comm.is_some() && !pod.is(parent),
            None => return false,
        }
    }
    false
}

/// What tells a pod's process from others: this pod's name (`comm`) and
/// program file.
struct PodProgram {
    comm: Option<String>,
    exe: Option<(u64, u64)>,
}

impl PodProgram {
    fn of_this_process() -> Self {
        Self {
            comm: comm(std::process::id()),
            exe: program(std::process::id()),
        }
    }

    /// Whether `pid`, an unmarked process, is a pod: named as this one, or
    /// running the same program.
    fn is(&self, pid: u32) -> bool {
        comm(pid) == self.comm || self.runs_in(pid)
    }

    /// Whether `pid` runs this pod's program. Not by name: a tool process
    /// can rename itself to anything.
    fn runs_in(&self, pid: u32) -> bool {
        self.exe.is_some() && program(pid) == self.exe
    }
}

/// The device and inode of the program `pid` runs.
fn program(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Passes over `/proc` that must find no leftover not stopped already, in
/// a row, before there is none: a link of a fast fork chain (each living a
/// few milliseconds, in a session of its own) can be gone before one pass
/// reads it, while the next link is not listed yet.
const QUIET_PASSES: u32 = 4;

/// Stops the tool processes a dead pod left running in `workspace` (see
/// [`is_leftover`]) and says what it did, for stderr and the greeting;
/// `None` when there were none. They are stopped, then killed, by the
/// reaper's own sweep ([`reaper::stop_then_kill`]), which a fork chain
/// cannot outrun, as a list of pids handed to the user could not. What the
/// kernel refused to signal is named, with how to stop it. Blocking: reads
/// `/proc`.
pub fn stop_leftovers(workspace: &Path) -> Vec<String> {
    let own = own_filters();
    let pod = PodProgram::of_this_process();
    let mut names = std::collections::HashMap::new();
    let swept = reaper::stop_then_kill(QUIET_PASSES, |pid| {
        let Ok(pid) = u32::try_from(pid) else {
            return false;
        };
        let leftover = is_leftover(pid, workspace, own, &pod);
        if leftover {
            names.entry(pid).or_insert_with(|| comm(pid));
        }
        leftover
    });
    let listed = |pids: &[i32]| {
        let mut shown: Vec<String> = pids
            .iter()
            .take(10)
            .map(|pid| {
                let name = u32::try_from(*pid)
                    .ok()
                    .and_then(|pid| names.get(&pid).cloned().flatten());
                match name {
                    Some(name) => format!("{pid} ({})", crate::safe_text::line(&name)),
                    None => pid.to_string(),
                }
            })
            .collect();
        if pids.len() > 10 {
            shown.push(format!("and {} more", pids.len() - 10));
        }
        shown.join(", ")
    };
    let processes = |n: usize| if n == 1 { "process" } else { "processes" };
    let mut said = Vec::new();
    if !swept.killed.is_empty() {
        said.push(format!(
            "killed {} {} that the tools of a pod that is gone left running in this workspace, \
             which its reaper did not end: {}. They could have gone on changing files, or \
             waited for this pod's port or socket",
            swept.killed.len(),
            processes(swept.killed.len()),
            listed(&swept.killed),
        ));
    }
    if !swept.refused.is_empty() {
        said.push(format!(
            "{} {} that the tools of a pod that is gone left in this workspace could not be \
             stopped (the system refused the signal) and still run: {}. They may go on \
             changing files, or wait for this pod's port or socket; stop them as \
             docs/sandbox.md shows, unless you started them yourself",
            swept.refused.len(),
            processes(swept.refused.len()),
            listed(&swept.refused),
        ));
    }
    said
}

/// How many seccomp filters this pod runs under.
fn own_filters() -> u32 {
    crate::tools::process::seccomp_filters(std::process::id()).unwrap_or(0)
}

/// A process's name (`/proc/PID/comm`), as `ps` shows it.
fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|name| name.trim_end().to_owned())
}

/// The pod's zombie children.
fn zombie_children() -> HashSet<u32> {
    let me = getpid().as_raw_nonzero().get() as u32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashSet::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat(pid), Some(('Z', parent)) if parent == me))
        .collect()
}

/// Reaps orphans the pod adopted, forever. The pod's own children (a `bash`
/// command, an MCP server) are reaped by tokio the moment they exit; a
/// zombie still there a whole period later is one nobody waits for — an
/// adopted orphan — and only those are reaped here, so no `wait` of tokio's
/// is ever robbed of its child.
pub async fn reap_orphans() {
    let mut seen = HashSet::new();
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let zombies = tokio::task::spawn_blocking(zombie_children)
            .await
            .unwrap_or_default();
        for pid in zombies.intersection(&seen) {
            if let Some(pid) = Pid::from_raw(*pid as i32) {
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
            }
        }
        seen = zombies;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_and_its_children_are_descendants_and_init_is_not() {
        let me = std::process::id();
        assert!(is_pod_or_descendant(me));
        assert!(!is_pod_or_descendant(1));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(is_pod_or_descendant(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
