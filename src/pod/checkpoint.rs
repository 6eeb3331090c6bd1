//! When a turn takes checkpoints, and what a `rewind` does.
//!
//! A turn takes one just before its first call that may change files runs
//! (`turn_start`) and one just before its `turn_end` if it took the first
//! (`turn_end`); a rewind takes one of the state it is about to change
//! (`rewind`). Each is a `checkpoint` entry; the files are read and stored
//! on the blocking pool (`crate::checkpoint`), never on this thread. A
//! checkpoint that cannot be taken is committed with `checkpoint: null`
//! and the error, and the turn goes on.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use uuid::Uuid;

use super::job::{commit, JobEnv};
use super::session_log::{StorageError, Switch, SwitchTo};
use crate::checkpoint::{diff, restore, Checkpoints, Manifest};
use crate::context::Conversation;
use crate::protocol::{CheckpointReason, ErrorCode, LogEntry, NotRestored, RestoredFile};

/// Whether a call of `tool` may change files: its definition says so
/// ([`Effect::changes_files`](crate::tools::registry::Effect::changes_files)),
/// and a tool with none (an MCP server's) may.
pub fn changes_files(tool: &str) -> bool {
    crate::tools::registry::effect(tool).changes_files()
}

/// Whether the open turn already took its `turn_start` checkpoint.
fn turn_checkpointed(entries: &[LogEntry]) -> bool {
    for entry in entries.iter().rev() {
        match entry {
            LogEntry::Checkpoint {
                reason: CheckpointReason::TurnStart,
                ..
            } => return true,
            LogEntry::UserInput { .. } | LogEntry::TurnEnd { .. } => return false,
            _ => {}
        }
    }
    false
}

/// Takes the turn's `turn_start` checkpoint before a call of `tool` runs,
/// if it may change files and the turn has none yet.
pub async fn before_call(
    env: &JobEnv,
    conversation: &mut Conversation,
    tool: &str,
) -> Result<(), StorageError> {
    if !changes_files(tool) || turn_checkpointed(conversation.entries()) {
        return Ok(());
    }
    let entry = take(env, conversation, CheckpointReason::TurnStart).await;
    commit(env, conversation, entry).await.map(drop)
}

/// Takes the `turn_end` checkpoint of a turn that took a `turn_start` one.
pub async fn before_turn_end(
    env: &JobEnv,
    conversation: &mut Conversation,
) -> Result<(), StorageError> {
    if !turn_checkpointed(conversation.entries()) {
        return Ok(());
    }
    let entry = take(env, conversation, CheckpointReason::TurnEnd).await;
    commit(env, conversation, entry).await.map(drop)
}

/// What the files were last known to be: the latest checkpoint, with what a
/// rewind since put back laid over it.
#[derive(Clone)]
enum Baseline {
    None,
    Checkpoint(String),
    /// `before`, with `paths` as in `target`.
    Rewound {
        before: String,
        target: Option<String>,
        paths: Vec<String>,
    },
}

fn baseline(entries: &[LogEntry]) -> Baseline {
    for entry in entries.iter().rev() {
        match entry {
            LogEntry::Checkpoint {
                checkpoint: Some(id),
                ..
            } => return Baseline::Checkpoint(id.clone()),
            LogEntry::Rewind {
                checkpoint,
                checkpoint_before: Some(before),
                files_restored,
                ..
            } => {
                return Baseline::Rewound {
                    before: before.clone(),
                    target: checkpoint.clone(),
                    paths: files_restored.iter().map(|f| f.path.clone()).collect(),
                }
            }
            _ => {}
        }
    }
    Baseline::None
}

fn baseline_manifest(store: &Checkpoints, baseline: &Baseline) -> Option<Manifest> {
    match baseline {
        Baseline::None => None,
        Baseline::Checkpoint(id) => store.manifest(id).ok(),
        Baseline::Rewound {
            before,
            target,
            paths,
        } => {
            let mut manifest = store.manifest(before).ok()?;
            let target = match target {
                Some(t) => store.manifest(t).ok()?,
                None => Manifest::default(),
            };
            for path in paths {
                match target.files.get(path) {
                    Some(node) => manifest.files.insert(path.clone(), node.clone()),
                    None => manifest.files.remove(path),
                };
            }
            Some(manifest)
        }
    }
}

/// A checkpoint taken on the blocking pool, and the manifest it holds.
struct Taken {
    entry: LogEntry,
    manifest: Option<Arc<Manifest>>,
}

async fn take(env: &JobEnv, conversation: &Conversation, reason: CheckpointReason) -> LogEntry {
    take_full(env, conversation, reason).await.entry
}

