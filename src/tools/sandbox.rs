//! The `bash` sandbox: a policy and a workspace become Landlock rules, which
//! the spawned shell applies to itself before `exec`.
//!
//! The work is split so that the child does as little as possible: the rules
//! are plain data ([`Rules`]), built from the policy without touching the
//! kernel; [`Sandbox::prepare`] turns them into a Landlock ruleset (opening
//! the directories, creating the ruleset fd) in the pod, before `fork`; the
//! child then only calls `landlock_restrict_self`, a system call, which is
//! safe between `fork` and `exec`. The pod itself is never restricted.
//!
//! Landlock is applied best-effort: on a kernel with an older ABI the child
//! gets what the kernel supports. What is *actually* enforced is measured
//! once, at start-up, by applying the same rules to a short-lived thread of
//! the pod (Landlock restricts only the calling thread, which then exits), so
//! the pod reports exactly what its children get, not what it asked for.

use std::path::{Path, PathBuf};

use landlock::{
    AccessFs, AccessNet, BitFlags, LandlockStatus, PathBeneath, PathFd, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope, ABI,
};

use super::process::{Confinement, Prepared};
pub use crate::protocol::{SandboxInfo, SandboxMode};

/// Whether `bash` commands run confined (see `docs/sandbox.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxGate {
    /// Commands run in the sandbox.
    Enforced,
    /// The user wants the sandbox but the kernel cannot provide it: mode
    /// `auto` then asks for `bash` calls (allow rules still apply), because
    /// the user chose `auto` trusting the confinement that is missing.
    Unavailable,
    /// The user turned the sandbox off; that changes nothing about asking.
    Off,
}

/// `--sandbox-network on|off`. The config file may also say `true`/`false`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    #[default]
    #[value(alias = "true")]
    On,
    #[value(alias = "false")]
    Off,
}

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Whether `bash` commands may open TCP connections and bind TCP ports.
    pub network: bool,
    /// Whether `bash` commands may create Unix-domain sockets while the
    /// sandbox is on (`--sandbox-unix-sockets`); with `--sandbox off` they
    /// always may.
    pub unix_sockets: bool,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            network: true,
            unix_sockets: false,
        }
    }
}

impl SandboxPolicy {
    /// Whether tool processes may create Unix-domain sockets: only when the
    /// sandbox is off or the user opened that door.
    pub fn allows_unix_sockets(&self) -> bool {
        self.mode == SandboxMode::Off || self.unix_sockets
    }

    /// Whether `write_file` and `edit_file` may change files.
    pub fn allows_file_edits(&self) -> bool {
        matches!(self.mode, SandboxMode::WorkspaceWrite | SandboxMode::Off)
    }

    /// The rules this policy makes for `workspace`, with `tmpdir` the pod's
    /// `$TMPDIR` if its environment sets one.
    pub fn rules(&self, workspace: &Path, tmpdir: Option<&Path>) -> Rules {
        let writable = match self.mode {
            SandboxMode::Off => None,
            // `Unknown` never comes from the command line; were it to, the
            // strictest mode is the safe reading.
            SandboxMode::ReadOnly | SandboxMode::Unknown => Some(vec![PathBuf::from("/dev")]),
            SandboxMode::WorkspaceWrite => {
                let mut dirs = vec![workspace.to_path_buf(), PathBuf::from("/tmp")];
                dirs.extend(tmpdir.map(Path::to_path_buf));
                dirs.push(PathBuf::from("/dev"));
                let mut unique = Vec::with_capacity(dirs.len());
                for dir in dirs {
                    if !unique.contains(&dir) {
                        unique.push(dir);
                    }
                }
                Some(unique)
            }
        };
        let confined = self.mode != SandboxMode::Off;
        Rules {
            writable,
            deny_tcp: !self.network,
            scope_signals: confined,
            scope_abstract_sockets: confined && !self.unix_sockets,
        }
    }
}

/// A policy's rules for one workspace, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The directories (and everything beneath them) a command may write;
    /// `None` when writes are not confined. Reading and executing are never
    /// confined.
    pub writable: Option<Vec<PathBuf>>,
    /// Whether TCP `connect` and `bind` are refused.
    pub deny_tcp: bool,
    /// Whether signals may reach only processes of the command's own
    /// Landlock domain (what it started): never the pod, its reaper, or
    /// any other process of the user's. Whenever the sandbox is on.
    pub scope_signals: bool,
    /// Whether connecting to an abstract Unix socket made outside the
    /// command's domain is refused: a second lock on the door the seccomp
    /// filter already shuts while `--sandbox-unix-sockets` is off.
    pub scope_abstract_sockets: bool,
}

