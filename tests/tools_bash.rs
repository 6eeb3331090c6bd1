//! The bash tool with real processes: output, exit codes, capping, timeout,
//! and cancellation killing the whole process group.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::time::{Duration, Instant};

use pod::tools::{ToolLimits, ToolOutcome, Toolbox};
use pod::workspace::Workspace;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn toolbox(limits: ToolLimits) -> (tempfile::TempDir, Toolbox) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    (dir, Toolbox::new(ws, limits))
}

async fn bash(toolbox: &Toolbox, command: &str) -> ToolOutcome {
    toolbox
        .call(
            "bash",
            &json!({ "command": command }),
            CancellationToken::new(),
            no_output(),
        )
        .await
}

#[tokio::test]
async fn runs_in_the_workspace_and_merges_streams() {
    let (dir, tb) = toolbox(ToolLimits::default());
    let out = bash(&tb, "pwd; echo out; echo err >&2; echo again").await;
    assert!(!out.is_error, "{}", out.output);
    let root = dir.path().canonicalize().unwrap();
    assert_eq!(
        out.output,
        format!("{}\nout\nerr\nagain\n[exit code: 0]", root.display())
    );
}

#[tokio::test]
async fn reports_failures_and_missing_trailing_newline() {
    let (_dir, tb) = toolbox(ToolLimits::default());
    let out = bash(&tb, "printf partial; exit 3").await;
    assert!(out.is_error);
    assert_eq!(out.output, "partial\n[exit code: 3]");
    let out = bash(&tb, "kill -9 $$").await;
    assert!(out.is_error);
    assert_eq!(out.output, "[killed by signal 9]");
    let out = bash(&tb, "cat").await;
    assert_eq!(out.output, "[exit code: 0]", "stdin must be empty");
}

#[tokio::test]
async fn huge_output_is_capped_with_head_and_tail() {
    let (_dir, tb) = toolbox(ToolLimits {
        output_cap_bytes: 4096,
        ..ToolLimits::default()
    });
    let out = bash(
        &tb,
        "echo FIRST; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo LAST",
    )
    .await;
    assert!(!out.is_error);
    assert!(out.output.len() <= 4096, "{}", out.output.len());
    assert!(out.output.starts_with("FIRST\nxxx"));
    assert!(
        out.output.ends_with("xxx\nLAST\n[exit code: 0]"),
        "{}",
        &out.output[out.output.len() - 60..]
    );
    assert!(out.output.contains(" bytes cut ...]"));
}

#[tokio::test]
async fn times_out_and_kills_the_group() {
    let (dir, tb) = toolbox(ToolLimits {
        bash_timeout: Duration::from_millis(300),
        ..ToolLimits::default()
    });
    let started = Instant::now();
    let out = bash(
        &tb,
        "echo before; (sleep 1; touch marker) & sleep 1; touch marker2",
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(out.is_error);
    assert!(out.output.starts_with("before\n"), "{}", out.output);
    assert!(
        out.output.contains("timed out after 0.3s"),
        "{}",
        out.output
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(!dir.path().join("marker").exists());
    assert!(!dir.path().join("marker2").exists());
}

#[tokio::test]
async fn timeout_secs_argument_cannot_exceed_the_limit() {
    let (_dir, tb) = toolbox(ToolLimits {
        bash_timeout: Duration::from_millis(200),
        ..ToolLimits::default()
    });
    let started = Instant::now();
    let out = tb
        .call(
            "bash",
            &json!({"command": "sleep 5", "timeout_secs": 100}),
            CancellationToken::new(),
            no_output(),
        )
        .await;
    assert!(out.is_error && out.output.contains("timed out"));
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn cancellation_kills_child_and_grandchildren_promptly() {
    let (dir, tb) = toolbox(ToolLimits::default());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    // A child in the foreground, a grandchild in a subshell in the
    // background, and one more level behind `bash -c`.
    let command =
        "(sleep 1; touch grandchild) & bash -c 'sleep 1; touch nested' & sleep 1; touch marker";
    let out = tb
        .call("bash", &json!({ "command": command }), cancel, no_output())
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(out.is_error);
    assert!(out.output.contains("cancelled"), "{}", out.output);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    for marker in ["marker", "grandchild", "nested"] {
        assert!(!dir.path().join(marker).exists(), "{marker} was created");
    }
}

#[tokio::test]
async fn background_jobs_do_not_outlive_the_call() {
    let (dir, tb) = toolbox(ToolLimits::default());
    let started = Instant::now();
    let out = bash(&tb, "(sleep 1; touch late) & echo started").await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.output, "started\n[exit code: 0]");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(!dir.path().join("late").exists());
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let (dir, tb) = toolbox(ToolLimits::default());
    let args = json!({"command": "(sleep 1; touch dropped) & sleep 1; touch dropped2"});
    let call = tb.call("bash", &args, CancellationToken::new(), no_output());
    let _ = tokio::time::timeout(Duration::from_millis(200), call).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(!dir.path().join("dropped").exists());
    assert!(!dir.path().join("dropped2").exists());
}

/// A sink for output streamed while a tool runs, for calls that only look
/// at the result.
fn no_output() -> pod::tools::OutputSink {
    std::sync::Arc::new(|_: &str| {})
}