async fn take_full(env: &JobEnv, conversation: &Conversation, reason: CheckpointReason) -> Taken {
    let failed = |error: String| Taken {
        entry: LogEntry::Checkpoint {
            checkpoint: None,
            error: Some(error),
            reason,
            changes: Vec::new(),
            skipped: Vec::new(),
            skipped_more: None,
            at: LogEntry::now(),
        },
        manifest: None,
    };
    let store = match env.checkpoints.store() {
        Ok(store) => store,
        Err(e) => return failed(format!("the checkpoint store could not be opened: {e}")),
    };
    let baseline = baseline(conversation.entries());
    let needed = env.checkpoints.known();
    let done = tokio::task::spawn_blocking(move || {
        let taken = store.take()?;
        let changes = match baseline_manifest(&store, &baseline) {
            Some(old) => {
                let read = |_: &str, n: &crate::checkpoint::Node| store.content(n);
                diff::changes(&old, &taken.manifest, &read, &read)
            }
            None => Vec::new(),
        };
        let mut needed = needed;
        needed.push(taken.id.clone());
        if let Err(e) = store.prune(&needed) {
            tracing::warn!("pruning the checkpoint store: {e}");
        }
        Ok::<_, std::io::Error>((taken, changes))
    })
    .await;
    match done {
        Ok(Ok((taken, changes))) => {
            env.checkpoints.know(&taken.id);
            env.checkpoints
                .show(changes.iter().map(|change| change.path.clone()));
            let (skipped, skipped_more) = taken.manifest.skipped_for_entry();
            Taken {
                entry: LogEntry::Checkpoint {
                    checkpoint: Some(taken.id),
                    error: None,
                    reason,
                    changes,
                    skipped,
                    skipped_more,
                    at: LogEntry::now(),
                },
                manifest: Some(taken.manifest),
            }
        }
        Ok(Err(e)) => failed(format!("the checkpoint could not be stored: {e}")),
        Err(e) => failed(format!("the checkpoint failed: {e}")),
    }
}

/// Every checkpoint id the entries name (what a client may ask about).
pub fn ids(entries: &[LogEntry]) -> impl Iterator<Item = String> + '_ {
    entries.iter().flat_map(|entry| {
        let ids: Vec<String> = match entry {
            LogEntry::Checkpoint {
                checkpoint: Some(id),
                ..
            } => vec![id.clone()],
            LogEntry::Rewind {
                checkpoint,
                checkpoint_before,
                ..
            } => checkpoint
                .iter()
                .chain(checkpoint_before)
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        ids
    })
}

/// Every path the entries' checkpoints list as changed: the files the
/// conversation showed.
pub fn shown_paths(entries: &[LogEntry]) -> impl Iterator<Item = String> + '_ {
    entries.iter().flat_map(|entry| match entry {
        LogEntry::Checkpoint { changes, .. } => {
            changes.iter().map(|change| change.path.clone()).collect()
        }
        _ => Vec::new(),
    })
}

/// A `rewind` as a client asked for it.
#[derive(Debug, Clone)]
pub struct RewindRequest {
    pub before_seq: Option<u64>,
    pub session_id: Option<String>,
    pub checkpoint: Option<String>,
    pub files: bool,
    pub conversation: Option<bool>,
    pub force: bool,
    pub kill_jobs: bool,
    /// A rewind that would leave a conflict changes nothing at all (no
    /// file, no conversation, no entry) and only names the conflicts: so
    /// `pod undo` never rewinds the conversation while leaving the files,
    /// and its `--force` hint targets the same message again.
    pub abort_on_conflict: bool,
}

/// What a rewind did, for its `response`.
pub struct Rewound {
    pub session_id: Uuid,
    pub files_restored: Vec<RestoredFile>,
    pub conflicts: Vec<String>,
    pub not_restored: Vec<NotRestored>,
    /// Processes tools left running, killed before any file was restored.
    pub processes_stopped: Vec<u32>,
    /// The conversation moved to this session (with its entries).
    pub switched: Option<super::session_log::switch::NewSession>,
}

