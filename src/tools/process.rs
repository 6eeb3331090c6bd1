//! Tool processes: the one way the pod starts a process on a tool's behalf
//! — a `bash` command, a background job, a hook, an MCP server.
//!
//! A tool process runs as the user, so whatever it can reach, it can make
//! the user's programs do. [`harden`] takes away what would let it act *as*
//! the user rather than merely as a program of theirs:
//!
//! - **No controlling terminal** (`setsid`): it cannot open `/dev/tty` and
//!   push keystrokes into the TUI or the user's shell, nor be reached by the
//!   terminal's job control.
//! - **A seccomp filter**, inherited by everything it starts and impossible
//!   to remove: `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` (faking terminal
//!   input on any tty it can open) fail with `EPERM`; while the sandbox is
//!   on (and `--sandbox-unix-sockets off`, the default), so do
//!   `socket(AF_UNIX, …)` and `io_uring_setup` (io_uring opens sockets
//!   without the `socket` call) — the door to every server of the user's
//!   that runs anything it is asked: another pod, tmux, screen, D-Bus,
//!   ssh-agent, docker.
//! - **The marker**: that filter is also how any pod tells a tool process
//!   from the user. `/proc/PID/status` shows how many seccomp filters a
//!   process runs under (`Seccomp_filters`); a tool process has more than
//!   the pod that started it, and nothing it does can lower the count
//!   ([`carries_marker`]).
//! - **The pod's secrets stay out of its environment**: the variables the
//!   pod reads its provider keys and remote access from are removed
//!   (`--pass-env NAME` keeps one).
//! - It dies with the pod (`PR_SET_PDEATHSIG`), and the
//!   [`reaper`](super::reaper) kills whatever it left behind.
//!
//! `socketpair` stays allowed: the pair it makes reaches only the processes
//! that hold it, and `libuv` (Node, npm) and Python's `asyncio` need it for
//! their own child processes and event loops.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use rustix::process::{getpid, getppid, set_parent_process_death_signal, setsid, Pid, Signal};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use landlock::RulesetCreated;

/// The variables removed from every tool process's environment unless
/// `--pass-env` names them: the provider keys the pod reads, and the token
/// and address of its remote door.
pub const SECRET_ENV: [&str; 4] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "POD_TOKEN",
    "POD_URL",
];

/// The names `--pass-env` keeps, set once at start ([`keep_env`]).
static PASSED_ENV: OnceLock<Vec<String>> = OnceLock::new();

/// Keeps these of [`SECRET_ENV`] in tool processes' environment. Called
/// once, at start; later calls change nothing.
pub fn keep_env(names: Vec<String>) {
    let _ = PASSED_ENV.set(names);
}

/// A Landlock ruleset the sandbox built, ready for a child to apply to
/// itself: prepared before `fork`, applied in [`confine`].
pub(crate) struct Prepared(pub(super) RulesetCreated);

impl Prepared {
    /// Restricts the calling process. Only system calls and moves: safe to
    /// call between `fork` and `exec` (in `pre_exec`).
    pub(crate) fn restrict_self(self) -> std::io::Result<()> {
        match self.0.restrict_self() {
            Ok(_) => Ok(()),
            Err(_) => Err(rustix::io::Errno::PERM.into()),
        }
    }
}

/// What a tool process is confined by, prepared in the pod before `fork`.
pub struct Confinement {
    landlock: Option<Prepared>,
    filter: Arc<BpfProgram>,
}

impl Confinement {
    /// `landlock` from the sandbox (if it confines anything); `unix_sockets`
    /// whether the process may create Unix-domain sockets.
    pub(crate) fn new(landlock: Option<Prepared>, unix_sockets: bool) -> std::io::Result<Self> {
        Ok(Self {
            landlock,
            filter: filter(unix_sockets)?,
        })
    }

    /// For a process the sandbox does not confine (MCP servers, hooks): no
    /// Landlock, Unix sockets allowed, but no terminal, no keystroke
    /// injection and the marker all the same.
    pub fn unsandboxed() -> std::io::Result<Self> {
        Self::new(None, true)
    }
}

/// Makes `cmd` start as a tool process: its own session, the environment
/// without the pod's secrets, and — between `fork` and `exec` — death with
/// the pod, the sandbox and the seccomp filter. Call it before setting any
/// variable the process must get explicitly (an MCP server's `env`), and do
/// not also ask for a process group: the new session is one, led by the
/// child, so `kill(-pid)` still reaches everything it starts.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits:
/// spawn from a thread that lives as long as the pod (the actix main
/// thread), never from a pool thread that can retire.
pub fn harden(cmd: &mut tokio::process::Command, confinement: Confinement) {
    let passed = PASSED_ENV.get().map(Vec::as_slice).unwrap_or_default();
    for name in SECRET_ENV {
        if !passed.iter().any(|p| p == name) {
            cmd.env_remove(name);
        }
    }
    let pod = getpid();
    let Confinement { landlock, filter } = confinement;
    let mut landlock = Some(landlock);
    // SAFETY: the closure runs between fork and exec, where only
    // async-signal-safe work is allowed: `confine` makes system calls and
    // moves an already-built ruleset and filter, nothing else.
    unsafe {
        cmd.pre_exec(move || confine(pod, landlock.take().flatten(), &filter));
    }
}

