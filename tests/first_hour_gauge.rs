//! The context gauge after a switch (issue 28, item 10): `/new`, a resume or
//! a compaction moves the pod to another conversation, and the `status` it
//! sends then measures that conversation, not the one before.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use harness::Pod;
use serde_json::json;

#[test]
fn the_gauge_follows_the_conversation_after_a_new_session() {
    let pod = Pod::builder()
        .script("{\"events\":[{\"text\":\"ok\"}]}\n")
        .start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run(&"a long message to fill the context. ".repeat(2000));
    let full = client.until_with("a status after the turn", |v| {
        v["type"] == "status" && v["state"] == "idle" && v["context_tokens"].as_u64() > Some(1000)
    });
    client.send(json!({"type":"new_session"}));
    client.until_type("session_switched");
    let fresh = client.until_with("a status of the new session", |v| {
        v["type"] == "status" && v["context_tokens"].as_u64() < full["context_tokens"].as_u64()
    });
    let (fresh, full) = (
        fresh["context_tokens"].as_u64(),
        full["context_tokens"].as_u64(),
    );
    assert!(
        fresh.unwrap() * 2 < full.unwrap(),
        "the new session's gauge is its own: {fresh:?} after {full:?}"
    );
}
