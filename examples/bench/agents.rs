//! Scenario 18, child pods (subagents), each figure a ratio to a baseline
//! measured in the same run, on the script provider (no model server time):
//!
//! - spawning a child and getting its first turn started, against starting
//!   a turn in an idle pod. Both are timed to the turn's `user_input` entry
//!   appearing in the pod's log on disk (the log is the truth, and it is
//!   written and synced before any client hears of the turn): for the idle
//!   pod from writing `run`, for the child from the parent's
//!   `assistant_items` entry carrying the `spawn_agent` call (the spawn
//!   starts once that entry is committed).
//! - the resident memory of a pod with 4 idle children, against the same
//!   pod alone after a turn of its own.
//! - `read_agent` of a child whose log holds 10,000 entries, against a
//!   client's attach to the child (connect → snapshot read and parsed).
//!   `read_agent` is timed at a client of the parent, from its
//!   `assistant_items` entry carrying the call to its `tool_results` entry:
//!   the tool's own time plus the commit of its result.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use pod::protocol::{LogEntry, ParentRef};
use pod::store::{pointer, LogFile};
use serde_json::json;
use uuid::Uuid;

use crate::util::{median, ms, realistic_entry, PodProcess, Row};
use crate::Config;

/// The parent's name in every pod of this scenario (`PodProcess`'s).
const PARENT: &str = "default";
const CHILD_ENTRIES: usize = 10_000;
const MIB: f64 = 1024.0 * 1024.0;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let mut idle = Vec::new();
    let mut spawned = Vec::new();
    for _ in 0..reps {
        idle.push(ms(idle_turn_start(config)?));
        spawned.push(ms(child_turn_start(config)?));
    }
    let (idle, spawned) = (median(&idle), median(&spawned));
    let mut rows = vec![Row::at_most(
        "18. spawn a child → its first turn started",
        format!("{idle:.2} ms run → user_input in an idle pod"),
        format!("{spawned:.2} ms spawn_agent call → the child's user_input"),
        spawned / idle,
        "≤ 2×",
        2.0,
    )];
    let (alone, with_children) = resident(config)?;
    let allowed = 4.0 * 2.0 * MIB;
    rows.push(Row::at_most(
        "18. 4 idle children, RSS over the parent alone",
        format!("{:.1} MiB parent alone; bar 4 × 2 MiB", alone as f64 / MIB),
        format!(
            "{:.1} MiB with 4 idle children (+{:.1} MiB)",
            with_children as f64 / MIB,
            (with_children as f64 - alone as f64) / MIB
        ),
        (with_children as f64 - alone as f64) / allowed,
        "≤ 1× (8 MiB)",
        1.0,
    ));
    let (attach, read) = read_agent(config, reps)?;
    rows.push(Row::at_most(
        "18. read_agent of a 10,000-entry child",
        format!("{attach:.2} ms a client's attach to it (connect → snapshot parsed)"),
        format!("{read:.2} ms read_agent call → its result committed"),
        read / attach,
        "≤ 1.2×",
        1.2,
    ));
    Ok(rows)
}

/// A script file of these lines in `dir`, and the flags that serve it.
fn script(dir: &Path, lines: &[serde_json::Value]) -> anyhow::Result<Vec<String>> {
    let path = dir.join("script.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text)?;
    Ok(vec![
        "--provider".into(),
        "script".into(),
        "--script".into(),
        path.to_string_lossy().into_owned(),
        "--approval".into(),
        "auto".into(),
    ])
}

fn start(dir: &Path, lines: &[serde_json::Value]) -> anyhow::Result<PodProcess> {
    let args = script(dir, lines)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut pod = PodProcess::spawn(dir, &args)?;
    pod.wait_listening(Instant::now())?;
    Ok(pod)
}

/// A client past its snapshot: the writer and the line reader.
fn attach(socket: &Path) -> anyhow::Result<(UnixStream, BufReader<UnixStream>)> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    Ok((writer, reader))
}

