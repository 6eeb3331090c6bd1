//! A real turn through a real model server, opt-in: `POD_REAL_MODEL_URL`
//! names an OpenAI-compatible base URL (`http://127.0.0.1:8011/v1`), as
//! `scripts/local-model.sh test` sets it after starting llama-cpp-python's
//! server or llama-server with SmolLM2-135M. Without the variable the test
//! passes at once, CI included: CI has no model server (building one takes
//! minutes), and a test nobody asked to run must not fail a build. Every
//! other test here runs against wire-exact servers instead
//! (`tests/provider_local.rs` holds what the real servers sent).
//!
//! `POD_REAL_MODEL_CONTEXT` is the server's context size (default 8192);
//! `POD_REAL_MODEL_ARGS` adds `pod serve` flags (space-separated), e.g.
//! `--tool-choice auto` for llama-cpp-python; `POD_REAL_MODEL_KEY` is the
//! API key the pod sends (LiteLLM's `LITELLM_MASTER_KEY`). A 135M model on a busy CPU
//! takes from seconds to minutes a call, so the client waits up to
//! `POD_REAL_MODEL_WAIT` seconds (default 900) for each frame, and a turn
//! gets at most [`STEPS`] model calls: such a model calls tools in a loop.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{Client, Pod};
use serde_json::{json, Value};

/// How many turns the model gets to call a tool: a 135M model does not
/// always do what it is asked.
const TRIES: usize = 3;

/// Model calls per turn (`--max-steps`).
const STEPS: &str = "3";

/// Runs one turn, approving every call it asks about; returns its frames
/// from `turn_start` on.
fn turn_approving(client: &mut Client, text: &str) -> Vec<Value> {
    let from = client.frames.len();
    client.run(text);
    loop {
        let frame = client
            .next()
            .expect("the pod closed the connection mid-turn");
        let entry = &frame["entry"];
        if frame["type"] == "entry" && entry["kind"] == "approval_request" {
            let call_id = entry["call_id"].as_str().unwrap().to_owned();
            client.send(
                json!({"type":"approve","call_id":call_id,"decision":"allow",
                "request_id":format!("a-{call_id}")}),
            );
        }
        if frame["type"] == "entry" && entry["kind"] == "turn_end" {
            return client.frames[from..].to_vec();
        }
    }
}

fn entries<'a>(frames: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    frames
        .iter()
        .filter(move |f| f["type"] == "entry" && f["entry"]["kind"] == kind)
        .map(|f| &f["entry"])
}

#[test]
fn a_real_model_answers_calls_a_tool_and_the_call_is_approved() {
    let Some(url) = std::env::var("POD_REAL_MODEL_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("POD_REAL_MODEL_URL is not set: no real model to try (scripts/local-model.sh)");
        return;
    };
    let context = std::env::var("POD_REAL_MODEL_CONTEXT").unwrap_or_else(|_| "8192".into());
    let extra = std::env::var("POD_REAL_MODEL_ARGS").unwrap_or_default();
    let mut builder = Pod::builder().args([
        "--provider",
        "openai",
        "--model",
        "local",
        "--base-url",
        &url,
        "--context-window",
        &context,
        "--max-output-tokens",
        "256",
        "--approval",
        "ask",
        "--max-steps",
        STEPS,
    ]);
    for arg in extra.split_whitespace() {
        builder = builder.arg(arg);
    }
    if let Ok(key) = std::env::var("POD_REAL_MODEL_KEY") {
        builder = builder.env("OPENAI_API_KEY", &key);
    }
    let pod = builder.start();
    let mut client = pod.client();
    let wait = std::env::var("POD_REAL_MODEL_WAIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(900);
    client.patient(Duration::from_secs(wait));
    client.until_type("snapshot");

    // A plain turn: the model answers something, and the turn ends.
    let frames = turn_approving(&mut client, "Say hello in one short sentence.");
    let end = entries(&frames, "turn_end").next().unwrap();
    assert!(
        entries(&frames, "assistant_items").next().is_some(),
        "the model answered nothing: {end}"
    );
    assert!(
        end["reason"] == "completed"
            || end["reason"] == "max_steps"
            || end["error"]["code"] == "output_limit",
        "{end}"
    );

    // A tool call, asked about and approved, then run. Reading a file runs
    // unasked in mode `ask` (and a 135M model asked to `cat` a file reads
    // it with read_file); writing one and running bash are asked about.
    // The request that names its tool comes first: such a model copies its
    // last call, and asked first to create a file SmolLM2 on llama-server
    // called job_kill, then job_kill again for every later prompt.
    let prompts = [
        "Run the shell command `ls -l` with the bash tool.",
        "Create a file named hello.txt that contains the word hi.",
    ];
    for attempt in 1..=TRIES {
        let frames = turn_approving(&mut client, prompts[(attempt - 1) % prompts.len()]);
        let end = entries(&frames, "turn_end").next().unwrap().clone();
        let approved = entries(&frames, "approval_decision").any(|d| d["decision"] == "allow");
        let asked = entries(&frames, "approval_request").count();
        let ran = entries(&frames, "tool_results")
            .flat_map(|r| r["results"].as_array().cloned().unwrap_or_default())
            .any(|r| r["is_error"] != true);
        let called: Vec<&Value> = entries(&frames, "assistant_items")
            .flat_map(|e| e["items"].as_array().into_iter().flatten())
            .filter(|item| item["type"] == "tool_call")
            .map(|call| &call["name"])
            .collect();
        eprintln!(
            "try {attempt}: called {called:?}, {asked} approval(s) asked, ran: {ran}; turn_end: {end}"
        );
        if asked > 0 {
            assert!(approved, "an asked call was not approved: {end}");
            assert!(ran, "an approved call did not run: {end}");
            return;
        }
    }
    panic!("the model called no tool that is asked about in {TRIES} turns");
}
