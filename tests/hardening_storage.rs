//! The disk and the file system misbehaving under a running pod: a file
//! size limit, a session log deleted or cut behind its back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod hardening_common;
mod harness;

use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use hardening_common::{exits_within, Running};
use harness::{eventually, Client, Pod, POD};
use serde_json::Value;

fn current_log(pod: &Pod) -> std::path::PathBuf {
    let pointer: Value = serde_json::from_slice(&std::fs::read(pod.state_file()).unwrap()).unwrap();
    pod.data_dir.join(format!(
        "sessions/{}.jsonl",
        pointer["session_id"].as_str().unwrap()
    ))
}

/// Entries a client was sent after its snapshot.
fn entry_kinds(client: &Client) -> Vec<String> {
    client
        .frames
        .iter()
        .filter(|f| f["type"] == "entry")
        .map(|f| f["entry"]["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `text` and expects the pod to refuse to commit it, naming the log
/// and what happened to it.
fn run_fails_with_storage_error(pod: &Pod, what: &str) {
    let log = current_log(pod);
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("after the damage");
    let err = client.until_type("error");
    assert_eq!(err["code"], "storage_error", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains(what) && message.contains(&log.display().to_string()),
        "{message}"
    );
    assert!(
        entry_kinds(&client).is_empty(),
        "entries were published into a log nobody can read back: {:?}",
        entry_kinds(&client)
    );
    // Still alive and answering.
    let mut other = pod.client();
    other.until_type("snapshot");
}

/// Item 5: a session log deleted while the pod runs is noticed at the next
/// append; nothing more goes into the unlinked file.
#[test]
fn a_deleted_log_stops_appends_with_a_storage_error() {
    let pod = Pod::start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("one");
    client.until_entry("turn_end");
    std::fs::remove_file(current_log(&pod)).unwrap();
    run_fails_with_storage_error(&pod, "was deleted");
}

/// Item 5: likewise a log truncated behind the pod's back.
#[test]
fn a_truncated_log_stops_appends_with_a_storage_error() {
    let pod = Pod::start();
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("one");
    client.until_entry("turn_end");
    let log = current_log(&pod);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    run_fails_with_storage_error(&pod, "was truncated");
}

/// Item 5: a pointer naming a log that is gone stops startup with an error
/// naming the file, instead of quietly starting a new, empty session.
#[test]
fn a_pointer_to_a_missing_log_is_an_error_naming_it() {
    let mut pod = Pod::start();
    let log = current_log(&pod);
    pod.kill9();
    std::fs::remove_file(&log).unwrap();
    let output = exits_within(
        pod.command("serve").arg("--workspace").arg(&pod.workspace),
        Duration::from_secs(10),
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&log.display().to_string()) && stderr.contains("--new-session"),
        "{stderr}"
    );
    let sessions = std::fs::read_dir(pod.data_dir.join("sessions"))
        .unwrap()
        .count();
    assert_eq!(sessions, 0, "a new session was started anyway");
}

/// Item 4: a file size limit (`ulimit -f`) makes an append that would pass
/// it a `storage_error`, as on a full disk, instead of killing the pod with
/// SIGXFSZ; smaller appends still work.
#[test]
fn a_file_size_limit_is_a_storage_error_not_a_silent_death() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let socket = dir.path().join("run/pod.sock");
    let mut cmd = Command::new(POD);
    cmd.arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--workspace")
        .arg(&workspace)
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    unsafe {
        cmd.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(64 * 1024),
                maximum: Some(64 * 1024),
            };
            rustix::process::setrlimit(rustix::process::Resource::Fsize, limit)?;
            Ok(())
        });
    }
    let mut pod = Running::new(cmd.spawn().unwrap());
    eventually("the pod to listen", Duration::from_secs(20), || {
        UnixStream::connect(&socket).is_ok()
    });
    let mut client = Client::connect(&socket);
    client.until_type("snapshot");
    client.send(serde_json::json!({"type":"run","segments":[
        {"type":"paste","id":1,"text":"x".repeat(100_000)}
    ]}));
    let err = client.until_type("error");
    assert_eq!(err["code"], "storage_error", "{err}");
    assert!(
        pod.child().try_wait().unwrap().is_none(),
        "the pod died at the file size limit"
    );
    client.run("small");
    client.until_entry("turn_end");
}