/// Why a rewind did nothing.
pub struct Refused {
    pub code: ErrorCode,
    pub message: String,
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> Refused {
    Refused {
        code,
        message: message.into(),
    }
}

/// What to restore: the target state and the paths to put back to it,
/// and the paths left alone because they changed by hand too.
#[derive(Clone)]
struct Plan {
    target: Option<String>,
    paths: Vec<String>,
    /// Paths changed outside a turn since the target (conflicts unless
    /// `force`), and the last `turn_end` state to compare the workspace now
    /// with.
    hand_changed: BTreeSet<String>,
    last_turn_end: Option<String>,
}

/// Finds the target and the paths of a `before_seq` rewind in `entries`
/// (those of the session the seq is in, which is the current one).
fn plan_before(entries: &[LogEntry], before_seq: u64) -> Result<Plan, Refused> {
    let at = usize::try_from(before_seq).unwrap_or(usize::MAX);
    if !matches!(entries.get(at), Some(LogEntry::UserInput { .. })) {
        return Err(refuse(
            ErrorCode::InvalidParams,
            format!("entry {before_seq} is not a user_input of the session"),
        ));
    }
    let mut target = None;
    let mut paths = BTreeSet::new();
    let mut hand_changed = BTreeSet::new();
    let mut last_turn_end = None;
    for entry in &entries[at..] {
        let LogEntry::Checkpoint {
            checkpoint,
            reason,
            changes,
            ..
        } = entry
        else {
            continue;
        };
        match reason {
            // A turn whose checkpoint failed gives no target: the next does.
            CheckpointReason::TurnStart if target.is_none() => target = checkpoint.clone(),
            CheckpointReason::TurnStart => {
                hand_changed.extend(changes.iter().map(|c| c.path.clone()))
            }
            CheckpointReason::TurnEnd if target.is_some() => {
                paths.extend(changes.iter().map(|c| c.path.clone()));
                if checkpoint.is_some() {
                    last_turn_end = checkpoint.clone();
                }
            }
            _ => {}
        }
    }
    Ok(Plan {
        target,
        paths: paths.into_iter().collect(),
        hand_changed,
        last_turn_end,
    })
}

/// Carries out a `rewind`: plans it, takes the `rewind` checkpoint, restores,
/// and commits the checkpoint and the `rewind` entry — into a fork before
/// the message when the conversation is rewound too, announced only once
/// both are durable.
pub async fn rewind(
    env: &JobEnv,
    conversation: &mut Conversation,
    request: RewindRequest,
) -> Result<Rewound, Refused> {
    let by_seq = match (&request.before_seq, &request.checkpoint) {
        (Some(seq), None) => Some(*seq),
        (None, Some(_)) => None,
        _ => {
            return Err(refuse(
                ErrorCode::InvalidParams,
                "give exactly one of `before_seq` and `checkpoint`",
            ))
        }
    };
    if by_seq.is_none() && request.conversation == Some(true) {
        return Err(refuse(
            ErrorCode::InvalidParams,
            "`conversation` goes with `before_seq` only: a checkpoint rewinds files",
        ));
    }
    let rewind_conversation = by_seq.is_some() && request.conversation.unwrap_or(true);
    if let Some(id) = &request.session_id {
        let current = conversation.session_id.to_string();
        if !current.starts_with(id.as_str()) || id.len() < 4 {
            return Err(refuse(
                ErrorCode::InvalidParams,
                format!(
                    "session {id:?} is not the current session: this pod rewinds within the \
                     current session only"
                ),
            ));
        }
    }
    let plan = match (by_seq, &request.checkpoint) {
        (Some(seq), _) => plan_before(conversation.entries(), seq)?,
        (None, Some(id)) => {
            if !env.checkpoints.knows(id) {
                return Err(refuse(
                    ErrorCode::CheckpointNotFound,
                    format!("{id:?} is not a checkpoint of this conversation"),
                ));
            }
            Plan {
                target: Some(id.clone()),
                paths: Vec::new(),
                hand_changed: BTreeSet::new(),
                last_turn_end: None,
            }
        }
        (None, None) => unreachable!("checked above"),
    };
    let target = plan.target.clone();
    // A running job could write the files back as they are restored.
    if request.files && env.toolbox.jobs().running() > 0 {
        if !request.kill_jobs {
            return Err(refuse(
                ErrorCode::JobsRunning,
                "background jobs are running: stop them first, or rewind with kill_jobs",
            ));
        }
        env.toolbox.jobs().kill_all().await;
    }
    let mut processes_stopped = Vec::new();
    let mut before = None;
    let mut outcome = restore::Outcome::default();
    let mut conflicts = Vec::new();
    let mut checkpoint_entry = None;
    if request.files && plan.target.is_some() {
        let target_id = plan.target.clone().unwrap_or_default();
        let force = request.force;
        // So does a daemon a command left (the pod adopted it): it may be
        // rewriting a file in a loop, or swapping a directory for a link;
        // it is stopped before the state before the rewind is taken. But a
        // rewind refused for its conflicts changes nothing, those processes
        // included: then they are stopped only once it is known to go on.
        if !request.abort_on_conflict {
            processes_stopped = stop_adopted(env).await;
        }
        let mut taken = take_and_choose(env, conversation, &plan, force).await?;
        if request.abort_on_conflict {
            if taken.chosen.conflicts.is_empty() {
                processes_stopped = stop_adopted(env).await;
                // They may have written since: take the state again.
                if !processes_stopped.is_empty() {
                    taken = take_and_choose(env, conversation, &plan, force).await?;
                }
            }
            // Nothing was touched and nothing is committed: the answer
            // names the conflicts, the session stays as it is.
            if !taken.chosen.conflicts.is_empty() {
                return Ok(Rewound {
                    session_id: conversation.session_id,
                    files_restored: Vec::new(),
                    conflicts: taken.chosen.conflicts,
                    not_restored: Vec::new(),
                    processes_stopped,
                    switched: None,
                });
            }
        }
        let TakenAndChosen {
            id,
            entry,
            now,
            chosen,
        } = taken;
        before = Some(id.clone());
        checkpoint_entry = Some(entry);
        let store = env
            .checkpoints
            .store()
            .map_err(|e| refuse(ErrorCode::StorageError, e))?;
        let journal = crate::checkpoint::Journal {
            before: id,
            target: target_id,
        };
        let restored = tokio::task::spawn_blocking(move || {
            store
                .begin_rewind(&journal)
                .map_err(|e| format!("cannot record the rewind before it starts: {e}"))?;
            Ok(restore::restore(
                &store,
                &chosen.target,
                &now,
                &chosen.paths,
            ))
        })
        .await
        .map_err(|e| refuse(ErrorCode::StorageError, e.to_string()))?;
        outcome = restored.map_err(|e: String| refuse(ErrorCode::StorageError, e))?;
        conflicts = chosen.conflicts;
    }
    let rewind_entry = LogEntry::Rewind {
        before_seq: by_seq,
        session_id: by_seq.map(|_| conversation.session_id),
        checkpoint: before.as_ref().and(target),
        checkpoint_before: before.clone(),
        files_restored: outcome.restored.clone(),
        conflicts: conflicts.clone(),
        not_restored: outcome.not_restored.clone(),
        conversation: rewind_conversation,
    };
    let mut entries: Vec<LogEntry> = checkpoint_entry.into_iter().collect();
    entries.push(rewind_entry);
    let mut switched = None;
    if let (true, Some(seq)) = (rewind_conversation, by_seq) {
        let model = env.state.borrow().model.clone();
        let result = env
            .session_log
            .send(Switch {
                to: SwitchTo::Rewind {
                    at_seq: seq.saturating_sub(1),
                    then: entries,
                },
                provider: env.provider.name().to_owned(),
                model,
            })
            .await;
        match result {
            Ok(Ok(new)) => switched = Some(new),
            Ok(Err(e)) => return Err(refuse(e.code, e.message)),
            Err(e) => return Err(refuse(ErrorCode::ShuttingDown, e.to_string())),
        }
    } else {
        for entry in entries {
            commit(env, conversation, entry)
                .await
                .map_err(|e| refuse(ErrorCode::StorageError, e.to_string()))?;
        }
    }
    if let Ok(store) = env.checkpoints.store() {
        let _ = tokio::task::spawn_blocking(move || store.end_rewind()).await;
    }
    let session_id = switched
        .as_ref()
        .map_or(conversation.session_id, |s| s.session_id);
    Ok(Rewound {
        session_id,
        files_restored: outcome.restored,
        conflicts,
        not_restored: outcome.not_restored,
        processes_stopped,
        switched,
    })
}

/// Kills the processes the pod's tools left running (its MCP servers
/// spared); their pids.
async fn stop_adopted(env: &JobEnv) -> Vec<u32> {
    let spare = env.toolbox.mcp_server_pids();
    tokio::task::spawn_blocking(move || crate::tools::reaper::stop_adopted(&spare))
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| u32::try_from(pid).ok())
        .collect()
}

