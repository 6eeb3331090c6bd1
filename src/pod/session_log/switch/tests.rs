//! The switch on real files, through the real actors: `SessionLog` and the
//! `Broadcaster` fan a switch out to a client's outbox on a real socket,
//! exactly as for a `Connection` (which only forwards what it reads).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::unix::OwnedReadHalf;
use uuid::Uuid;

use super::*;
use crate::pod::broadcaster::Broadcaster;
use crate::pod::fault::Faults;
use crate::pod::outbox::{Outbox, Sink};
use crate::pod::session_log::{append, Dirs, Subscribe};
use crate::protocol::{AssistantItem, Greeting, Segment, TurnEndReason};
use crate::store::pointer::Pointer;

const PROVIDER: &str = "offline";
const MODEL: &str = "offline-2";

/// A data directory with one session of two turns (seq 0..=6), the pod
/// pointing at it.
struct Data {
    _dir: tempfile::TempDir,
    dirs: Dirs,
    first: Uuid,
}

impl Data {
    fn new() -> Data {
        let dir = tempfile::tempdir().unwrap();
        Data::in_dir(dir)
    }

    fn in_dir(dir: tempfile::TempDir) -> Data {
        let dirs = Dirs {
            sessions: dir.path().join("sessions"),
            pointer: dir.path().join("pods/default.json"),
            workspace: dir.path().to_owned(),
            parent: None,
        };
        std::fs::create_dir_all(&dirs.sessions).unwrap();
        std::fs::create_dir_all(dir.path().join("pods")).unwrap();
        let first = Uuid::parse_str("aaaa1111-0000-4000-8000-000000000000").unwrap();
        let history = Some(Uuid::parse_str("99990000-0000-4000-8000-000000000000").unwrap());
        write_session(&dirs.sessions, first, history, &two_turns());
        pointer::write(
            &dirs.pointer,
            Pointer {
                session_id: first,
                workspace: None,
                parent: None,
                removed: false,
            },
        )
        .unwrap();
        Data {
            _dir: dir,
            dirs,
            first,
        }
    }

    fn path(&self, id: Uuid) -> PathBuf {
        LogFile::path_for(&self.dirs.sessions, id)
    }

    fn bytes(&self, id: Uuid) -> Vec<u8> {
        std::fs::read(self.path(id)).unwrap()
    }

