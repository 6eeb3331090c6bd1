//! `pod replay SESSION`: re-run a recorded session and report **drift** — a
//! tool result that differs from the recorded one (`cli.md`, "Headless
//! runs and replay"; docs/headless.md).
//!
//! The recorded session's log holds every model reply, so the replay needs
//! no model: its replies become a script for the `script` provider, one
//! line per model call, in order ([`Recording::script`]). The files come
//! from the session's first checkpoint, restored into a scratch directory
//! (`--workspace DIR`, else a fresh temporary one; never the live
//! workspace). A pod this process hosts ([`crate::pod::embedded`]) runs there
//! with those replies: each recorded user input is sent again as a `run`,
//! every tool runs for real, and each tool result is compared with the
//! recorded one. Approval requests are answered as the recording answered
//! them. The replayed session is a session like any other, whose
//! `session_start` names the one it replays (`replay_of`).

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{json, Value};
use uuid::Uuid;

use super::args::ReplayArgs;
use super::connect::exit;
use super::{ConfigFile, Paths};
use crate::client::{EventStream, RequestSink};
use crate::protocol::{
    AssistantItem, DecidedBy, Decision, Event, LogEntry, LogLine, Method, Request, Segment,
    TurnEndReason,
};
use crate::safe_text;

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
    let recording = Recording::from_log(&lines, args.until_seq);
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
    recording: &Recording,
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
    let ran = super::runtime()?.block_on(drive(&pod, recording));
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
            "pod: the replayed session is {} (`pod log --name {pod_name}` prints it)",
            report.session_id
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

/// One recorded tool result.
#[derive(Debug, Clone)]
struct Recorded {
    seq: u64,
    tool: String,
    output: String,
    is_error: bool,
}

/// What the replay needs of a recorded session.
#[derive(Debug, Default)]
struct Recording {
    workspace: Option<String>,
    first_checkpoint: Option<String>,
    /// Each turn's user input, in order.
    turns: Vec<Vec<Segment>>,
    /// One script line per model call, in order.
    calls: Vec<Vec<Value>>,
    /// The recorded results by call id, in order (an id may repeat).
    results: HashMap<String, VecDeque<Recorded>>,
    /// How the recording answered each asked call (by call id, in order).
    decisions: HashMap<String, VecDeque<(Decision, Option<String>)>>,
    /// The log stops before its end (`--until-seq`).
    cut_at: Option<u64>,
}

impl Recording {
    /// Reads the log's lines up to `until_seq` (all without it).
    fn from_log(lines: &[LogLine], until_seq: Option<u64>) -> Recording {
        let mut recording = Recording::default();
        let mut call: Option<Vec<Value>> = None;
        let mut tools: HashMap<String, String> = HashMap::new();
        let mut cut = false;
        for line in lines {
            if until_seq.is_some_and(|n| line.seq > n) {
                cut = true;
                break;
            }
            match &line.entry {
                LogEntry::SessionStart { workspace, .. } => {
                    recording.workspace = workspace.clone();
                }
                LogEntry::UserInput { segments, .. } => {
                    recording.close(&mut call);
                    recording.turns.push(segments.clone());
                }
                LogEntry::AssistantItems { items } => {
                    let events = call.get_or_insert_with(Vec::new);
                    for item in items {
                        events.push(match item {
                            AssistantItem::Text { text } => json!({ "text": text }),
                            AssistantItem::Reasoning { text } => json!({ "reasoning": text }),
                            AssistantItem::ToolCall {
                                call_id,
                                name,
                                arguments,
                            } => {
                                tools.insert(call_id.clone(), name.clone());
                                json!({"tool_call": {"id": call_id, "name": name, "arguments": arguments}})
                            }
                        });
                    }
                }
                LogEntry::ToolResults { results } => {
                    recording.close(&mut call);
                    for result in results {
                        recording
                            .results
                            .entry(result.call_id.clone())
                            .or_default()
                            .push_back(Recorded {
                                seq: line.seq,
                                tool: tools.get(&result.call_id).cloned().unwrap_or_default(),
                                output: result.output.clone(),
                                is_error: result.is_error,
                            });
                    }
                }
                LogEntry::ApprovalDecision {
                    call_id,
                    decision,
                    by: DecidedBy::User | DecidedBy::Hook,
                    message,
                    ..
                } => recording
                    .decisions
                    .entry(call_id.clone())
                    .or_default()
                    .push_back((*decision, message.clone())),
                LogEntry::Checkpoint {
                    checkpoint: Some(id),
                    ..
                } if recording.first_checkpoint.is_none() => {
                    recording.first_checkpoint = Some(id.clone());
                }
                LogEntry::TurnEnd { usage, error, .. } => {
                    // A call that failed before it streamed anything left no
                    // entry: the error alone is its reply.
                    if let Some(error) = error.as_ref().filter(|e| provider_failure(e.code)) {
                        call.get_or_insert_with(Vec::new)
                            .push(json!({ "error": error.message }));
                    }
                    if let Some(usage) = usage {
                        let last = match call.as_mut() {
                            Some(events) => Some(events),
                            None => recording.calls.last_mut(),
                        };
                        if let Some(events) = last {
                            events.push(json!({"usage": {
                                "input_tokens": usage.input_tokens,
                                "output_tokens": usage.output_tokens,
                            }}));
                        }
                    }
                    recording.close(&mut call);
                }
                _ => {}
            }
        }
        if cut {
            recording.cut_at = until_seq;
            // A reply cut mid-way keeps its text, not its tool calls (their
            // results lie past the cut), and ends the turn saying why.
            if let (Some(events), Some(n)) = (call.as_mut(), until_seq) {
                events.retain(|event| event.get("tool_call").is_none());
                events.push(
                    json!({ "error": format!("pod replay: stopped at seq {n} (--until-seq)") }),
                );
            }
        }
        recording.close(&mut call);
        recording
    }

