//! A client that stops reading must not stall the others nor grow the pod.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{Client, Pod};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn a_client_that_never_reads_does_not_stall_others_and_memory_stays_bounded() {
    // Each reply is ~200 KB of text in 2,000 deltas.
    let chunk = "x".repeat(100);
    let events: Vec<serde_json::Value> = (0..2000)
        .map(|_| serde_json::json!({ "text": chunk }))
        .collect();
    let script = serde_json::json!({ "events": events }).to_string();
    let pod = Pod::builder()
        .script(&script)
        .arg("--max-client-lag-bytes")
        .arg("1048576")
        .start();
    // Connects and never reads a byte.
    let stuck = std::os::unix::net::UnixStream::connect(&pod.socket).unwrap();
    let mut reader = pod.client();
    reader.until_type("snapshot");
    let baseline = rss_kib(pod.pid());
    let mut peak = baseline;
    for i in 0..15 {
        reader.run(&format!("flood {i}"));
        reader.until_entry("turn_end");
        peak = peak.max(rss_kib(pod.pid()));
    }
    // 15 × 400 KB (deltas + entries) went out; the stuck client may hold
    // at most its lag limit plus socket buffers.
    assert!(
        peak < baseline + 24 * 1024,
        "pod RSS grew from {baseline} KiB to {peak} KiB while a client lagged"
    );
    // The stuck client was cut off with `lagged` rather than skipped.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut lagged = Client::connect(&pod.socket);
    lagged.until_type("snapshot");
    drop(lagged);
    let mut text = String::new();
    let mut stuck_reader = std::io::BufReader::new(stuck);
    loop {
        text.clear();
        match std::io::BufRead::read_line(&mut stuck_reader, &mut text) {
            Ok(0) => break,
            Ok(_) if text.contains("\"lagged\"") => break,
            Ok(_) => {}
            Err(e) => panic!("stuck client: {e}"),
        }
    }
    assert!(text.is_empty() || text.contains("\"lagged\""), "{text}");
}
