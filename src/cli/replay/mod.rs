//! `pod replay SESSION`: re-run a recorded session and report **drift** — a
//! tool result that differs from the recorded one (`cli.md`, "Headless
//! runs and replay"; docs/headless.md).
//!
//! The recorded session's log holds every model reply, so the replay needs
//! no model: its replies become a script for the `script` provider, one
//! line per model call, in order ([`recording::Recording::script`]). The files come
//! from the session's first checkpoint, restored into a scratch directory
//! (`--workspace DIR`, else a fresh temporary one; never the live
//! workspace). A pod this process hosts ([`crate::pod::embedded`]) runs there
//! with those replies: each recorded user input is sent again as a `run`,
//! every tool runs for real, and each tool result is compared with the
//! recorded one. Approval requests are answered as the recording answered
//! them. The replayed session is a session like any other, whose
//! `session_start` names the one it replays (`replay_of`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use uuid::Uuid;

mod drive;
mod recording;

use super::args::ReplayArgs;
use super::connect::exit;
use super::{ConfigFile, Paths};
use crate::protocol::LogLine;

/// The label this connection gives itself (`approval_decision.client`).
const CLIENT: &str = "pod replay";

pub fn run(
    paths: &Paths,
    args: ReplayArgs,
    config: ConfigFile,
    scratch_given: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let sessions_dir = paths.data_dir.join("sessions");
    let session_id = match crate::store::sessions::resolve(&sessions_dir, &args.recorded) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("pod: {e}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    let log_path = crate::store::LogFile::path_for(&sessions_dir, session_id);
    let lines = read_log(&log_path)?;
    let recording = recording::Recording::from_log(&lines, args.until_seq);
    let Some(checkpoint) = recording.first_checkpoint.clone() else {
        eprintln!(
            "pod: session {session_id} has no checkpoint{}: its files' starting state was never \
             recorded (no turn of it ran a tool that may change files), so it cannot be replayed",
            match args.until_seq {
                Some(n) => format!(" up to seq {n}"),
                None => String::new(),
            }
        );
        return Ok(ExitCode::from(exit::USAGE));
    };
    if recording.turns.is_empty() {
        eprintln!("pod: session {session_id} has no user input to replay");
        return Ok(ExitCode::from(exit::USAGE));
    }
    let scratch = match Scratch::prepare(scratch_given, recording.workspace.as_deref()) {
        Ok(scratch) => scratch,
        Err(why) => {
            eprintln!("pod: {why}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    let restored = restore(paths, &scratch.dir, &checkpoint, &args.serve);
    if let Err(e) = restored {
        scratch.discard();
        eprintln!("pod: cannot restore the session's first checkpoint {checkpoint}: {e:#}");
        return Ok(ExitCode::from(exit::FAILED));
    }
    let script_path =
        std::env::temp_dir().join(format!("pod-replay-{}.jsonl", Uuid::new_v4().simple()));
    crate::private::file_options()
        .create_new(true)
        .write(true)
        .open(&script_path)
        .and_then(|mut f| f.write_all(recording.script().as_bytes()))
        .with_context(|| format!("cannot write {}", script_path.display()))?;
    let outcome = replay(
        paths,
        args,
        config,
        &scratch,
        &recording,
        session_id,
        &script_path,
    );
    let _ = std::fs::remove_file(&script_path);
    outcome
}

fn read_log(path: &Path) -> anyhow::Result<Vec<LogLine>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(parsed) => lines.push(parsed),
            // A torn last line (a crash mid-write) ends the log.
            Err(_) if i + 1 == text.lines().count() => break,
            Err(e) => anyhow::bail!("{}:{}: not a log line: {e}", path.display(), i + 1),
        }
    }
    Ok(lines)
}

fn replay(
    paths: &Paths,
    args: ReplayArgs,
    config: ConfigFile,
    scratch: &Scratch,
    recording: &recording::Recording,
    recorded_id: Uuid,
    script: &Path,
) -> anyhow::Result<ExitCode> {
    let fork = args.fork;
    let mut serve = args.serve;
    serve.provider = Some(crate::provider::ProviderKind::Script);
    serve.script = Some(script.to_path_buf());
    let base = super::derived_name(&scratch.dir);
    // With --fork the replay is the scratch workspace's own pod's session,
    // which plain `pod` there goes on from; without, a private name leaves
    // no pod's current session changed.
    let name = if fork {
        base
    } else {
        format!(
            "{base}.replay-{}",
            &Uuid::new_v4().simple().to_string()[..8]
        )
    };
    let socket = paths.socket_dir.join(format!("{name}.sock"));
    let private = Paths {
        name,
        name_given: true,
        socket: socket.clone(),
        socket_in_default_dir: true,
        endpoint: crate::client::Endpoint::Socket(socket),
        workspace: scratch.dir.clone(),
        ..paths.clone()
    };
    let mut pod_config = match super::serve::serve_config(&private, serve, config, false) {
        Ok(Ok(pod_config)) => pod_config,
        Ok(Err(code)) => return Ok(code),
        Err(e) => {
            eprintln!("pod: the replay's pod cannot start: {e:#}");
            return Ok(ExitCode::from(exit::NO_POD));
        }
    };
    pod_config.new_session = true;
    pod_config.session = None;
    pod_config.replay_of = Some(recorded_id);
    // Only the recorded replies may answer: a compaction would spend one
    // on a summary.
    pod_config.thresholds.context_window = u64::MAX / 2;
    let pod = crate::pod::embedded::start(pod_config)?;
    let ran = super::runtime()?.block_on(drive::drive(&pod, recording));
    let pod_name = pod.name().to_owned();
    let stopped = pod.stop();
    let report = match (ran, stopped) {
        (Ok(Some(report)), _) => report,
        (Ok(None) | Err(_), Err(e)) => {
            scratch.discard();
            eprintln!("pod: the replay's pod did not start: {e:#}");
            return Ok(ExitCode::from(exit::NO_POD));
        }
        (Ok(None), Ok(())) => {
            scratch.discard();
            eprintln!("pod: the replay's pod stopped before it took the first input");
            return Ok(ExitCode::from(exit::DETACHED));
        }
        (Err(e), Ok(())) => {
            scratch.discard();
            return Err(e);
        }
    };
    let drifted = !report.drifts.is_empty();
    report.print(recorded_id, recording)?;
    if fork {
        println!(
            "the replayed session {} is the current session of the pod of {}: `pod --workspace \
             {}` goes on from it",
            report.session_id,
            scratch.dir.display(),
            scratch.dir.display()
        );
    } else if scratch.temporary {
        scratch.discard();
    } else {
        eprintln!(
            "pod: the replayed session is {} (`{}` prints it)",
            report.session_id,
            private.command_for(Some(&pod_name), "log")
        );
    }
    Ok(ExitCode::from(if drifted { exit::FAILED } else { 0 }))
}

/// Restores checkpoint `id` into the empty directory `dir`, from the data
/// directory's checkpoint store.
fn restore(
    paths: &Paths,
    dir: &Path,
    id: &str,
    serve: &super::args::ServeArgs,
) -> anyhow::Result<()> {
    let store = crate::checkpoint::Checkpoints::open(
        &paths.data_dir,
        dir,
        serve.checkpoint_max_file_bytes,
        serve.checkpoint_store_bytes,
    )?;
    let target = store.manifest(id)?;
    let files: Vec<String> = target.files.keys().cloned().collect();
    let outcome = crate::checkpoint::restore::restore(
        &store,
        &target,
        &crate::checkpoint::Manifest::default(),
        &files,
    );
    if let Some(first) = outcome.not_restored.first() {
        anyhow::bail!(
            "{} of its files could not be restored, the first {}: {}",
            outcome.not_restored.len(),
            first.path,
            first.reason
        );
    }
    Ok(())
}

/// Where the replay runs.
struct Scratch {
    dir: PathBuf,
    /// Made for this replay (no `--workspace`): removed after it unless
    /// `--fork` keeps it.
    temporary: bool,
}

impl Scratch {
    /// `given` (which must be empty or not exist, and not be the recorded
    /// workspace), else a new private temporary directory.
    fn prepare(given: Option<PathBuf>, live: Option<&str>) -> Result<Scratch, String> {
        let Some(dir) = given else {
            let dir = std::env::temp_dir().join(format!(
                "pod-replay-{}",
                &Uuid::new_v4().simple().to_string()[..12]
            ));
            crate::private::create_dir(&dir, true)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let dir = dir.canonicalize().unwrap_or(dir);
            return Ok(Scratch {
                dir,
                temporary: true,
            });
        };
        if !dir.exists() {
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("--workspace {}: cannot create it: {e}", dir.display()))?;
        }
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("--workspace {}: {e}", dir.display()))?;
        if live.is_some_and(|live| Path::new(live) == dir) {
            return Err(format!(
                "--workspace {} is the recorded session's own workspace: a replay restores old \
                 files and runs tools, so it never runs there. Give an empty directory, or none \
                 for a temporary one",
                dir.display()
            ));
        }
        let empty = std::fs::read_dir(&dir)
            .map_err(|e| format!("--workspace {}: {e}", dir.display()))?
            .next()
            .is_none();
        if !empty {
            return Err(format!(
                "--workspace {} is not empty: the replay restores the session's files into it, \
                 and other files would change what its tools see. Give an empty or new directory",
                dir.display()
            ));
        }
        Ok(Scratch {
            dir,
            temporary: false,
        })
    }

    fn discard(&self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
