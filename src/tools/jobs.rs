//! Background jobs: a `bash` command started with `background: true`,
//! which outlives the tool call that started it — a dev server, a watcher.
//!
//! A job is a [tool process](super::process) like any command: sandboxed,
//! in its own session, under the [`reaper`](super::reaper), so it dies with
//! the pod however the pod dies. Its output goes to a [`JobOutput`] that
//! keeps the first and last [`KEEP_BYTES`] and counts what it left out, so a
//! job printing gigabytes costs bounded memory; nothing is streamed to
//! clients unless the model (or a person, through `list_jobs`) asks.
//!
//! The registry ([`Jobs`]) also records running jobs' process groups in
//! `<data-dir>/pods/NAME.jobs` with the next job id: ids stay unique across
//! restarts, and a pod that starts after a crash kills what a dead pod left
//! listed there ([`Jobs::recover`]) — checking each process still carries
//! the tool-process marker, so a recycled pid of the user's is never hit.
//! Every start and end is also sent on the event channel the worker
//! listens to: it broadcasts `status.jobs` and commits a `job` note when a
//! job ends.

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::process::Pid;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::registry::{Args, Run, Runner, ToolDef};
use super::{ProcessGroup, Sandbox, ToolOutcome};
use crate::protocol::tools as builtin;
use crate::protocol::JobInfo;
use crate::provider::ToolSpec;
use crate::workspace::Workspace;

pub const JOB_OUTPUT: &str = builtin::JOB_OUTPUT.name;
pub const JOB_KILL: &str = builtin::JOB_KILL.name;

pub const JOB_OUTPUT_TOOL: ToolDef = ToolDef {
    facts: builtin::JOB_OUTPUT,
    spec: |_| output_spec(),
    args: Args::of::<JobArgs>(),
    runner: Runner::Toolbox,
    run: Run::Own,
};

pub const JOB_KILL_TOOL: ToolDef = ToolDef {
    facts: builtin::JOB_KILL,
    spec: |_| kill_spec(),
    args: Args::of::<JobArgs>(),
    runner: Runner::Toolbox,
    run: Run::Own,
};

/// How much of a job's output is kept at each end.
pub const KEEP_BYTES: usize = 512 * 1024;

/// How many of a job's last lines its end note quotes, and in how many bytes.
const NOTE_LINES: usize = 10;
const NOTE_BYTES: usize = 2048;

/// What the worker hears from the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEvent {
    /// A job started; the number running changed.
    Started,
    /// A job ended: the text of its `job` note.
    Ended(String),
}

/// A job's output: its first and last [`KEEP_BYTES`], and how far the
/// model has read.
#[derive(Debug, Default)]
pub struct JobOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Every byte the job printed.
    total: u64,
    /// How far `job_output` has read (a byte offset into everything printed).
    read: u64,
}