impl Rules {
    fn is_empty(&self) -> bool {
        self.writable.is_none() && !self.deny_tcp && self.scopes().is_empty()
    }

    /// The Landlock scopes these rules ask for (ABI 6).
    fn scopes(&self) -> BitFlags<Scope> {
        let mut scopes = BitFlags::EMPTY;
        if self.scope_signals {
            scopes |= Scope::Signal;
        }
        if self.scope_abstract_sockets {
            scopes |= Scope::AbstractUnixSocket;
        }
        scopes
    }
}

/// The write rights Landlock confines. ABI 3 adds `Truncate`, without which
/// `truncate(2)` could still empty any file; later ABIs add rights this
/// policy does not mean to restrict (device ioctls, Unix socket paths).
fn write_access() -> BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V3)
}

/// Builds the Landlock ruleset for `writable` (if any), TCP (if denied)
/// and `scopes`. A directory that does not exist or cannot be opened gets
/// no rule, so it stays unwritable — the safe side.
fn build(
    writable: Option<&[PathBuf]>,
    deny_tcp: bool,
    scopes: BitFlags<Scope>,
) -> Result<RulesetCreated, RulesetError> {
    let mut ruleset = Ruleset::default();
    if writable.is_some() {
        ruleset = ruleset.handle_access(write_access())?;
    }
    if deny_tcp {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes)?;
    }
    let mut created = ruleset.create()?;
    for dir in writable.unwrap_or_default() {
        if !dir.is_dir() {
            continue;
        }
        match PathFd::new(dir) {
            Ok(fd) => {
                (&mut created).add_rule(PathBeneath::new(fd, write_access()))?;
            }
            Err(e) => tracing::warn!("sandbox: {} stays unwritable: {e}", dir.display()),
        }
    }
    Ok(created)
}

/// The policy, its rules for this workspace, and what the kernel enforces.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    rules: Rules,
    info: SandboxInfo,
    /// Writes are confined and the kernel enforces it.
    writes_confined: bool,
    /// Signals are scoped and the kernel enforces it (Landlock ABI 6).
    signals_scoped: bool,
    unavailable: Option<String>,
    /// A child pod confined to its git worktree ([`Sandbox::confined_to`]):
    /// its commands' own `$TMPDIR`, which replaces `/tmp` and the pod's.
    tmpdir: Option<PathBuf>,
}