/// In the child, before `exec`. System calls only (see [`harden`]).
fn confine(pod: Pid, landlock: Option<Prepared>, filter: &BpfProgram) -> std::io::Result<()> {
    setsid()?;
    set_parent_process_death_signal(Some(Signal::Kill))?;
    // The pod may have died between fork and the call above; then the signal
    // will never come, so give up now.
    if getppid() != Some(pod) {
        return Err(rustix::io::Errno::SRCH.into());
    }
    if let Some(landlock) = landlock {
        landlock.restrict_self()?;
    }
    seccompiler::apply_filter(filter).map_err(|_| std::io::Error::from(rustix::io::Errno::PERM))
}

/// The two filters, built once: with and without Unix sockets.
fn filter(unix_sockets: bool) -> std::io::Result<Arc<BpfProgram>> {
    static FILTERS: OnceLock<Result<[Arc<BpfProgram>; 2], String>> = OnceLock::new();
    let built = FILTERS.get_or_init(|| {
        let build = |deny_unix| build_filter(deny_unix).map(Arc::new);
        Ok([build(false)?, build(true)?])
    });
    match built {
        Ok([with_sockets, without]) => Ok(Arc::clone(if unix_sockets {
            with_sockets
        } else {
            without
        })),
        Err(e) => Err(std::io::Error::other(format!(
            "cannot build the seccomp filter for tool processes: {e}"
        ))),
    }
}

/// On x86-64 the same calls also come in through the x32 ABI, numbered
/// with this bit set (ioctl as 514); the filter denies those numbers too.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// The numbers `nr` is called by on this architecture.
fn numbers(nr: libc::c_long) -> Vec<i64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut all = vec![nr, nr | X32];
        if nr == libc::SYS_ioctl {
            all.push(514 | X32);
        }
        all
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![nr]
    }
}

/// The filter: `EPERM` for the denied calls, everything else allowed. A
/// process of another architecture's ABI (a 32-bit program) is killed,
/// since its calls have other numbers the filter cannot check.
fn build_filter(deny_unix_sockets: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    // The request is an `unsigned int` to the kernel: compare only the low
    // 32 bits, or a request with high bits set would slip past.
    let arg_is = |index, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|e| e.to_string())
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // The requests' type is `c_ulong` in glibc and `c_int` in musl.
    #[allow(clippy::unnecessary_cast)]
    let ioctl = vec![
        arg_is(1, libc::TIOCSTI as u64)?,
        arg_is(1, libc::TIOCLINUX as u64)?,
    ];
    for nr in numbers(libc::SYS_ioctl) {
        rules.insert(nr, ioctl.clone());
    }
    if deny_unix_sockets {
        let socket = vec![arg_is(0, libc::AF_UNIX as u64)?];
        for nr in numbers(libc::SYS_socket) {
            rules.insert(nr, socket.clone());
        }
        // An empty rule list matches the call whatever its arguments.
        for nr in numbers(libc::SYS_io_uring_setup) {
            rules.insert(nr, Vec::new());
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

/// How many seccomp filters process `pid` runs under, from
/// `/proc/PID/status` (`Seccomp_filters`, Linux 5.9+; before that, one
/// for mode 2); `None` when it cannot be read.
pub fn seccomp_filters(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u32>().ok())
    };
    field("Seccomp_filters:").or_else(|| field("Seccomp:").map(|mode| u32::from(mode == 2)))
}

/// How many filters this process runs under (a pod in a container or
/// under another sandbox already has some), read once.
fn own_filters() -> u32 {
    static OWN: OnceLock<u32> = OnceLock::new();
    *OWN.get_or_init(|| seccomp_filters(std::process::id()).unwrap_or(0))
}

/// Whether `pid` runs under more seccomp filters than this process: true
/// of every process a pod started as a tool process (and everything it
/// started), whichever pod, when this process is a pod or its reaper. A
/// pid that cannot be read counts as marked: refusing a stranger is the
/// safe mistake.
pub fn carries_marker(pid: u32) -> bool {
    seccomp_filters(pid).is_none_or(|n| n > own_filters())
}

/// Whether this process is a pod's tool process (or runs under one): an
/// ancestor runs this same executable under fewer seccomp filters than
/// this process — the marker [`harden`] put on it. Such a process must not
/// start pods of its own (`pod send` from a `bash` call).
pub fn under_a_pod() -> bool {
    let Ok(me) = std::fs::read_link("/proc/self/exe") else {
        return false;
    };
    let mine = own_filters();
    let mut pid = getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32);
    for _ in 0..4096 {
        if pid <= 1 {
            return false;
        }
        let same_exe = std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == me);
        if same_exe && seccomp_filters(pid).is_some_and(|theirs| theirs < mine) {
            return true;
        }
        match parent_pid(pid) {
            Some(parent) => pid = parent,
            None => return false,
        }
    }
    false
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the
/// parenthesised command name, which may itself hold spaces or `)`).
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_the_user_started_is_not_under_a_pod() {
        assert!(!under_a_pod());
        assert_eq!(
            parent_pid(std::process::id()),
            getppid().map(|p| p.as_raw_nonzero().get() as u32)
        );
    }

    #[test]
    fn both_filters_build_on_this_architecture() {
        assert!(filter(true).is_ok());
        assert!(filter(false).is_ok());
        assert!(filter(false).unwrap().len() > filter(true).unwrap().len());
    }

    #[test]
    fn this_process_carries_no_marker_of_its_own() {
        assert!(!carries_marker(std::process::id()));
        assert_eq!(
            seccomp_filters(std::process::id()),
            Some(own_filters()),
            "/proc/self/status says how many filters"
        );
    }
}