    fn close(&mut self, call: &mut Option<Vec<Value>>) {
        if let Some(events) = call.take() {
            self.calls.push(events);
        }
    }

    /// The script the replay's model serves: the recorded replies, then one
    /// that fails saying why, should the replay ask for more than were
    /// recorded (a turn cut by `--until-seq` asks for its next reply).
    fn script(&self) -> String {
        let mut lines: Vec<String> = self
            .calls
            .iter()
            .map(|events| json!({ "events": events }).to_string())
            .collect();
        let why = match self.cut_at {
            Some(n) => format!("pod replay: stopped at seq {n} (--until-seq)"),
            None => "pod replay: the recorded session has no more model replies".into(),
        };
        lines.push(json!({"events": [{"error": why}]}).to_string());
        lines.join("\n") + "\n"
    }

    /// How to answer a request for `call_id`: as the recording did; a call
    /// the recording ran without asking is allowed, one it never ran denied.
    fn answer(&mut self, call_id: &str) -> (Decision, Option<String>) {
        if let Some(decision) = self
            .decisions
            .get_mut(call_id)
            .and_then(VecDeque::pop_front)
        {
            return decision;
        }
        let ran = self
            .results
            .get(call_id)
            .and_then(VecDeque::front)
            .is_some_and(|r| !r.output.starts_with("[denied"));
        if ran {
            (Decision::Allow, None)
        } else {
            (
                Decision::Deny,
                Some("the recorded session did not run this call".into()),
            )
        }
    }
}

/// Whether a turn error is the model call's own failure, which the
/// replayed reply must reproduce.
fn provider_failure(code: crate::protocol::TurnErrorCode) -> bool {
    use crate::protocol::TurnErrorCode as C;
    matches!(
        code,
        C::ProviderHttp | C::ProviderUnreachable | C::ProviderStream
    )
}

/// A tool result that differs from the recorded one.
struct Drift {
    /// The recorded result's seq (null: the replay made a call the
    /// recording did not have).
    seq: Option<u64>,
    replayed_seq: Option<u64>,
    call_id: String,
    tool: String,
    recorded: String,
    replayed: String,
}

struct Report {
    session_id: Uuid,
    turns: usize,
    compared: usize,
    drifts: Vec<Drift>,
}

impl Report {
    fn print(&self, recorded_id: Uuid, recording: &Recording) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        let upto = recording
            .cut_at
            .map(|n| format!(" up to seq {n}"))
            .unwrap_or_default();
        writeln!(
            out,
            "replayed session {recorded_id}{upto} as {}: {} turn(s), {} tool result(s) compared",
            self.session_id, self.turns, self.compared
        )?;
        for drift in &self.drifts {
            let at = match (drift.seq, drift.replayed_seq) {
                (Some(seq), Some(replayed)) => format!("seq {seq} (replayed as seq {replayed})"),
                (Some(seq), None) => format!("seq {seq} (not replayed)"),
                (None, Some(replayed)) => format!("replayed seq {replayed} (not recorded)"),
                (None, None) => "?".into(),
            };
            writeln!(
                out,
                "drift at {at}: {} (call {})",
                safe_text::line(&drift.tool),
                safe_text::line(&drift.call_id)
            )?;
            writeln!(out, "  recorded: {}", safe_text::line(&drift.recorded))?;
            writeln!(out, "  replayed: {}", safe_text::line(&drift.replayed))?;
        }
        match self.drifts.len() {
            0 => writeln!(out, "no drift"),
            1 => writeln!(out, "1 drift"),
            n => writeln!(out, "{n} drifts"),
        }
    }
}

