//! `pod exec`: one task run to its end in a private pod, for scripts, CI
//! and benchmark harnesses (`cli.md`, "Headless runs and replay";
//! docs/headless.md).
//!
//! The pod is an ordinary one — built from the `serve` flags as `pod serve`
//! builds its own, with a fresh session in the usual data directory — that
//! this process hosts ([`crate::pod::embedded`]) under the name
//! `<workspace pod>.exec-<8 hex>` and stops when the run ends. This module
//! is its client: it sends the task as one `run`, follows that turn's
//! frames as `pod send` does, and ends the run itself when `--timeout` or
//! `--max-tokens` is reached (by cancelling the turn, so a running tool is
//! killed and its result says so). Nobody answers approvals here: the pod's
//! policy denies what would ask ([`crate::approval::Policy::never_ask`]).

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;

mod follow;

use super::args::ExecArgs;
use super::connect::exit;
use super::{ConfigFile, Paths};
use crate::protocol::{ExecResult, ExecResultType, TurnEndReason, TurnError, TurnErrorCode, Usage};
use crate::safe_text;

/// `--timeout` or `--max-tokens` ended the run.
pub const LIMIT: u8 = 6;

/// The label this connection gives itself (`approval_decision.client`).
const CLIENT: &str = "pod exec";

pub fn run(paths: &Paths, args: ExecArgs, config: ConfigFile) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if paths.is_remote() {
        eprintln!(
            "pod: `pod exec` runs its own pod on this machine; --url (or POD_URL) does not apply"
        );
        return Ok(ExitCode::from(exit::USAGE));
    }
    let Some(task) = read_task(args.task.as_deref())? else {
        eprintln!(
            "pod: no task: give it as an argument (`pod exec \"fix the tests\"`) or on stdin \
             (`pod exec - < task.md`); the task was empty"
        );
        return Ok(ExitCode::from(exit::USAGE));
    };
    if let Some(file) = &args.emit_patch {
        if let Some(why) = unwritable(file) {
            eprintln!("pod: --emit-patch {}: {why}", file.display());
            return Ok(ExitCode::from(exit::USAGE));
        }
    }
    let private = private_paths(paths);
    let mut pod_config = match super::serve::serve_config(&private, args.serve, config, false) {
        Ok(Ok(pod_config)) => pod_config,
        Ok(Err(code)) => return Ok(code),
        Err(e) => return not_started(e),
    };
    pod_config.new_session = true;
    pod_config.session = None;
    pod_config.never_ask = true;
    let options = Options {
        json: args.json,
        emit_patch: args.emit_patch,
        timeout: args.timeout.map(Duration::from_secs),
        max_tokens: args.max_tokens,
        started,
    };
    let pod = crate::pod::embedded::start(pod_config)?;
    let ran = super::runtime()?.block_on(follow::drive(&pod, task, &options));
    let name = pod.name().to_owned();
    let stopped = pod.stop();
    if stopped.is_ok() {
        forget_private_pod(&paths.data_dir.join("pods"), &name);
    }
    let run = match (ran, stopped) {
        (Ok(Some(run)), _) => run,
        // The pod never answered: its own error says why.
        (Ok(None), Err(e)) | (Err(_), Err(e)) => return not_started(e),
        (Ok(None), Ok(())) => {
            eprintln!("pod: the private pod {name:?} stopped before it took the task");
            return Ok(ExitCode::from(exit::DETACHED));
        }
        (Err(e), Ok(())) => return Err(e),
    };
    // The command that prints the log, with the data directory when it is
    // not the default one: a harness gives its own, and the hint must work.
    run.report(&options, &private.command("log"))
}

/// Removes what the stopped private pod kept in `<data-dir>/pods/` for a
/// restart that never comes — its lock, its socket record (`pod list`
/// would show it forever) and its job ids — and keeps only its state file,
/// which is how `pod log --name NAME` finds the run's session.
fn forget_private_pod(pods_dir: &std::path::Path, name: &str) {
    let leftovers = [
        crate::store::pod_lock::PodLock::path(pods_dir, name),
        crate::store::pod_socket::path(pods_dir, name),
        pods_dir.join(format!("{name}.jobs")),
    ];
    for file in leftovers {
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot remove {}: {e}", file.display()),
        }
    }
}

/// A pod that failed to start: bad usage when it refused the flags' name or
/// session, else exit 3 with its reason, as `pod send` says of a pod it
/// could not start.
fn not_started(e: anyhow::Error) -> anyhow::Result<ExitCode> {
    match super::serve::started(Err(e)) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("pod: the private pod did not start: {e:#}");
            Ok(ExitCode::from(exit::NO_POD))
        }
    }
}