impl JobOutput {
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < KEEP_BYTES {
            let take = bytes.len().min(KEEP_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= KEEP_BYTES {
            self.tail.clear();
            bytes = &bytes[bytes.len() - KEEP_BYTES..];
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(KEEP_BYTES);
        self.tail.drain(..over);
        self.tail.extend(bytes);
    }

    /// What was printed since the last call, as text: the kept bytes of
    /// that stretch, with a note of how many were left out between them.
    pub fn unread(&mut self) -> String {
        let from = self.read;
        self.read = self.total;
        self.since(from)
    }

    /// Everything kept so far, for a person (`get_job_output`): the model's
    /// place in the output is left where it was.
    pub fn kept(&self) -> String {
        self.since(0)
    }

    /// The kept bytes printed from byte offset `from` on, as text.
    fn since(&self, from: u64) -> String {
        let head_end = self.head.len() as u64;
        let tail_start = self.total - self.tail.len() as u64;
        let mut bytes = Vec::new();
        if from < head_end {
            bytes.extend_from_slice(&self.head[from as usize..]);
        }
        let resume = from.max(head_end).max(tail_start);
        let left_out = resume - from.max(head_end);
        if left_out > 0 {
            bytes.extend_from_slice(format!("\n[… {left_out} bytes left out …]\n").as_bytes());
        }
        let skip = (resume - tail_start) as usize;
        bytes.extend(self.tail.iter().skip(skip));
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The last lines printed, for the end note: from the tail, and from
    /// the head too while the two hold everything printed (short output
    /// is all in the head).
    fn last_lines(&self) -> String {
        let start = self.tail.len().saturating_sub(NOTE_BYTES);
        let mut bytes: Vec<u8> = self.tail.iter().skip(start).copied().collect();
        let whole = self.total == (self.head.len() + self.tail.len()) as u64;
        if whole && bytes.len() < NOTE_BYTES {
            let from = self.head.len().saturating_sub(NOTE_BYTES - bytes.len());
            bytes.splice(0..0, self.head[from..].iter().copied());
        }
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.trim_end().lines().collect();
        lines[lines.len().saturating_sub(NOTE_LINES)..].join("\n")
    }
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Signal(i32),
    Unknown,
}

struct Job {
    command: String,
    started_at: String,
    started: Instant,
    output: JobOutput,
    /// `None` while it runs.
    exit: Option<Exit>,
    /// Why the pod ended it, if it did (`killed: the pod stopped`).
    killed_by: Option<&'static str>,
    group: ProcessGroup,
    pid: i32,
}

impl Job {
    fn info(&self, id: u64) -> JobInfo {
        let (exit_code, signal) = match self.exit {
            Some(Exit::Code(code)) => (Some(code), None),
            Some(Exit::Signal(signal)) => (None, Some(signal)),
            _ => (None, None),
        };
        JobInfo {
            job: id,
            command: self.command.clone(),
            started_at: self.started_at.clone(),
            running: self.exit.is_none(),
            exit_code,
            signal,
        }
    }

    fn status_line(&self) -> String {
        match (self.exit, self.killed_by) {
            (None, _) => "still running".into(),
            (Some(_), Some(why)) => why.into(),
            (Some(Exit::Code(code)), None) => format!("exited with code {code}"),
            (Some(Exit::Signal(signal)), None) => format!("killed by signal {signal}"),
            (Some(Exit::Unknown), None) => "ended (exit status unknown)".into(),
        }
    }

    /// The `job` note committed when it ends.
    fn note(&self, id: u64) -> String {
        let secs = self.started.elapsed().as_secs();
        let last = self.output.last_lines();
        let mut note = format!(
            "job {id} ({}) {} after {secs}s",
            self.command,
            self.status_line()
        );
        if last.is_empty() {
            note.push_str("; it printed nothing.");
        } else {
            note.push_str(&format!("; its last lines:\n{last}"));
        }
        note
    }
}

/// `<data-dir>/pods/NAME.jobs`: the next id and the running jobs' groups.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    next: u64,
    running: Vec<RecordedJob>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedJob {
    job: u64,
    pid: i32,
    command: String,
}

#[derive(Default)]
struct Inner {
    next: u64,
    jobs: BTreeMap<u64, Job>,
}

/// The pod's background jobs.
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Mutex<Inner>>,
    file: Option<PathBuf>,
    max: usize,
    events: Option<mpsc::UnboundedSender<JobEvent>>,
}

impl Jobs {
    /// Jobs recorded in `file` (none: not recorded, as in tool tests), at
    /// most `max` running at once, each start and end sent to `events`.
    pub fn new(
        file: Option<PathBuf>,
        max: usize,
        events: Option<mpsc::UnboundedSender<JobEvent>>,
    ) -> Self {
        Self {
            inner: Arc::default(),
            file,
            max,
            events,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kills what a pod that died left listed in the file, and returns the
    /// notes to commit for them; ids go on from where it stopped.
    pub fn recover(&self) -> Vec<String> {
        let Some(file) = &self.file else {
            return Vec::new();
        };
        let record: Record = match std::fs::read(file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("ignoring {}: {e}", file.display());
                Record::default()
            }),
            Err(_) => Record::default(),
        };
        self.lock().next = record.next;
        let notes = record
            .running
            .iter()
            .map(|job| {
                let killed = Pid::from_raw(job.pid)
                    .filter(|_| super::process::carries_marker(job.pid as u32))
                    .is_some_and(|pid| {
                        rustix::process::kill_process_group(pid, rustix::process::Signal::Kill)
                            .is_ok()
                    });
                let what = if killed {
                    "was killed: the pod that started it stopped without ending it"
                } else {
                    "had ended: the pod that started it stopped without recording how"
                };
                format!("job {} ({}) {what}.", job.job, job.command)
            })
            .collect();
        self.save(&self.lock());
        notes
    }

    /// How many jobs run now.
    pub fn running(&self) -> usize {
        self.lock()
            .jobs
            .values()
            .filter(|j| j.exit.is_none())
            .count()
    }

    /// Every job of this pod, ended ones included, in start order.
    pub fn list(&self) -> Vec<JobInfo> {
        self.lock()
            .jobs
            .iter()
            .map(|(id, job)| job.info(*id))
            .collect()
    }

    /// Starts `command` as a job; the model reads the answer.
    pub fn start(&self, ws: &Workspace, sandbox: &Sandbox, command: &str) -> ToolOutcome {
        if self.running() >= self.max {
            return ToolOutcome::error(format!(
                "cannot start a background job: {} already run, the most allowed at once \
                 (--max-jobs). Stop one with job_kill first.",
                self.max
            ));
        }
        let (child, reader) = match super::bash::spawn(ws, sandbox, command, false) {
            Ok(parts) => parts,
            Err(e) => return ToolOutcome::error(format!("cannot start bash: {e}")),
        };
        let pid = child.id().map_or(0, |id| id as i32);
        let id = {
            let mut inner = self.lock();
            inner.next = inner.next.max(1);
            let id = inner.next;
            inner.next += 1;
            inner.jobs.insert(
                id,
                Job {
                    command: crate::safe_text::line(command).into_owned(),
                    started_at: crate::protocol::LogEntry::now(),
                    started: Instant::now(),
                    output: JobOutput::default(),
                    exit: None,
                    killed_by: None,
                    group: ProcessGroup::new(Pid::from_raw(pid)),
                    pid,
                },
            );
            self.save(&inner);
            id
        };
        self.send(JobEvent::Started);
        tokio::spawn(self.clone().follow(id, child, reader));
        ToolOutcome::ok(format!(
            "started background job {id}. Read its output with job_output {{\"job\": {id}}}, \
             stop it with job_kill {{\"job\": {id}}}; you get a note when it ends."
        ))
    }

    /// Reads a job's output until it ends, then records how it ended.
    async fn follow(self, id: u64, mut child: tokio::process::Child, reader: OwnedFd) {
        let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(reader);
        let mut chunk = vec![0u8; 64 * 1024];
        let status = match reader {
            Ok(mut reader) => {
                let mut eof = false;
                let status = loop {
                    tokio::select! {
                        read = reader.read(&mut chunk), if !eof => match read {
                            Ok(0) | Err(_) => eof = true,
                            Ok(n) => self.with(id, |job| job.output.push(&chunk[..n])),
                        },
                        status = child.wait() => break status,
                    }
                };
                // The rest of the group is killed with the leader's end; a
                // process that escaped it and keeps the pipe is not waited for.
                self.with(id, |job| job.group.kill());
                let _ = tokio::time::timeout(Duration::from_millis(200), async {
                    while let Ok(n @ 1..) = reader.read(&mut chunk).await {
                        self.with(id, |job| job.output.push(&chunk[..n]));
                    }
                })
                .await;
                status
            }
            Err(_) => child.wait().await,
        };
        let exit = match status {
            Ok(status) => match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(signal)) => Exit::Signal(signal),
                _ => Exit::Unknown,
            },
            Err(_) => Exit::Unknown,
        };
        let note = {
            let mut inner = self.lock();
            let Some(job) = inner.jobs.get_mut(&id) else {
                return;
            };
            if job.exit.is_some() {
                // Already ended by stop_all, which sent its note.
                return;
            }
            job.exit = Some(exit);
            job.group.kill();
            let note = job.note(id);
            self.save(&inner);
            note
        };
        self.send(JobEvent::Ended(note));
    }