/// The first line where two outputs differ, from each (`(end)` past the
/// last line of the shorter one).
fn first_difference(recorded: &str, replayed: &str) -> (String, String) {
    let (mut a, mut b) = (recorded.split('\n'), replayed.split('\n'));
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => return ("(same text)".into(), "(same text)".into()),
            (x, y) => {
                return (
                    x.unwrap_or("(end)").to_owned(),
                    y.unwrap_or("(end)").to_owned(),
                )
            }
        }
    }
}

/// Sends each recorded input, answers approvals as recorded, compares
/// every tool result; `None` when the pod closed before its snapshot.
async fn drive(
    pod: &crate::pod::embedded::EmbeddedPod,
    recording: &Recording,
) -> anyhow::Result<Option<Report>> {
    let (mut events, mut sink) = crate::client::over(pod.connect()?)?;
    let session_id = match events.next().await {
        Some(Ok(Event::Snapshot(snapshot))) => snapshot.session_id,
        Some(Ok(_)) => anyhow::bail!("the replay's pod did not start with a snapshot"),
        Some(Err(e)) => return Err(e.into()),
        None => return Ok(None),
    };
    sink.send(&Request::new(Method::Hello {
        client: CLIENT.into(),
    }))
    .await?;
    let mut answers = Recording {
        decisions: recording.decisions.clone(),
        results: recording.results.clone(),
        ..Recording::default()
    };
    let mut expected = recording.results.clone();
    let mut report = Report {
        session_id,
        turns: 0,
        compared: 0,
        drifts: Vec::new(),
    };
    for (i, segments) in recording.turns.iter().enumerate() {
        let request_id = format!("replay-{i}");
        sink.send(&Request::with_id(
            Method::Run {
                segments: segments.clone(),
            },
            request_id.clone(),
        ))
        .await?;
        let ended = turn(
            &mut events,
            &mut sink,
            &request_id,
            &mut answers,
            &mut expected,
            &mut report,
        )
        .await?;
        report.turns += 1;
        if !ended {
            break;
        }
    }
    // Recorded results the replay never produced.
    let mut missing: Vec<(String, Recorded)> = expected
        .into_iter()
        .flat_map(|(call_id, left)| left.into_iter().map(move |r| (call_id.clone(), r)))
        .collect();
    missing.sort_by_key(|(_, r)| r.seq);
    for (call_id, recorded) in missing {
        report.drifts.push(Drift {
            seq: Some(recorded.seq),
            replayed_seq: None,
            call_id,
            tool: recorded.tool,
            recorded: first_difference(&recorded.output, "").0,
            replayed: "(no result: the replay did not make this call)".into(),
        });
    }
    report.drifts.sort_by_key(|d| d.seq.unwrap_or(u64::MAX));
    Ok(Some(report))
}

