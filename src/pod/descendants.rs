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

/// The tool processes a dead pod left running in `workspace`: processes
/// carrying the marker whose working directory is in the workspace and
/// whose nearest unmarked ancestor is not a pod (a live pod's tools have
/// that pod there: it is their subreaper). The reaper kills these when a pod
/// dies; any found as a pod starts outlived it — a reaper that was killed
/// first, or one of a pod built before it looped without limit — and may
/// still change the workspace or wait for the user's next client. Blocking:
/// reads `/proc`.
pub fn leftovers(workspace: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = own_filters();
    let marked = |pid: u32| crate::tools::process::seccomp_filters(pid).is_some_and(|n| n > own);
    let pod_comm = comm(getpid().as_raw_nonzero().get() as u32);
    let mut found: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        // The cheapest test first: a starting pod makes several passes.
        .filter(|&pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .is_ok_and(|cwd| cwd.starts_with(workspace))
        })
        .filter(|&pid| matches!(stat(pid), Some((state, _)) if state != 'Z'))
        .filter(|&pid| marked(pid))
        .filter(|&pid| {
            let mut current = pid;
            for _ in 0..4096 {
                match parent_of(current) {
                    Some(parent) if marked(parent) => current = parent,
                    Some(parent) => return pod_comm.is_some() && comm(parent) != pod_comm,
                    None => return false,
                }
            }
            false
        })
        .collect();
    found.sort_unstable();
    found
}

/// How long a starting pod goes on looking for [`leftovers`] once it found
/// some: long enough to see a fork chain's links come and go.
const LOOK_FOR_LEFTOVERS: Duration = Duration::from_millis(300);

/// Passes over `/proc` that must find no leftover in a row before there is
/// none: a link of a fast fork chain (each living a few milliseconds, in a
/// session of its own) can be gone before one pass reads it, while the next
/// link is not listed yet.
const QUIET_PASSES: u32 = 4;

/// The warning a starting pod prints for the tool processes of a dead pod
/// still running in `workspace` (see [`leftovers`]), `None` when there are
/// none. One pass can miss the links of a fast fork chain, so it passes
/// over `/proc` again until [`QUIET_PASSES`] in a row find none, or, once
/// it found some, for [`LOOK_FOR_LEFTOVERS`]: new processes that no tool
/// process still running started are a chain, which a list of pids cannot
/// stop. Blocking: reads `/proc`.
pub fn leftovers_warning(workspace: &Path) -> Option<String> {
    let mut first_seen = None;
    let mut all: Vec<u32> = Vec::new();
    let mut names = std::collections::HashMap::new();
    let mut quiet = 0;
    let mut chain = false;
    while quiet < QUIET_PASSES {
        if first_seen.is_some_and(|t: std::time::Instant| t.elapsed() > LOOK_FOR_LEFTOVERS) {
            break;
        }
        let found = leftovers(workspace);
        if found.is_empty() {
            quiet += 1;
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        quiet = 0;
        first_seen.get_or_insert_with(std::time::Instant::now);
        // A new process whose parent is not a tool's was not started by
        // one that still runs: the link before it ended (a chain); a new
        // child of a looping daemon is not one.
        let own = own_filters();
        let tools_child = |pid: u32| {
            parent_of(pid).is_some_and(|parent| {
                crate::tools::process::seccomp_filters(parent).is_some_and(|n| n > own)
            })
        };
        if !all.is_empty()
            && found
                .iter()
                .any(|pid| !all.contains(pid) && !tools_child(*pid))
        {
            chain = true;
        }
        for pid in &found {
            if !all.contains(pid) {
                all.push(*pid);
                names.insert(*pid, comm(*pid));
            }
        }
    }
    if all.is_empty() {
        return None;
    }
    // Only those still running are worth a `kill -9`.
    let running: Vec<u32> = all
        .iter()
        .copied()
        .filter(|pid| matches!(stat(*pid), Some((state, _)) if state != 'Z'))
        .collect();
    let shown = if running.is_empty() { &all } else { &running };
    let listed: Vec<String> = shown
        .iter()
        .take(10)
        .map(|pid| match names.get(pid).cloned().flatten() {
            Some(name) => format!("{pid} ({name})"),
            None => pid.to_string(),
        })
        .collect();
    let numbers: Vec<String> = running.iter().map(u32::to_string).collect();
    let mut said = format!(
        "{} process{} started by the tools of a pod that is gone still run{} in this \
         workspace: {}. They may go on changing files, or wait for this pod's port or socket",
        shown.len(),
        if shown.len() == 1 { "" } else { "es" },
        if shown.len() == 1 { "s" } else { "" },
        listed.join(", "),
    );
    if chain {
        said.push_str(
            "; some start new ones as they end (a fork chain), so no list of pids stops them: \
             kill them over and over until none is left, as docs/sandbox.md shows, unless you \
             started them yourself",
        );
    } else {
        said.push_str(&format!(
            "; stop them with `kill -9 {}` unless you started them yourself (see \
             docs/sandbox.md)",
            numbers.join(" ")
        ));
    }
    Some(said)
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
