//! AGENTS.md reaches the model through the log: committed after the first
//! turn's input, again when it changes, and into a compacted session.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use harness::Pod;
use serde_json::{json, Value};
use support::{data_frames, Reply, Server};

fn text_reply(text: &str) -> Reply {
    let chunk = json!({"choices":[{"index":0,"delta":{"role":"assistant","content":text},
        "finish_reason":"stop"}]});
    Reply::sse(&data_frames(&[&chunk.to_string(), "[DONE]"]))
}

fn instructions(lines: &[Value]) -> Vec<(u64, String)> {
    lines
        .iter()
        .filter(|l| {
            l["entry"]["kind"] == "hook_injected_items"
                && l["entry"]["items"][0]["source"] == "project_instructions"
        })
        .map(|l| {
            (
                l["seq"].as_u64().unwrap(),
                l["entry"]["items"][0]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn agents_md_reaches_the_model_and_the_log_and_follows_edits_and_compaction() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::start(vec![
        text_reply("one"),
        text_reply("two"),
        text_reply("three"),
        text_reply("A short summary."),
    ]));
    let pod = Pod::builder()
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("{}/v1", server.url),
        ])
        .start();
    std::fs::write(pod.workspace.join("AGENTS.md"), "Always answer in haiku.\n").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    let long = "please read this carefully ".repeat(200);
    for text in ["first", "second"] {
        c.run(&format!("{text}: {long}"));
        c.until_entry("turn_end");
    }
    let lines = pod.log_lines();
    let given = instructions(&lines);
    assert_eq!(given.len(), 1, "committed once while unchanged: {given:?}");
    assert_eq!(given[0].0, 2, "right after the first user_input");
    assert_eq!(given[0].1, "AGENTS.md\nAlways answer in haiku.\n");
    let first_request = server.requests()[0].json().to_string();
    assert!(
        first_request.contains("Always answer in haiku."),
        "{first_request}"
    );

    std::fs::write(pod.workspace.join("AGENTS.md"), "Answer in prose.\n").unwrap();
    c.run("third");
    c.until_entry("turn_end");
    let given = instructions(&pod.log_lines());
    assert_eq!(given.len(), 2);
    assert_eq!(given[1].1, "AGENTS.md\nAnswer in prose.\n");

    c.send(json!({"type":"compact"}));
    let done = c.until_type("compact_done");
    let new_session = done["new_session_id"].as_str().unwrap().to_owned();
    let compacted = pod.session_lines(&new_session);
    assert_eq!(
        compacted[1]["entry"]["items"][0]["source"],
        "compact_summary"
    );
    assert_eq!(
        compacted[2]["entry"]["items"][0]["source"],
        "project_instructions"
    );
    assert_eq!(
        compacted[2]["entry"]["items"][0]["text"],
        "AGENTS.md\nAnswer in prose.\n"
    );
}