/// Follows one replayed turn to its `turn_end`; false when the pod went
/// away or refused the input first.
async fn turn(
    events: &mut EventStream,
    sink: &mut RequestSink,
    request_id: &str,
    answers: &mut Recording,
    expected: &mut HashMap<String, VecDeque<Recorded>>,
    report: &mut Report,
) -> anyhow::Result<bool> {
    let mut ours = false;
    let mut tools: HashMap<String, String> = HashMap::new();
    loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                eprintln!("pod: the connection to the replay's pod failed: {e}");
                return Ok(false);
            }
            None => {
                eprintln!("pod: the replay's pod closed the connection mid-turn");
                return Ok(false);
            }
        };
        match event {
            Event::Error {
                request_id: Some(id),
                message,
                ..
            } if id == request_id => {
                eprintln!(
                    "pod: the replay's pod refused a recorded input: {}",
                    safe_text::line(&message)
                );
                return Ok(false);
            }
            Event::TurnStart {
                request_id: Some(id),
                ..
            } if id == request_id => ours = true,
            Event::Entry { seq, entry, .. } if ours => match entry {
                LogEntry::AssistantItems { items } => {
                    for item in items {
                        if let AssistantItem::ToolCall { call_id, name, .. } = item {
                            tools.insert(call_id, name);
                        }
                    }
                }
                LogEntry::ApprovalRequest { call_id, .. } => {
                    let (decision, message) = answers.answer(&call_id);
                    sink.send(&Request::new(Method::Approve {
                        call_id,
                        decision,
                        scope: None,
                        message,
                    }))
                    .await?;
                }
                LogEntry::ToolResults { results } => {
                    for result in results {
                        report.compared += 1;
                        let recorded = expected
                            .get_mut(&result.call_id)
                            .and_then(VecDeque::pop_front);
                        let tool = tools.get(&result.call_id).cloned().unwrap_or_default();
                        match recorded {
                            Some(r)
                                if r.output == result.output && r.is_error == result.is_error => {}
                            Some(r) => {
                                let (recorded_line, replayed_line) =
                                    first_difference(&r.output, &result.output);
                                report.drifts.push(Drift {
                                    seq: Some(r.seq),
                                    replayed_seq: Some(seq),
                                    call_id: result.call_id,
                                    tool: r.tool,
                                    recorded: recorded_line,
                                    replayed: replayed_line,
                                });
                            }
                            None => report.drifts.push(Drift {
                                seq: None,
                                replayed_seq: Some(seq),
                                call_id: result.call_id,
                                tool,
                                recorded: "(no result: the recording did not make this call)"
                                    .into(),
                                replayed: first_difference("", &result.output).1,
                            }),
                        }
                    }
                }
                LogEntry::TurnEnd { reason, .. } => {
                    if reason == TurnEndReason::Interrupted {
                        return Ok(false);
                    }
                    return Ok(true);
                }
                _ => {}
            },
            Event::Shutdown { .. } => return Ok(false),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, entry: Value) -> LogLine {
        serde_json::from_value(json!({"seq": seq, "entry": entry})).unwrap()
    }

    /// The replies come out of the log one model call a line, in order,
    /// each turn's usage on its last call, and a cut log asks for no reply
    /// past its cut.
    #[test]
    fn each_model_call_of_the_log_becomes_one_script_line() {
        let id = Uuid::new_v4();
        let log = vec![
            line(
                0,
                json!({"kind":"session_start","session_id":id,"created_at":"x","workspace":"/w"}),
            ),
            line(
                1,
                json!({"kind":"user_input","segments":[{"type":"text","text":"go"}],"at":"x"}),
            ),
            line(
                2,
                json!({"kind":"assistant_items","items":[{"type":"text","text":"Looking."}]}),
            ),
            line(
                3,
                json!({"kind":"assistant_items","items":[{"type":"tool_call","call_id":"c1","name":"bash","arguments":{"command":"ls"}}]}),
            ),
            line(
                4,
                json!({"kind":"checkpoint","checkpoint":"abc","reason":"turn_start","at":"x"}),
            ),
            line(
                5,
                json!({"kind":"tool_results","results":[{"call_id":"c1","output":"a\n","is_error":false}]}),
            ),
            line(
                6,
                json!({"kind":"assistant_items","items":[{"type":"text","text":"Done."}]}),
            ),
            line(
                7,
                json!({"kind":"turn_end","reason":"completed","usage":{"input_tokens":5,"output_tokens":2}}),
            ),
        ];
        let recording = Recording::from_log(&log, None);
        assert_eq!(recording.workspace.as_deref(), Some("/w"));
        assert_eq!(recording.first_checkpoint.as_deref(), Some("abc"));
        assert_eq!(recording.turns.len(), 1);
        let script: Vec<Value> = recording
            .script()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            script,
            vec![
                json!({"events":[{"text":"Looking."},{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"ls"}}}]}),
                json!({"events":[{"text":"Done."},{"usage":{"input_tokens":5,"output_tokens":2}}]}),
                json!({"events":[{"error":"pod replay: the recorded session has no more model replies"}]}),
            ]
        );
        assert_eq!(recording.results["c1"][0].seq, 5);
        assert_eq!(recording.results["c1"][0].tool, "bash");

        let cut = Recording::from_log(&log, Some(5));
        assert_eq!(cut.calls.len(), 1);
        assert!(cut.script().contains("stopped at seq 5"));
        // Cut after a tool call and before its result: the call is not made.
        let cut = Recording::from_log(&log, Some(3));
        assert_eq!(
            cut.calls,
            vec![vec![
                json!({"text":"Looking."}),
                json!({"error":"pod replay: stopped at seq 3 (--until-seq)"})
            ]]
        );
    }

    #[test]
    fn the_first_differing_line_of_each_is_shown() {
        assert_eq!(
            first_difference("a\nb\nc", "a\nB\nc"),
            ("b".into(), "B".into())
        );
        assert_eq!(first_difference("a\nb", "a"), ("b".into(), "(end)".into()));
    }
}
