//! What is acknowledged is on disk; what is not durable is never shown; a
//! crash at any instant leaves a log the next pod starts on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{eventually, succeeded, Pod};
use serde_json::Value;

#[test]
fn a_failing_write_publishes_nothing_and_the_requester_gets_the_error() {
    // session_start is written at startup; SessionLog write #1 is the
    // user_input, #2 (the assistant's text) fails.
    let pod = Pod::builder()
        .env("POD_FAULT", "fail_writes_after=1")
        .start();
    let mut a = pod.client();
    a.until_type("snapshot");
    let mut b = pod.client();
    b.until_type("snapshot");
    a.run("hello");
    let err = a.until_type("error");
    assert_eq!(err["code"], "storage_error", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("injected"),
        "{err}"
    );
    // Every client hears a pod error; none saw an entry past the user input.
    let err_b = b.until_type("error");
    assert_eq!(err_b["code"], "storage_error");
    for client in [&a, &b] {
        let kinds: Vec<Value> = client
            .frames
            .iter()
            .filter(|f| f["type"] == "entry")
            .map(|f| f["entry"]["kind"].clone())
            .collect();
        assert_eq!(kinds, vec![Value::from("user_input")]);
    }
    let log = pod.log_lines();
    assert_eq!(
        log.len(),
        2,
        "only session_start and user_input are durable: {log:?}"
    );
}

#[test]
fn kill_9_during_a_burst_loses_nothing_any_client_saw_and_restarts_cleanly() {
    let mut pod = Pod::start();
    let mut observer = pod.client();
    observer.until_type("snapshot");
    let mut driver = pod.client();
    driver.until_type("snapshot");
    for i in 0..40 {
        driver.run(&format!("burst {i}"));
    }
    let mut entries = 0;
    while entries < 25 {
        let frame = observer.next().unwrap();
        if frame["type"] == "entry" {
            entries += 1;
        }
    }
    pod.kill9();
    while observer.next().is_some() {}
    let seen = observer.log_view();
    let log = pod.log_lines();
    assert!(seen.len() <= log.len());
    for (i, (_, seq, entry)) in seen.iter().enumerate() {
        assert_eq!(*seq, log[i]["seq"].as_u64().unwrap());
        assert_eq!(
            entry, &log[i]["entry"],
            "entry {i} a client saw is not in the file"
        );
    }

    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).start();
    let mut after = pod.client();
    let snapshot = after.until_type("snapshot");
    let restored = snapshot["entries"].as_array().unwrap();
    assert!(restored.len() >= log.len());
    for (i, line) in log.iter().enumerate() {
        assert_eq!(&restored[i], line, "line {i} changed across the restart");
    }
    // A turn the crash cut short is closed as interrupted.
    eventually("the last turn to be closed", Duration::from_secs(5), || {
        let log = pod.log_lines();
        log.last().unwrap()["entry"]["kind"] == "turn_end"
    });
    succeeded(
        pod.command("send")
            .arg("--text")
            .arg("still there?")
            .output()
            .unwrap(),
    );
}

#[test]
fn a_torn_last_line_is_cut_and_a_corrupt_middle_line_stops_startup() {
    let pod = Pod::start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("one");
    c.until_entry("turn_end");
    let session = pod.log_lines()[0]["entry"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dir = pod.into_dir();
    let path = dir.path().join(format!("data/sessions/{session}.jsonl"));
    let good = std::fs::read_to_string(&path).unwrap();

    std::fs::write(
        &path,
        format!("{good}{{\"seq\":5,\"entry\":{{\"kind\":\"user_in"),
    )
    .unwrap();
    let pod = Pod::builder().in_dir(dir).start();
    // session_start, user_input, environment, assistant text, turn_end.
    assert_eq!(pod.log_lines().len(), 5);
    let dir = pod.into_dir();

    let mut lines: Vec<&str> = good.lines().collect();
    lines[2] = "{\"seq\":2,\"entry\":{\"kind\":garbage}}";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = std::process::Command::new(harness::POD)
        .arg("serve")
        .arg("--socket")
        .arg(dir.path().join("run/pod.sock"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("{session}.jsonl:3")), "{stderr}");
}