/// The `rewind` checkpoint (the files as they are before the rewind, so
/// that it can be undone in turn), not committed yet, and what to restore
/// against it.
struct TakenAndChosen {
    id: String,
    entry: LogEntry,
    now: Arc<Manifest>,
    chosen: Chosen,
}

async fn take_and_choose(
    env: &JobEnv,
    conversation: &Conversation,
    plan: &Plan,
    force: bool,
) -> Result<TakenAndChosen, Refused> {
    let taken = take_full(env, conversation, CheckpointReason::Rewind).await;
    let (
        Some(now),
        LogEntry::Checkpoint {
            checkpoint: Some(id),
            ..
        },
    ) = (taken.manifest.clone(), &taken.entry)
    else {
        let why = match &taken.entry {
            LogEntry::Checkpoint {
                error: Some(error), ..
            } => error.clone(),
            _ => "unknown error".into(),
        };
        return Err(refuse(
            ErrorCode::StorageError,
            format!(
                "the state before the rewind could not be kept, so nothing was restored: {why}"
            ),
        ));
    };
    let id = id.clone();
    let store = env
        .checkpoints
        .store()
        .map_err(|e| refuse(ErrorCode::StorageError, e))?;
    let target_id = plan.target.clone().unwrap_or_default();
    let plan = plan.clone();
    let seen = Arc::clone(&now);
    let chosen =
        tokio::task::spawn_blocking(move || choose_paths(&store, &target_id, &seen, plan, force))
            .await
            .map_err(|e| refuse(ErrorCode::StorageError, e.to_string()))?
            .map_err(|e| refuse(ErrorCode::StorageError, e))?;
    Ok(TakenAndChosen {
        id,
        entry: taken.entry,
        now,
        chosen,
    })
}