    fn lines(&self, id: Uuid) -> Vec<Vec<u8>> {
        self.bytes(id)
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// The entries of a log, as read back (not as built: segments keep
    /// the bytes they were read from).
    fn entries(&self, id: Uuid) -> Vec<LogEntry> {
        crate::store::log_file::read_lines(&self.path(id))
            .unwrap()
            .entries
    }

    fn current(&self) -> Uuid {
        pointer::read(&self.dirs.pointer)
            .unwrap()
            .unwrap()
            .session_id
    }

    /// Starts `SessionLog` and `Broadcaster` on the current session, as
    /// `pod serve` does.
    fn start(&self, faults: Faults) -> (Addr<SessionLog>, Addr<Broadcaster>) {
        let id = self.current();
        let (file, recovered) = LogFile::open(&self.path(id)).unwrap();
        let broadcaster = Broadcaster::new(greeting(id)).start();
        let dirs = self.dirs.clone();
        let log = SessionLog::new(file, id, recovered.lines, broadcaster.clone(), dirs, faults);
        (log.start(), broadcaster)
    }
}

fn two_turns() -> Vec<LogEntry> {
    let turn = |text: &str| {
        vec![
            LogEntry::UserInput {
                segments: vec![Segment::text(text)],
                at: "2026-11-30T09:00:00.000Z".into(),
                turn_id: None,
                request_id: None,
                resolved: Default::default(),
            },
            LogEntry::AssistantItems {
                items: vec![AssistantItem::Text {
                    text: format!("re: {text} \"quoted\" ünïcode"),
                }],
            },
            LogEntry::TurnEnd {
                reason: TurnEndReason::Completed,
                turn_id: None,
                request_id: None,
                usage: None,
                error: None,
            },
        ]
    };
    [turn("one"), turn("two")].concat()
}

/// Writes a complete session log: `session_start`, then `rest`.
fn write_session(dir: &Path, id: Uuid, compacted_from: Option<Uuid>, rest: &[LogEntry]) {
    let mut file = LogFile::create(&LogFile::path_for(dir, id)).unwrap();
    let start = LogEntry::SessionStart {
        session_id: id,
        created_at: LogEntry::now(),
        compacted_from,
        forked_from: None,
        provider: Some("openai".into()),
        model: Some("gpt-4o".into()),
        workspace: None,
        parent: None,
        replay_of: None,
    };
    for (seq, entry) in std::iter::once(&start).chain(rest).enumerate() {
        let mut line = serde_json::to_vec(&LineRef {
            seq: seq as u64,
            entry,
        })
        .unwrap();
        file.write_line(&mut line).unwrap();
    }
    file.sync().unwrap();
}

fn greeting(session_id: Uuid) -> Greeting {
    Greeting {
        pod: "test".into(),
        version: "0".into(),
        session_id,
        provider: PROVIDER.into(),
        model: MODEL.into(),
        workspace: "/".into(),
        pid: std::process::id(),
        approval: Default::default(),
        sandbox: Default::default(),
        mcp_servers: Vec::new(),
        access: Default::default(),
        access_reason: None,
        listen: None,
        allow_remote_always: false,
        warnings: Vec::new(),
    }
}

/// A client on a real socket, subscribed the way a `Connection` subscribes.
struct Client {
    reader: BufReader<OwnedReadHalf>,
}

impl Client {
    async fn attach(log: &Addr<SessionLog>, broadcaster: &Addr<Broadcaster>) -> Client {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let (client, server) = tokio::net::UnixStream::pair().unwrap();
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let server = server.into_std().unwrap();
        let (_outbox, socket) = Outbox::new(
            id,
            Sink::Socket(server),
            1 << 24,
            broadcaster.clone().recipient(),
        );
        let (registered, queued) = tokio::sync::oneshot::channel();
        log.do_send(Subscribe {
            id,
            access: Default::default(),
            socket,
            tail: None,
            registered,
        });
        queued.await.unwrap();
        let (read, _) = client.into_split();
        Client {
            reader: BufReader::new(read),
        }
    }