/// Reads entry frames until one of this kind that holds `holding`.
fn until_entry(
    reader: &mut BufReader<UnixStream>,
    kind: &str,
    holding: &str,
) -> anyhow::Result<()> {
    let kind = format!("\"kind\":\"{kind}\"");
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            bail!("the pod closed the connection before a {kind} entry");
        }
        if line.starts_with(b"{\"type\":\"entry\"")
            && crate::sse::find(&line, kind.as_bytes()).is_some()
            && crate::sse::find(&line, holding.as_bytes()).is_some()
        {
            return Ok(());
        }
    }
}

const RUN: &[u8] = b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n";

/// The current log of the pod `name` under `data`, once its state file
/// names one.
fn log_path(data: &Path, name: &str) -> Option<PathBuf> {
    let pointer = pointer::read(&pointer::path(&data.join("pods"), name))
        .ok()
        .flatten()?;
    Some(LogFile::path_for(
        &data.join("sessions"),
        pointer.session_id,
    ))
}

/// Polls `name`'s log until it holds a `user_input` entry; the time since `t`.
fn until_user_input(data: &Path, name: &str, t: Instant) -> anyhow::Result<Duration> {
    let deadline = t + Duration::from_secs(60);
    loop {
        if let Some(text) = log_path(data, name).and_then(|p| std::fs::read(p).ok()) {
            if crate::sse::find(&text, b"\"kind\":\"user_input\"").is_some() {
                return Ok(t.elapsed());
            }
        }
        ensure!(
            Instant::now() < deadline,
            "{name} started no turn within 60 s"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// `run` at a fresh idle pod → its `user_input` on disk.
fn idle_turn_start(config: &Config) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let pod = start(dir.path(), &[json!({"events": [{"text": "ok"}]})])?;
    let (mut writer, _reader) = attach(&pod.socket)?;
    let t = Instant::now();
    writer.write_all(RUN)?;
    until_user_input(&dir.path().join("data"), PARENT, t)
}

/// The parent's `spawn_agent` entry → the child's `user_input` on disk.
fn child_turn_start(config: &Config) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let pod = start(
        dir.path(),
        &[
            json!({"events": [{"tool_call": {"id": "s1", "name": "spawn_agent",
                "arguments": {"task": "go", "name": "w", "wait": false}}}]}),
            json!({"events": [{"text": "spawned"}]}),
            json!({"agent": "w", "events": [{"text": "done"}]}),
        ],
    )?;
    let (mut writer, mut reader) = attach(&pod.socket)?;
    writer.write_all(RUN)?;
    until_entry(&mut reader, "assistant_items", "spawn_agent")?;
    let t = Instant::now();
    until_user_input(&dir.path().join("data"), &format!("{PARENT}.w"), t)
}

/// Peak-free resident memory, settled: the pod's VmRSS once it is idle.
fn settled_rss(pod: &PodProcess) -> anyhow::Result<u64> {
    // Give freed memory a moment to go back, as a pod left idle would.
    std::thread::sleep(Duration::from_millis(500));
    Ok(pod.rss()?.0)
}

/// (the parent alone after a turn, the parent after a turn that spawned 4
/// children which answered and are idle), VmRSS in bytes.
fn resident(config: &Config) -> anyhow::Result<(u64, u64)> {
    let alone = {
        let dir = tempfile::tempdir_in(&config.tmp)?;
        let pod = start(dir.path(), &[json!({"events": [{"text": "ok"}]})])?;
        let (mut writer, mut reader) = attach(&pod.socket)?;
        writer.write_all(RUN)?;
        until_entry(&mut reader, "turn_end", "")?;
        settled_rss(&pod)?
    };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let names = ["a", "b", "c", "d"];
    let spawns: Vec<_> = names
        .iter()
        .map(|n| {
            json!({"tool_call": {"id": format!("s-{n}"), "name": "spawn_agent",
                "arguments": {"task": "go", "name": n, "wait": false}}})
        })
        .collect();
    let mut lines = vec![
        json!({ "events": spawns }),
        json!({"events": [{"tool_call": {"id": "w1", "name": "wait_agents",
            "arguments": {"names": names.map(|n| format!("{PARENT}.{n}"))}}}]}),
        json!({"events": [{"text": "all done"}]}),
    ];
    lines.extend(
        names
            .iter()
            .map(|n| json!({"agent": n, "events": [{"text": "done"}]})),
    );
    let pod = start(dir.path(), &lines)?;
    let (mut writer, mut reader) = attach(&pod.socket)?;
    writer.write_all(RUN)?;
    until_entry(&mut reader, "turn_end", "")?;
    let log =
        std::fs::read_to_string(log_path(&dir.path().join("data"), PARENT).context("no log")?)?;
    let ended = log.matches("\"kind\":\"agent_turn_end\"").count();
    ensure!(ended == 4, "{ended} of 4 children ended their turns");
    Ok((alone, settled_rss(&pod)?))
}

/// Writes child `w`'s state: a log of `CHILD_ENTRIES` entries whose
/// `session_start` names the parent, and a state file recording it, so
/// that the parent starts it as any restarted parent does.
fn write_child(data: &Path, workspace: &Path) -> anyhow::Result<()> {
    let sessions = data.join("sessions");
    let pods = data.join("pods");
    std::fs::create_dir_all(&sessions)?;
    std::fs::create_dir_all(&pods)?;
    let session_id = Uuid::new_v4();
    let workspace = std::fs::canonicalize(workspace)?;
    let start = LogEntry::SessionStart {
        session_id,
        created_at: LogEntry::now(),
        compacted_from: None,
        forked_from: None,
        provider: Some("script".into()),
        model: None,
        workspace: Some(workspace.display().to_string()),
        parent: Some(ParentRef {
            pod: PARENT.into(),
            session_id: Uuid::new_v4(),
            call_id: "s1".into(),
        }),
        replay_of: None,
    };
    let path = LogFile::path_for(&sessions, session_id);
    crate::util::write_log(
        &path,
        start,
        (0..CHILD_ENTRIES).map(|i| realistic_entry(i, 200)),
    )?;
    pointer::write(
        &pointer::path(&pods, &format!("{PARENT}.w")),
        pointer::Pointer {
            session_id,
            workspace: Some(workspace),
            parent: Some(PARENT.into()),
            removed: false,
        },
    )?;
    Ok(())
}

/// (a client's attach to the 10,000-entry child, `read_agent` of it at
/// the parent), medians in ms.
fn read_agent(config: &Config, reps: usize) -> anyhow::Result<(f64, f64)> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    std::fs::create_dir_all(dir.path().join("ws"))?;
    write_child(&dir.path().join("data"), &dir.path().join("ws"))?;
    let child = format!("{PARENT}.w");
    let pod = start(
        dir.path(),
        &[
            json!({"events": [{"tool_call": {"id": "r1", "name": "read_agent",
                "arguments": {"name": child, "max_bytes": 16384}}}]}),
            json!({"events": [{"text": "read"}]}),
        ],
    )?;
    let child_socket = pod.socket.with_file_name(format!("{child}.sock"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(&child_socket).is_err() {
        ensure!(
            Instant::now() < deadline,
            "the child did not start within 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut attaches = Vec::new();
    let mut reads = Vec::new();
    let (mut writer, mut reader) = attach(&pod.socket)?;
    for _ in 0..reps {
        let t = Instant::now();
        let stream = UnixStream::connect(&child_socket)?;
        let mut child_reader = BufReader::with_capacity(1 << 20, stream);
        let mut line = Vec::new();
        child_reader.read_until(b'\n', &mut line)?;
        let snapshot: serde_json::Value = serde_json::from_slice(&line)?;
        attaches.push(ms(t.elapsed()));
        let entries = snapshot["entries"].as_array().map_or(0, Vec::len);
        ensure!(
            entries > CHILD_ENTRIES,
            "the child's snapshot holds {entries} entries"
        );
        writer.write_all(RUN)?;
        until_entry(&mut reader, "assistant_items", "read_agent")?;
        let t = Instant::now();
        until_entry(&mut reader, "tool_results", "r1")?;
        reads.push(ms(t.elapsed()));
        until_entry(&mut reader, "turn_end", "")?;
    }
    Ok((median(&attaches), median(&reads)))
}
