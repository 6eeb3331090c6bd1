//! Hostile or unusual clients: half-closed sockets, clients that read
//! everything of a huge frame, clients that never read at shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use harness::{Client, Pod};
use serde_json::{json, Value};

/// Reads frames from a raw socket until one matches; `None` at EOF.
fn read_until(reader: &mut BufReader<UnixStream>, pred: impl Fn(&Value) -> bool) -> Option<Value> {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => {
                let frame: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("pod sent a bad frame ({e}): {line:.200}"));
                if pred(&frame) {
                    return Some(frame);
                }
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

/// Item 14: `printf '{"type":"run",…}' | socat - UNIX:…` — a last frame
/// without its newline, then EOF on the pod's read side. The client still
/// gets its `response` and the turn's frames up to `turn_end`, and the pod
/// keeps serving everyone else.
#[test]
fn a_half_closed_client_gets_its_response_and_the_whole_turn() {
    let pod = Pod::start();
    let stream = UnixStream::connect(&pod.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let frame = json!({"type":"run","request_id":"r1","segments":[{"type":"text","text":"hi"}]});
    writer.write_all(frame.to_string().as_bytes()).unwrap();
    writer.shutdown(Shutdown::Write).unwrap();
    let mut reader = BufReader::new(stream);
    let response = read_until(&mut reader, |f| f["type"] == "response")
        .expect("the half-closed client got no response");
    assert_eq!(response["request_id"], "r1", "{response}");
    read_until(&mut reader, |f| {
        f["type"] == "entry" && f["entry"]["kind"] == "turn_end"
    })
    .expect("the half-closed client did not get the turn to its turn_end");

    // The pod survived and serves the next client.
    let mut other = pod.client();
    other.until_type("snapshot");
    other.run("still there?");
    other.until_entry("turn_end");
}

/// Item 14: several frames and a last one without newline in one write,
/// then EOF: every one of them is executed once.
#[test]
fn every_frame_before_eof_is_executed_once() {
    let pod = Pod::start();
    let stream = UnixStream::connect(&pod.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let notify = |id: &str| json!({"type":"notify","request_id":id,"message":id}).to_string();
    let bytes = format!("{}\n\n{}\n{}", notify("n1"), notify("n2"), notify("n3"));
    writer.write_all(bytes.as_bytes()).unwrap();
    writer.shutdown(Shutdown::Write).unwrap();
    let mut reader = BufReader::new(stream);
    for id in ["n1", "n2", "n3"] {
        let response = read_until(&mut reader, |f| f["type"] == "response")
            .unwrap_or_else(|| panic!("no response for {id}"));
        assert_eq!(response["request_id"], id);
    }
    let mut other = pod.client();
    other.until_type("snapshot");
}

/// Megabyte pastes must stay in the session, not be compacted away.
const NO_COMPACTION: [&str; 2] = ["--context-window", "100000000"];

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Reading EOF no longer ends a connection (item 14), so a client that
/// hangs up while nothing is sent to it must still be noticed: connections
/// of clients that came and went do not pile up.
#[test]
fn clients_that_hang_up_while_the_pod_is_idle_are_forgotten() {
    let pod = Pod::start();
    let mut first = pod.client();
    first.until_type("snapshot");
    let baseline = open_fds(pod.pid());
    for _ in 0..20 {
        let mut client = pod.client();
        client.until_type("snapshot");
    }
    harness::eventually(
        "the pod to close the sockets of clients that left",
        Duration::from_secs(10),
        || open_fds(pod.pid()) <= baseline,
    );
}

fn paste_run(bytes: usize) -> Value {
    json!({"type":"run","segments":[{"type":"paste","id":1,"text":"p".repeat(bytes)}]})
}

/// Item 13: a frame larger than the lag limit is not lag while the client
/// reads — a 2 MB paste with a 1 MiB limit reaches a reading client whole,
/// twice — but a client that never reads is still cut off.
#[test]
fn a_reading_client_gets_frames_larger_than_the_lag_limit_and_a_stuck_one_is_cut_off() {
    let pod = Pod::builder()
        .args(["--max-client-lag-bytes", "1048576"])
        .args(NO_COMPACTION)
        .start();
    let stuck = UnixStream::connect(&pod.socket).unwrap();
    let mut reader = pod.client();
    reader.until_type("snapshot");
    for _ in 0..3 {
        reader.send(paste_run(2_000_000));
        let end = reader.until(|f| {
            f["type"] == "error" || (f["type"] == "entry" && f["entry"]["kind"] == "turn_end")
        });
        assert_eq!(end["type"], "entry", "a reading client was cut off: {end}");
    }
    let input = reader
        .frames
        .iter()
        .find(|f| f["type"] == "entry" && f["entry"]["kind"] == "user_input")
        .unwrap();
    assert_eq!(
        input["entry"]["segments"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        2_000_000
    );

    // The client that never read was disconnected: it reads what its
    // socket buffer held, then EOF.
    stuck
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut rest = Vec::new();
    (&stuck)
        .read_to_end(&mut rest)
        .expect("the stuck client was not disconnected");
    assert!(
        rest.len() < 6_000_000,
        "the stuck client got everything ({} bytes)",
        rest.len()
    );
}

/// Item 15: clients that never read (socket buffers full) do not delay
/// shutdown by a grace period each: one deadline covers them all.
#[test]
fn shutdown_with_many_stuck_clients_takes_one_grace_period() {
    let mut pod = Pod::builder().args(NO_COMPACTION).start();
    let mut driver = pod.client();
    driver.until_type("snapshot");
    driver.send(paste_run(3_000_000));
    driver.until_entry("turn_end");
    // Each of these is sent a 3 MB snapshot it never reads.
    let stuck: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&pod.socket).unwrap())
        .collect();
    // Connections are registered in the order they were accepted: once a
    // later one has its snapshot, the stuck ones have theirs queued.
    let mut last = Client::connect(&pod.socket);
    last.until_type("snapshot");
    let started = Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pod.pid() as i32).unwrap(),
        rustix::process::Signal::Term,
    )
    .unwrap();
    let status = pod.wait_exit(Duration::from_secs(20));
    let took = started.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_millis(3000),
        "shutdown took {took:?} with {} stuck clients",
        stuck.len()
    );
}