    async fn next(&mut self) -> Value {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("no frame within 10 s")
            .unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame ({e}): {line}"))
    }
}

fn switch(to: SwitchTo) -> Switch {
    Switch {
        to,
        provider: PROVIDER.into(),
        model: MODEL.into(),
    }
}

fn resume(session_id: &str) -> Switch {
    switch(SwitchTo::Resume {
        session_id: session_id.into(),
    })
}

/// The frames an attached client gets for a switch: `session_switched`
/// and, at once, the new session's snapshot.
async fn expect_switch(client: &mut Client, to: Uuid, reason: &str) -> Value {
    let announced = client.next().await;
    assert_eq!(announced["type"], "session_switched", "{announced}");
    assert_eq!(announced["new_session_id"], to.to_string());
    assert_eq!(announced["reason"], reason);
    let snapshot = client.next().await;
    assert_eq!(snapshot["type"], "snapshot", "{snapshot}");
    assert_eq!(snapshot["session_id"], to.to_string());
    assert_eq!(snapshot["greeting"]["session_id"], to.to_string());
    assert_eq!(snapshot["in_flight"], Value::Null);
    snapshot
}

fn parse(line: &[u8]) -> Value {
    serde_json::from_slice(line).unwrap()
}

#[actix_rt::test]
async fn new_session_starts_empty_and_every_client_gets_its_snapshot() {
    let data = Data::new();
    let before = data.bytes(data.first);
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    assert_eq!(client.next().await["entries"].as_array().unwrap().len(), 7);

    let new = log.send(switch(SwitchTo::New)).await.unwrap().unwrap();
    assert_eq!(new.entries.len(), 1);
    let snapshot = expect_switch(&mut client, new.session_id, "new").await;
    let entries = snapshot["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let start = &entries[0]["entry"];
    assert_eq!(start["kind"], "session_start");
    assert_eq!(start["compacted_from"], Value::Null);
    assert_eq!(start["forked_from"], Value::Null);
    assert_eq!(start["provider"], PROVIDER);
    assert_eq!(start["model"], MODEL);
    assert_eq!(data.current(), new.session_id, "the pointer moved");
    assert_eq!(data.bytes(data.first), before, "the old log is untouched");
    assert_eq!(data.lines(new.session_id).len(), 1);

    // Appends go to the new session, and so does a client attaching now.
    let seq = append(&log, two_turns()[0].clone()).await.unwrap();
    assert_eq!(seq, 1);
    let entry = client.next().await;
    assert_eq!(entry["type"], "entry");
    assert_eq!(entry["session_id"], new.session_id.to_string());
    assert_eq!(entry["seq"], 1);
    let mut late = Client::attach(&log, &broadcaster).await;
    let snapshot = late.next().await;
    assert_eq!(snapshot["session_id"], new.session_id.to_string());
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 2);
    assert_eq!(data.bytes(data.first), before);
}

#[actix_rt::test]
async fn fork_at_the_last_entry_copies_every_line_byte_for_byte() {
    let data = Data::new();
    let before = data.bytes(data.first);
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    client.next().await;

    let new = log
        .send(switch(SwitchTo::Fork { at_seq: None }))
        .await
        .unwrap()
        .unwrap();
    let snapshot = expect_switch(&mut client, new.session_id, "fork").await;
    assert_eq!(snapshot["entries"].as_array().unwrap().len(), 7);
    let old = data.lines(data.first);
    let forked = data.lines(new.session_id);
    assert_eq!(forked.len(), 7);
    assert_eq!(forked[1..], old[1..], "copies are the original lines");
    let start = &parse(&forked[0])["entry"];
    assert_eq!(start["session_id"], new.session_id.to_string());
    assert_eq!(start["forked_from"]["session_id"], data.first.to_string());
    assert_eq!(start["forked_from"]["seq"], 6);
    assert_eq!(
        start["compacted_from"],
        parse(&old[0])["entry"]["compacted_from"],
        "the history chain goes on"
    );
    assert_eq!(new.entries[1..], data.entries(data.first)[1..]);
    assert_eq!(data.bytes(data.first), before);
    assert_eq!(data.current(), new.session_id);
}

#[actix_rt::test]
async fn fork_at_an_earlier_turn_end_keeps_only_that_far() {
    let data = Data::new();
    let before = data.bytes(data.first);
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    client.next().await;

    let new = log
        .send(switch(SwitchTo::Fork { at_seq: Some(3) }))
        .await
        .unwrap()
        .unwrap();
    let snapshot = expect_switch(&mut client, new.session_id, "fork").await;
    let seqs: Vec<u64> = snapshot["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    let forked = data.lines(new.session_id);
    assert_eq!(forked[1..], data.lines(data.first)[1..=3]);
    assert_eq!(parse(&forked[0])["entry"]["forked_from"]["seq"], 3);
    assert_eq!(new.entries[1..], data.entries(data.first)[1..=3]);
    // The fork goes on from seq 4.
    assert_eq!(append(&log, two_turns()[3].clone()).await.unwrap(), 4);
    assert_eq!(data.lines(new.session_id).len(), 5);
    assert_eq!(data.bytes(data.first), before);
}

#[actix_rt::test]
async fn a_fork_point_that_is_not_a_turn_end_changes_nothing() {
    let data = Data::new();
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    client.next().await;
    for (at, says) in [
        (7, "past the last entry"),
        (2, "assistant_items, not a turn_end"),
    ] {
        let err = log
            .send(switch(SwitchTo::Fork { at_seq: Some(at) }))
            .await
            .unwrap()
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::InvalidParams);
        assert!(err.message.contains(says), "{}", err.message);
    }
    assert_eq!(data.current(), data.first);
    assert_eq!(std::fs::read_dir(&data.dirs.sessions).unwrap().count(), 1);
    // Nothing was announced: the next frame is the next switch's.
    let new = log.send(switch(SwitchTo::New)).await.unwrap().unwrap();
    expect_switch(&mut client, new.session_id, "new").await;
}

#[actix_rt::test]
async fn resume_by_prefix_loads_that_session_and_releases_the_old_one() {
    let data = Data::new();
    let other = Uuid::parse_str("bbbb2222-0000-4000-8000-000000000000").unwrap();
    write_session(&data.dirs.sessions, other, None, &two_turns()[..3]);
    let before = (data.bytes(data.first), data.bytes(other));
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    client.next().await;

    let resumed = log.send(resume("BBBB2")).await.unwrap().unwrap();
    assert_eq!(resumed.session_id, other);
    assert_eq!(resumed.entries.len(), 4);
    let snapshot = expect_switch(&mut client, other, "resume").await;
    let lines: Vec<Vec<u8>> = snapshot["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| serde_json::to_vec(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(data.current(), other);
    assert_eq!((data.bytes(data.first), data.bytes(other)), before);
    // The old log is free for another writer; the resumed one is not.
    assert!(LogFile::open(&data.path(data.first)).is_ok());
    assert!(matches!(
        LogFile::open(&data.path(other)),
        Err(LogError::Locked { .. })
    ));
    assert_eq!(append(&log, two_turns()[3].clone()).await.unwrap(), 4);
    let entry = client.next().await;
    assert_eq!(entry["session_id"], other.to_string());
    assert_eq!(entry["seq"], 4);

    // And back, by full id.
    let back = log
        .send(resume(&data.first.to_string()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back.entries.len(), 7);
    expect_switch(&mut client, data.first, "resume").await;
}

#[actix_rt::test]
async fn resume_errors_name_the_problem_and_change_nothing() {
    let data = Data::new();
    let twins = [
        "cccc0001-0000-4000-8000-000000000000",
        "cccc0002-0000-4000-8000-000000000000",
    ];
    for id in twins {
        write_session(&data.dirs.sessions, Uuid::parse_str(id).unwrap(), None, &[]);
    }
    let locked = Uuid::parse_str("dddd3333-0000-4000-8000-000000000000").unwrap();
    write_session(&data.dirs.sessions, locked, None, &[]);
    let _other_pod = LogFile::open(&data.path(locked)).unwrap();
    let (log, _) = data.start(Faults::default());

    let cases = [
        ("ffff", ErrorCode::SessionNotFound, "no session"),
        ("cccc", ErrorCode::SessionAmbiguous, "cccc0001, cccc0002"),
        ("dddd", ErrorCode::SessionLocked, "another pod"),
        (
            "aaaa",
            ErrorCode::InvalidParams,
            "already the current session",
        ),
        ("ab", ErrorCode::SessionNotFound, "at least 4"),
    ];
    for (query, code, says) in cases {
        let err = log.send(resume(query)).await.unwrap().err().unwrap();
        assert_eq!(err.code, code, "{query}: {}", err.message);
        assert!(err.message.contains(says), "{query}: {}", err.message);
    }
    assert_eq!(data.current(), data.first);
    assert_eq!(append(&log, two_turns()[0].clone()).await.unwrap(), 7);
}

#[actix_rt::test]
async fn compaction_is_announced_as_before() {
    let data = Data::new();
    let (log, broadcaster) = data.start(Faults::default());
    let mut client = Client::attach(&log, &broadcaster).await;
    client.next().await;
    let summary = LogEntry::HookInjectedItems {
        items: vec![crate::protocol::InjectedItem {
            source: "compact_summary".into(),
            text: "SUMMARY".into(),
        }],
    };
    let new = log
        .send(switch(SwitchTo::Compacted {
            first_entries: vec![summary],
            tokens_before: 100,
            tokens_after: 10,
        }))
        .await
        .unwrap()
        .unwrap();
    let done = client.next().await;
    assert_eq!(done["type"], "compact_done");
    assert_eq!(done["new_session_id"], new.session_id.to_string());
    for seq in 0..2 {
        let entry = client.next().await;
        assert_eq!(entry["type"], "entry");
        assert_eq!(entry["seq"], seq);
    }
    let start = &parse(&data.lines(new.session_id)[0])["entry"];
    assert_eq!(start["compacted_from"], data.first.to_string());
    assert_eq!(start["model"], MODEL);
}

/// Run as a child process by the crash tests below (`POD_SWITCH_CRASH`
/// names the data directory and the switch); `POD_FAULT` kills it at a step.
#[test]
#[ignore = "a child process of the crash tests"]
fn crash_child() {
    let Ok(spec) = std::env::var("POD_SWITCH_CRASH") else {
        return;
    };
    let (dir, what) = spec.split_once('|').unwrap();
    let dirs = Dirs {
        sessions: Path::new(dir).join("sessions"),
        pointer: Path::new(dir).join("pods/default.json"),
        workspace: Path::new(dir).to_owned(),
        parent: None,
    };
    let to = match what {
        "new" => SwitchTo::New,
        "fork" => SwitchTo::Fork { at_seq: Some(3) },
        other => SwitchTo::Resume {
            session_id: other.into(),
        },
    };
    let system = actix_rt::System::new();
    system.block_on(async move {
        let id = pointer::read(&dirs.pointer).unwrap().unwrap().session_id;
        let (file, recovered) = LogFile::open(&LogFile::path_for(&dirs.sessions, id)).unwrap();
        let broadcaster = Broadcaster::new(greeting(id)).start();
        let faults = Faults::from_env().unwrap();
        let log = SessionLog::new(file, id, recovered.lines, broadcaster, dirs, faults).start();
        log.send(switch(to)).await.unwrap().unwrap();
    });
}

/// Kills a child at `step` of the switch `what`, then checks what a restart
/// finds: the pointer names a complete session — the old one until the
/// pointer moved, the new one after — and no earlier log changed.
fn crash_at(what: &str, step: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let data = Data::in_dir(dir);
    let other = Uuid::parse_str("bbbb2222-0000-4000-8000-000000000000").unwrap();
    write_session(&data.dirs.sessions, other, None, &two_turns()[..3]);
    let before = (data.bytes(data.first), data.bytes(other));
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "pod::session_log::switch::tests::crash_child",
            "--ignored",
            "--nocapture",
        ])
        .env("POD_SWITCH_CRASH", format!("{}|{what}", root.display()))
        .env("POD_FAULT", format!("crash_at={step}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "{what}/{step}: not killed: {status}"
    );
    assert_eq!(
        (data.bytes(data.first), data.bytes(other)),
        before,
        "{what}/{step}: an existing log changed"
    );
    let current = data.current();
    let moved = step == "pointer_moved";
    assert_eq!(
        current != data.first,
        moved,
        "{what}/{step}: wrong session current"
    );
    // What `pod serve` does on restart: open and check the current log.
    let (_, recovered) = LogFile::open(&data.path(current)).unwrap();
    assert!(recovered.truncated_tail.is_none());
    if moved {
        match what {
            "new" => assert_eq!(recovered.entries.len(), 1),
            "fork" => assert_eq!(recovered.entries[1..], data.entries(data.first)[1..=3]),
            _ => assert_eq!(current, other),
        }
    } else {
        assert_eq!(recovered.entries.len(), 7);
    }
}

#[test]
fn kill_9_between_the_new_log_and_the_pointer_resumes_the_old_session() {
    for what in ["new", "fork", "bbbb"] {
        crash_at(what, "new_session_written");
    }
    crash_at("fork", "new_session_partial");
}

#[test]
fn kill_9_after_the_pointer_moved_resumes_the_complete_new_session() {
    for what in ["new", "fork", "bbbb"] {
        crash_at(what, "pointer_moved");
    }
}