impl Sandbox {
    /// Builds the rules for `workspace` (with the pod's `$TMPDIR`) and
    /// measures what this kernel enforces of them.
    pub fn new(policy: SandboxPolicy, workspace: &Path) -> Self {
        let tmpdir = std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from);
        let rules = policy.rules(workspace, tmpdir.as_deref());
        let enforced = if rules.is_empty() {
            Enforced {
                writes: true,
                network: true,
                signals: false,
                landlock: None,
            }
        } else {
            probe(&rules)
        };
        let rules_confine_writes = rules.writable.is_some();
        let writes_ok = !rules_confine_writes || enforced.writes;
        let network_ok = !rules.deny_tcp || enforced.network;
        let info = SandboxInfo {
            mode: policy.mode,
            available: writes_ok && network_ok,
            network: !(rules.deny_tcp && enforced.network),
        };
        let unavailable = (!info.available).then(|| {
            let mut missing = Vec::new();
            if !writes_ok {
                missing.push("confining writes needs Landlock ABI 3 (Linux 6.2)");
            }
            if !network_ok {
                missing.push("confining the network needs Landlock ABI 4 (Linux 6.7)");
            }
            format!(
                "the bash sandbox is not fully enforced: {}; {}",
                describe(enforced.landlock),
                missing.join(", ")
            )
        });
        Self {
            policy,
            signals_scoped: rules.scope_signals && enforced.signals,
            rules,
            info,
            writes_confined: rules_confine_writes && enforced.writes,
            unavailable,
            tmpdir: None,
        }
    }

    /// This sandbox for a child pod that works in a git worktree of its
    /// own: where a `workspace-write` pod's commands may write the
    /// workspace, `/tmp` and `$TMPDIR`, the child's may write only
    /// `writable` (its worktree and the git data a commit there writes)
    /// and `tmpdir`, which they get as `$TMPDIR` — and `/dev`, as ever.
    /// `/tmp` goes too because Landlock can only grant: a parent workspace
    /// under `/tmp` could not be kept read-only while `/tmp` is writable.
    /// A `read-only` or `off` sandbox is the parent's choice and stays as
    /// it is. What the kernel enforces was measured for the parent's rules,
    /// which confine the same kinds of access.
    pub fn confined_to(&self, writable: &[PathBuf], tmpdir: &Path) -> Self {
        if self.policy.mode != SandboxMode::WorkspaceWrite {
            return self.clone();
        }
        let mut dirs = writable.to_vec();
        dirs.push(tmpdir.to_path_buf());
        dirs.push(PathBuf::from("/dev"));
        let mut sandbox = self.clone();
        sandbox.rules.writable = Some(dirs);
        sandbox.tmpdir = Some(tmpdir.to_path_buf());
        sandbox
    }

    /// The `$TMPDIR` of a child pod confined to its worktree.
    pub fn tmpdir(&self) -> Option<&Path> {
        self.tmpdir.as_deref()
    }

    pub fn info(&self) -> SandboxInfo {
        self.info
    }

    /// What approvals need to know: `off` is the user's choice and asks
    /// nothing extra; otherwise whether the kernel enforces it all.
    pub fn gate(&self) -> SandboxGate {
        match (self.policy.mode, self.info.available) {
            (SandboxMode::Off, _) => SandboxGate::Off,
            (_, true) => SandboxGate::Enforced,
            (_, false) => SandboxGate::Unavailable,
        }
    }

    pub fn policy(&self) -> SandboxPolicy {
        self.policy
    }

    /// Why the sandbox is not available, for the user; `None` when it is.
    pub fn unavailable_reason(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// One line for the pod's start-up message.
    pub fn summary(&self) -> String {
        let state = if self.rules.is_empty() {
            "nothing confined"
        } else if self.info.available {
            "enforced"
        } else {
            "NOT enforced"
        };
        let network = if self.info.network { "on" } else { "off" };
        let sockets = if self.policy.allows_unix_sockets() {
            "on"
        } else {
            "off"
        };
        let signals = match (self.rules.scope_signals, self.signals_scoped) {
            (false, _) => "",
            (true, true) => ", signals confined",
            (true, false) => ", signals NOT confined: needs Landlock ABI 6, Linux 6.12",
        };
        format!(
            "sandbox {} ({state}, network {network}, unix sockets {sockets}{signals})",
            self.policy.mode.as_str()
        )
    }

    /// What a sandboxed tool process (a `bash` command, a background job)
    /// is confined by: the Landlock ruleset it applies before `exec` (none
    /// when the policy confines nothing) and the seccomp filter, for
    /// [`harden`](super::process::harden).
    pub fn confinement(&self) -> std::io::Result<Confinement> {
        let landlock = if self.rules.is_empty() {
            None
        } else {
            let ruleset = build(
                self.rules.writable.as_deref(),
                self.rules.deny_tcp,
                self.rules.scopes(),
            )
            .map_err(|e| {
                std::io::Error::other(format!(
                    "cannot prepare the sandbox: {e} (--sandbox off runs commands unconfined)"
                ))
            })?;
            Some(Prepared(ruleset))
        };
        Confinement::new(landlock, self.policy.allows_unix_sockets())
    }

    /// The line added to a `bash` result whose output shows a refused
    /// operation, so the model explains instead of retrying; `None` when the
    /// output shows none or the sandbox confines nothing here.
    pub(crate) fn refusal_note(&self, output: &str) -> Option<String> {
        const REFUSALS: [&str; 3] = [
            "Permission denied",
            "Read-only file system",
            "Operation not permitted",
        ];
        if !REFUSALS.iter().any(|r| output.contains(r)) {
            return None;
        }
        let what = match (self.policy.mode, self.writes_confined) {
            (SandboxMode::WorkspaceWrite, true) if self.tmpdir.is_some() => Some(
                "the pod's sandbox lets this agent's commands write only in its own git worktree \
                 (its workspace), the git data a commit there needs, its $TMPDIR and /dev; the \
                 parent's workspace and /tmp are read-only to it",
            ),
            (SandboxMode::WorkspaceWrite, true) => Some(
                "the pod's sandbox lets this command write only inside the workspace, /tmp (and \
                 $TMPDIR) and /dev; writing anywhere else fails with a permission error",
            ),
            (SandboxMode::ReadOnly, true) => Some(
                "the pod's sandbox is read-only: this command may write nowhere but /dev, the \
                 workspace included",
            ),
            _ => None,
        };
        let net = (!self.info.network).then_some("network connections are refused too");
        let mut said = match (what, net) {
            (Some(w), Some(n)) => format!("{w}; {n}"),
            (Some(w), None) => w.to_owned(),
            (None, Some(_)) => "the pod's sandbox refuses network connections".to_owned(),
            (None, None) => return None,
        };
        if self.signals_scoped {
            said.push_str(
                "; it may signal only processes it started itself (job_kill stops a background \
                 job)",
            );
        }
        Some(format!(
            "[sandbox: {said}. A permission error above may be the sandbox: retrying will not \
             help; tell the user, who can change --sandbox / --sandbox-network]"
        ))
    }
}