/// The task: the argument, or stdin for `-` (or for nothing, when stdin is
/// not a terminal). `None` when it is empty.
fn read_task(given: Option<&str>) -> anyhow::Result<Option<String>> {
    let from_stdin = match given {
        Some("-") => true,
        Some(_) => false,
        None => !std::io::stdin().is_terminal(),
    };
    let task = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the task from stdin")?;
        text
    } else {
        given.unwrap_or_default().to_owned()
    };
    Ok((!task.trim().is_empty()).then_some(task))
}

/// Why `--emit-patch FILE` could not be written, found before the run
/// spends anything: its directory does not exist, or it is a directory.
fn unwritable(file: &Path) -> Option<String> {
    if file.is_dir() {
        return Some("is a directory; give the path of a file to write".into());
    }
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty())?;
    (!dir.is_dir()).then(|| format!("the directory {} does not exist", dir.display()))
}

/// The private pod's name and socket: `<workspace pod>.exec-<8 hex>`, its
/// socket beside every pod's.
fn private_paths(paths: &Paths) -> Paths {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("{}.exec-{}", paths.name, &id[..8]);
    let socket = paths.socket_dir.join(format!("{name}.sock"));
    Paths {
        name,
        name_given: true,
        socket: socket.clone(),
        socket_in_default_dir: true,
        endpoint: crate::client::Endpoint::Socket(socket),
        ..paths.clone()
    }
}

struct Options {
    json: bool,
    emit_patch: Option<PathBuf>,
    timeout: Option<Duration>,
    max_tokens: Option<u64>,
    started: Instant,
}

/// Which limit ended the run.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Timeout(Duration),
    Budget(u64),
}

impl Limit {
    fn error(self) -> TurnError {
        match self {
            Limit::Timeout(after) => TurnError {
                code: TurnErrorCode::Timeout,
                message: format!(
                    "the run took longer than --timeout {} s: its turn was cancelled",
                    after.as_secs()
                ),
            },
            Limit::Budget(tokens) => TurnError {
                code: TurnErrorCode::Budget,
                message: format!(
                    "the run's model calls used {tokens} tokens or more (--max-tokens \
                     {tokens}): its turn was cancelled; raise --max-tokens for a longer run"
                ),
            },
        }
    }
}

/// How the run ended, and what it made.
struct Ran {
    /// `None` when the run never got a `turn_end`: refused, or the pod was lost.
    end: Option<TurnEndReason>,
    error: Option<TurnError>,
    limit: Option<Limit>,
    session_id: uuid::Uuid,
    usage: Usage,
    text: String,
    /// Where the patch was written, if it was.
    patch: Option<PathBuf>,
    /// The exit code when the run never ended its turn.
    lost: Option<u8>,
    duration: Duration,
}

impl Ran {
    fn reason(&self) -> TurnEndReason {
        match (self.limit, self.end) {
            (None, Some(reason)) => reason,
            // A limit ended it, or it was refused or lost before its end.
            _ => TurnEndReason::Error,
        }
    }

    fn exit_code(&self) -> u8 {
        if self.limit.is_some() {
            return LIMIT;
        }
        if let Some(code) = self.lost {
            return code;
        }
        match self.end {
            Some(TurnEndReason::Completed) => 0,
            Some(TurnEndReason::Cancelled) => exit::CANCELLED,
            _ => exit::FAILED,
        }
    }

    /// Prints the outcome; `log_command` is the command that prints the run's log.
    fn report(self, options: &Options, log_command: &str) -> anyhow::Result<ExitCode> {
        let mut stdout = std::io::stdout().lock();
        let written = if options.json {
            let line = ExecResult {
                kind: ExecResultType::Result,
                reason: self.reason(),
                error: self.error.clone(),
                session_id: self.session_id,
                usage: self.usage,
                duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
                text: self.text.clone(),
                patch: self.patch.as_ref().map(|p| p.display().to_string()),
            };
            writeln!(stdout, "{}", serde_json::to_string(&line)?)
        } else if self.text.is_empty() {
            Ok(())
        } else {
            writeln!(stdout, "{}", self.text.trim_end_matches('\n'))
        };
        // Whoever read the output went away (`pod exec … | head`): the run
        // is over anyway, and its exit code still says how it went.
        if let Err(e) = written.and_then(|()| stdout.flush()) {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e.into());
            }
        }
        if let Some(error) = &self.error {
            eprintln!(
                "pod: the run ended with {}: {}",
                code_name(error.code),
                safe_text::lines(&error.message)
            );
        } else if let Some(reason @ (TurnEndReason::Cancelled | TurnEndReason::MaxSteps)) = self.end
        {
            eprintln!("pod: the run ended {}", reason.as_str());
        }
        eprintln!(
            "pod: the run's log is session {} (`{log_command}` prints it)",
            self.session_id
        );
        Ok(ExitCode::from(self.exit_code()))
    }
}

/// The wire name of a turn error's code (`timeout`, `provider_http`, …).
fn code_name(code: TurnErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "other".into())
}