    fn with(&self, id: u64, f: impl FnOnce(&mut Job)) {
        if let Some(job) = self.lock().jobs.get_mut(&id) {
            f(job);
        }
    }

    /// `job_output`: what the job printed since the model last asked.
    pub fn output(&self, id: u64) -> ToolOutcome {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.get_mut(&id) else {
            return unknown(id);
        };
        let text = job.output.unread();
        let status = job.status_line();
        let text = if text.is_empty() {
            "(no new output)".to_owned()
        } else {
            text
        };
        ToolOutcome::ok(format!("{text}\n[job {id}: {status}]"))
    }

    /// `get_job_output`: the job as `list_jobs` describes it and all of its
    /// output kept so far, without moving the model's place in it; `None`
    /// for an unknown id.
    pub fn peek(&self, id: u64) -> Option<(JobInfo, String)> {
        let inner = self.lock();
        let job = inner.jobs.get(&id)?;
        Some((job.info(id), job.output.kept()))
    }

    /// Kills a job's whole process group. `Err` for an unknown id.
    pub fn kill(&self, id: u64) -> Result<(), String> {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.get_mut(&id) else {
            return Err(format!("no background job {id}"));
        };
        job.group.kill();
        Ok(())
    }

    /// Kills every running job and waits (up to a second) until each is
    /// seen to end; their notes follow as usual.
    pub async fn kill_all(&self) {
        for job in self.lock().jobs.values_mut() {
            job.group.kill();
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.running() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `job_kill`, worded for the model.
    pub fn kill_tool(&self, id: u64) -> ToolOutcome {
        match self.kill(id) {
            Ok(()) => ToolOutcome::ok(format!(
                "job {id} was sent SIGKILL (its whole process group); you get a note when it ends."
            )),
            Err(_) => unknown(id),
        }
    }

    /// Kills every running job because the pod stops; returns their notes.
    pub fn stop_all(&self) -> Vec<String> {
        let mut inner = self.lock();
        let mut notes = Vec::new();
        for (id, job) in inner.jobs.iter_mut() {
            if job.exit.is_none() {
                job.group.kill();
                job.exit = Some(Exit::Signal(libc::SIGKILL));
                job.killed_by = Some("killed: the pod stopped");
                notes.push(job.note(*id));
            }
        }
        self.save(&inner);
        notes
    }

    fn send(&self, event: JobEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }

    /// Rewrites the file (temp file, rename): small, and written only as a
    /// job starts or ends.
    fn save(&self, inner: &Inner) {
        let Some(file) = &self.file else {
            return;
        };
        let record = Record {
            next: inner.next.max(1),
            running: inner
                .jobs
                .iter()
                .filter(|(_, j)| j.exit.is_none())
                .map(|(id, j)| RecordedJob {
                    job: *id,
                    pid: j.pid,
                    command: j.command.clone(),
                })
                .collect(),
        };
        let tmp = file.with_extension("jobs.tmp");
        let written = serde_json::to_vec(&record)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            tracing::warn!("cannot record background jobs in {}: {e}", file.display());
        }
    }
}

fn unknown(id: u64) -> ToolOutcome {
    ToolOutcome::error(format!(
        "no background job {id}; jobs are numbered as they start (see the result of the bash \
         call that started one)"
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct JobArgs {
    pub job: u64,
}

pub fn output_spec() -> ToolSpec {
    ToolSpec {
        name: JOB_OUTPUT.into(),
        description: "Read what a background job (bash with background: true) printed since \
                      you last asked, and whether it still runs or how it ended. A job keeps \
                      its first and last 512 KiB of output."
            .into(),
        parameters: job_parameters(),
    }
}

pub fn kill_spec() -> ToolSpec {
    ToolSpec {
        name: JOB_KILL.into(),
        description: "Stop a background job: kills its whole process group.".into(),
        parameters: job_parameters(),
    }
}

fn job_parameters() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "job": {"type": "integer", "minimum": 1, "description": "The job's id, from the bash call that started it."}
        },
        "required": ["job"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_both_ends_and_says_what_it_left_out() {
        let mut out = JobOutput::default();
        out.push(b"hello\n");
        assert_eq!(out.last_lines(), "hello");
        assert_eq!(out.unread(), "hello\n");
        assert_eq!(out.unread(), "");
        let big = vec![b'x'; 3 * KEEP_BYTES];
        out.push(&big);
        out.push(b"end\n");
        let text = out.unread();
        assert!(text.len() < 2 * KEEP_BYTES + 100, "{}", text.len());
        assert!(text.ends_with("x\nend\n") || text.ends_with("end\n"));
        // The head ends at KEEP_BYTES, the tail starts KEEP_BYTES before the end.
        let left_out = 6 + 3 * KEEP_BYTES + 4 - KEEP_BYTES - KEEP_BYTES;
        assert!(text.contains(&format!("[… {left_out} bytes left out …]")));
        out.push(b"more\n");
        assert_eq!(out.unread(), "more\n");
        assert_eq!(out.last_lines().lines().last(), Some("more"));
    }
}