/// What a probe found the kernel enforcing.
struct Enforced {
    writes: bool,
    network: bool,
    /// Signals are scoped (the abstract-socket scope comes with the same
    /// ABI).
    signals: bool,
    landlock: Option<LandlockStatus>,
}

/// Applies the rules' three parts, one after the other, to a throwaway
/// thread: Landlock restricts only the calling thread, and each ruleset
/// reports its own enforcement, so the pod learns exactly what its children
/// will get without being confined itself.
fn probe(rules: &Rules) -> Enforced {
    let rules = rules.clone();
    let probe = std::thread::Builder::new()
        .name("sandbox-probe".into())
        .spawn(move || {
            let apply = |writable: Option<&[PathBuf]>, deny_tcp, scopes| {
                build(writable, deny_tcp, scopes).and_then(RulesetCreated::restrict_self)
            };
            let full = |status: &Result<RestrictionStatus, RulesetError>| {
                matches!(status, Ok(s) if s.ruleset == RulesetStatus::FullyEnforced)
            };
            let mut landlock = None;
            let writes = rules.writable.as_deref().is_some_and(|writable| {
                let status = apply(Some(writable), false, BitFlags::EMPTY);
                landlock = status.as_ref().ok().map(|s| s.landlock);
                full(&status)
            });
            let network = rules.deny_tcp && {
                let status = apply(None, true, BitFlags::EMPTY);
                landlock = landlock.or(status.as_ref().ok().map(|s| s.landlock));
                full(&status)
            };
            let signals = rules.scope_signals && full(&apply(None, false, rules.scopes()));
            Enforced {
                writes,
                network,
                signals,
                landlock,
            }
        });
    match probe.map(|handle| handle.join()) {
        Ok(Ok(enforced)) => enforced,
        _ => Enforced {
            writes: false,
            network: false,
            signals: false,
            landlock: None,
        },
    }
}

