//! Every frame a client can send wrong gets an `error` with a code; the
//! connection keeps working and no other client hears of it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use harness::Pod;
use serde_json::json;

#[test]
fn each_bad_frame_gets_its_error_code_and_the_connection_keeps_working() {
    let pod = Pod::builder().arg("--max-frame-bytes").arg("1024").start();
    let mut bystander = pod.client();
    bystander.until_type("snapshot");
    let mut c = pod.client();
    c.until_type("snapshot");

    let long = format!(
        "{{\"type\":\"notify\",\"message\":\"{}\"}}\n",
        "x".repeat(4000)
    );
    let cases: Vec<(&[u8], &str)> = vec![
        (b"this is not json\n", "bad_frame"),
        (b"[1,2,3]\n", "bad_frame"),
        (b"\"just a string\"\n", "bad_frame"),
        (b"{\"no_type\":1}\n", "bad_frame"),
        (b"\xff\xfe\xfd{}\n", "bad_frame"),
        (b"{\"type\":\"teleport\"}\n", "unknown_method"),
        (b"{\"type\":\"run\"}\n", "invalid_params"),
        (
            b"{\"type\":\"run\",\"segments\":\"hi\"}\n",
            "invalid_params",
        ),
        (
            b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":5}]}\n",
            "invalid_params",
        ),
        (b"{\"type\":\"notify\",\"message\":42}\n", "invalid_params"),
        (
            b"{\"type\":\"get_session\",\"session_id\":7}\n",
            "invalid_params",
        ),
        (
            b"{\"type\":\"get_session\",\"session_id\":\"nope\"}\n",
            "session_not_found",
        ),
        (long.as_bytes(), "frame_too_large"),
    ];
    for (i, (frame, code)) in cases.iter().enumerate() {
        c.send_unchecked(frame);
        let err = c.until_type("error");
        assert_eq!(
            err["code"],
            *code,
            "case {i}: {}",
            String::from_utf8_lossy(frame)
        );
        assert!(!err["message"].as_str().unwrap().is_empty());
    }
    // Errors echo the request_id when the frame had one.
    c.send(json!({"type":"teleport","request_id":"r-1"}));
    assert_eq!(c.until_type("error")["request_id"], "r-1");

    // Still usable: a real request is answered.
    c.send(json!({"type":"list_completions","request_id":"ok","kind":"file","prefix":""}));
    let response = c.until_type("response");
    assert_eq!(response["request_id"], "ok");

    // The bystander saw none of it: its next frame is the answer to its own request.
    bystander
        .send(json!({"type":"list_completions","request_id":"mine","kind":"file","prefix":""}));
    let next = bystander.next().unwrap();
    assert_eq!(next["type"], "response", "bystander got {next}");
    assert_eq!(next["request_id"], "mine");
}

#[test]
fn a_client_resetting_its_connection_is_no_ones_business() {
    let pod = Pod::start();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    for _ in 0..20 {
        let mut c = pod.client();
        c.send_raw(b"{\"type\":\"run\",\"segm");
        drop(c);
    }
    watcher.send(json!({"type":"list_completions","request_id":"after","kind":"file","prefix":""}));
    let next = watcher.next().unwrap();
    assert_eq!(next["type"], "response", "watcher got {next}");
}

#[test]
fn unknown_segments_and_fields_survive_into_the_log_and_every_frame() {
    let pod = Pod::start();
    let mut a = pod.client();
    a.until_type("snapshot");
    let segments = json!([
        {"type":"text","text":"look at this","lang":"en"},
        {"type":"hologram","frames":[1,2,3],"meta":{"fps":24}}
    ]);
    a.send(json!({"type":"run","segments":segments,"request_id":"u1","extra_field":true}));
    let entry = a.until_entry("user_input");
    assert_eq!(entry["entry"]["segments"], segments);
    a.until_entry("turn_end");
    let log = pod.log_lines();
    assert_eq!(
        harness::first_of(&log, "user_input")["entry"]["segments"],
        segments
    );
    let reply = harness::first_of(&log, "assistant:text")["entry"]["items"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        reply.contains("[unknown input: kind=hologram]"),
        "the model was told about the unknown segment: {reply}"
    );
    let mut b = pod.client();
    let snapshot = b.until_type("snapshot");
    assert_eq!(snapshot["entries"][1]["entry"]["segments"], segments);
}