/// What a rewind restores: the target state, the paths to put back to it,
/// and the conflicts it leaves alone.
struct Chosen {
    target: Manifest,
    paths: Vec<String>,
    conflicts: Vec<String>,
}

/// Chooses the plan's paths (or, for a checkpoint, every path that
/// differs) to restore to the target, less the conflicts (unless `force`).
fn choose_paths(
    store: &Arc<Checkpoints>,
    target_id: &str,
    now: &Manifest,
    plan: Plan,
    force: bool,
) -> Result<Chosen, String> {
    let target = store
        .manifest(target_id)
        .map_err(|e| format!("checkpoint {target_id} can no longer be read: {e}"))?;
    let by_checkpoint = plan.paths.is_empty() && plan.last_turn_end.is_none();
    let candidates: Vec<String> = if by_checkpoint {
        diff::changed_paths(&target, now)
            .into_iter()
            .map(|(p, _, _)| p.to_owned())
            .collect()
    } else {
        plan.paths.clone()
    };
    let mut hand: HashSet<String> = plan.hand_changed.iter().cloned().collect();
    if let Some(last) = &plan.last_turn_end {
        if let Ok(last) = store.manifest(last) {
            hand.extend(
                diff::changed_paths(&last, now)
                    .into_iter()
                    .map(|(p, _, _)| p.to_owned()),
            );
        }
    }
    let (conflicts, paths): (Vec<String>, Vec<String>) = if by_checkpoint || force {
        (Vec::new(), candidates)
    } else {
        candidates.into_iter().partition(|p| hand.contains(p))
    };
    // Paths already as the target has them need nothing.
    let paths: Vec<String> = paths
        .into_iter()
        .filter(|p| target.files.get(p) != now.files.get(p) || target.skips(p) || now.skips(p))
        .collect();
    Ok(Chosen {
        target,
        paths,
        conflicts,
    })
}

/// Says what happened when the last pod was killed in the middle of a
/// rewind: the state before it is committed as a `rewind` checkpoint (so
/// `rewind --checkpoint` can go back to it), and the model and every client
/// get a note. Each file is either as it was or restored, never torn.
pub async fn settle_interrupted_rewind(env: &JobEnv, conversation: &mut Conversation) {
    let Ok(store) = env.checkpoints.store() else {
        return;
    };
    let lookup = Arc::clone(&store);
    let Ok(Some(journal)) = tokio::task::spawn_blocking(move || lookup.interrupted_rewind()).await
    else {
        return;
    };
    env.checkpoints.know(&journal.before);
    env.checkpoints.know(&journal.target);
    let entries = [
        LogEntry::Checkpoint {
            checkpoint: Some(journal.before.clone()),
            error: None,
            reason: CheckpointReason::Rewind,
            changes: Vec::new(),
            skipped: Vec::new(),
            skipped_more: None,
            at: LogEntry::now(),
        },
        LogEntry::HookInjectedItems {
            items: vec![crate::protocol::InjectedItem {
                source: "rewind".into(),
                text: format!(
                    "The pod was stopped in the middle of a rewind of the files to checkpoint \
                     {}: each file is either as it was before the rewind or restored, none is \
                     torn. `pod rewind --checkpoint {}` puts back the state before it; \
                     rewinding again finishes it.",
                    journal.target, journal.before
                ),
            }],
        },
    ];
    for entry in entries {
        if commit(env, conversation, entry).await.is_err() {
            return;
        }
    }
    let _ = tokio::task::spawn_blocking(move || store.end_rewind()).await;
}