fn describe(status: Option<LandlockStatus>) -> String {
    match status {
        Some(LandlockStatus::NotImplemented) => {
            "this kernel has no Landlock (it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
                .into()
        }
        Some(LandlockStatus::NotEnabled) => {
            "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` \
             boot parameter)"
                .into()
        }
        Some(LandlockStatus::Available { effective_abi, .. }) => {
            format!("this kernel offers Landlock ABI {}", effective_abi as i32)
        }
        None => "Landlock could not be applied on this system".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(mode: SandboxMode, network: bool, tmpdir: Option<&str>) -> Rules {
        SandboxPolicy {
            mode,
            network,
            unix_sockets: false,
        }
        .rules(Path::new("/home/u/project"), tmpdir.map(Path::new))
    }

    fn paths(list: &[&str]) -> Option<Vec<PathBuf>> {
        Some(list.iter().map(PathBuf::from).collect())
    }

    #[test]
    fn workspace_write_allows_the_workspace_the_temp_dirs_and_dev() {
        assert_eq!(
            rules(SandboxMode::WorkspaceWrite, true, None),
            Rules {
                writable: paths(&["/home/u/project", "/tmp", "/dev"]),
                deny_tcp: false,
                scope_signals: true,
                scope_abstract_sockets: true,
            }
        );
        assert_eq!(
            rules(SandboxMode::WorkspaceWrite, false, Some("/var/tmp/u")),
            Rules {
                writable: paths(&["/home/u/project", "/tmp", "/var/tmp/u", "/dev"]),
                deny_tcp: true,
                scope_signals: true,
                scope_abstract_sockets: true,
            }
        );
        assert_eq!(
            rules(SandboxMode::WorkspaceWrite, true, Some("/tmp")).writable,
            paths(&["/home/u/project", "/tmp", "/dev"]),
            "a $TMPDIR of /tmp is not listed twice"
        );
    }

    #[test]
    fn read_only_allows_only_dev() {
        assert_eq!(
            rules(SandboxMode::ReadOnly, true, Some("/var/tmp/u")),
            Rules {
                writable: paths(&["/dev"]),
                deny_tcp: false,
                scope_signals: true,
                scope_abstract_sockets: true,
            }
        );
        assert!(rules(SandboxMode::ReadOnly, false, None).deny_tcp);
    }

    #[test]
    fn opened_unix_sockets_lift_the_abstract_socket_scope_but_never_the_signal_one() {
        let opened = SandboxPolicy {
            mode: SandboxMode::WorkspaceWrite,
            network: true,
            unix_sockets: true,
        }
        .rules(Path::new("/home/u/project"), None);
        assert!(opened.scope_signals);
        assert!(!opened.scope_abstract_sockets);
        assert_eq!(opened.scopes(), BitFlags::from(Scope::Signal));
    }

    #[test]
    fn off_confines_nothing_but_the_network_when_asked() {
        let off = rules(SandboxMode::Off, true, Some("/var/tmp/u"));
        assert_eq!(
            off,
            Rules {
                writable: None,
                deny_tcp: false,
                scope_signals: false,
                scope_abstract_sockets: false,
            }
        );
        assert!(off.is_empty());
        assert_eq!(
            rules(SandboxMode::Off, false, None),
            Rules {
                writable: None,
                deny_tcp: true,
                scope_signals: false,
                scope_abstract_sockets: false,
            }
        );
    }

    #[test]
    fn nothing_asked_is_trivially_available_and_the_network_open() {
        let sandbox = Sandbox::new(
            SandboxPolicy {
                mode: SandboxMode::Off,
                network: true,
                unix_sockets: false,
            },
            Path::new("/"),
        );
        assert_eq!(
            sandbox.info(),
            SandboxInfo {
                mode: SandboxMode::Off,
                available: true,
                network: true,
            }
        );
        assert_eq!(sandbox.refusal_note("touch: Permission denied"), None);
        assert_eq!(sandbox.gate(), SandboxGate::Off);
    }

    #[test]
    fn a_worktree_child_may_write_its_worktree_and_tmpdir_but_neither_the_workspace_nor_tmp() {
        let policy = |mode| SandboxPolicy {
            mode,
            network: true,
            unix_sockets: false,
        };
        let writable = [
            PathBuf::from("/d/worktrees/c.w"),
            PathBuf::from("/r/.git/objects"),
        ];
        let tmp = Path::new("/d/worktrees/c.w.tmp");
        let child = Sandbox::new(policy(SandboxMode::WorkspaceWrite), Path::new("/r"))
            .confined_to(&writable, tmp);
        assert_eq!(
            child.rules.writable,
            paths(&[
                "/d/worktrees/c.w",
                "/r/.git/objects",
                "/d/worktrees/c.w.tmp",
                "/dev"
            ])
        );
        assert_eq!(child.tmpdir(), Some(tmp));
        for mode in [SandboxMode::ReadOnly, SandboxMode::Off] {
            let parent = Sandbox::new(policy(mode), Path::new("/r"));
            let child = parent.confined_to(&writable, tmp);
            assert_eq!(child.rules, parent.rules, "{mode:?} stays the parent's");
            assert_eq!(child.tmpdir(), None);
        }
    }

    #[test]
    fn the_flag_spells_the_mode_as_the_wire_does() {
        use clap::ValueEnum;
        let names: Vec<String> = SandboxMode::value_variants()
            .iter()
            .map(|mode| {
                let name = mode.to_possible_value().unwrap().get_name().to_owned();
                assert_eq!(serde_json::to_value(mode).unwrap(), serde_json::json!(name));
                name
            })
            .collect();
        assert_eq!(names, ["workspace-write", "read-only", "off"]);
    }
}
