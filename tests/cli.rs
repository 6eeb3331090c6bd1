//! The command line as scripts use it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::os::unix::fs::PermissionsExt;

use harness::{succeeded, Pod, POD};
use serde_json::json;

#[test]
fn send_prints_the_reply_and_exits_0() {
    let pod = Pod::start();
    let stdout = succeeded(
        pod.command("send")
            .arg("--text")
            .arg("hi")
            .output()
            .unwrap(),
    );
    assert!(stdout.contains("offline model"), "{stdout}");
    assert!(stdout.ends_with('\n'));
}

#[test]
fn send_json_prints_its_turn_and_no_wait_returns_at_once() {
    let pod = Pod::start();
    let output = pod
        .command("send")
        .args(["--text", "hi", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames[0]["type"], "response");
    assert!(frames.iter().all(|f| f["type"] != "snapshot"));
    assert_eq!(frames[1]["type"], "turn_start");
    assert!(frames.iter().any(|f| f["type"] == "text_delta"));
    assert_eq!(frames.last().unwrap()["entry"]["kind"], "turn_end");

    let output = pod
        .command("send")
        .args(["--text", "later", "--no-wait"])
        .output()
        .unwrap();
    assert!(output.status.success());
}

#[test]
fn send_reads_stdin_and_refuses_files_outside_the_workspace() {
    let pod = Pod::start();
    let mut child = pod
        .command("send")
        .args(["--text", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from stdin\nline two\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(pod.log_lines()[1]["entry"]["segments"][0]["text"] == "from stdin\nline two\n");

    let output = pod
        .command("send")
        .args(["--text", "x", "--file", "../../etc/passwd"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("outside the workspace"));
}

#[test]
fn every_client_command_words_a_missing_pod_alike_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody-home.sock");
    let expected = format!(
        "no pod is listening on {}; start one with `pod serve` (or just `pod`)",
        socket.display()
    );
    for args in [
        &["send", "--text", "hi"][..],
        &["status"],
        &["stop"],
        &["attach"],
        &["pending"],
    ] {
        let output = std::process::Command::new(POD)
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("offline"), "{args:?}: {stderr}");
    }
}

/// `pod serve ARGS` in `dir`, which is expected to refuse them: its output.
fn serve_with(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(POD)
        .arg("serve")
        .args(args)
        .arg("--socket")
        .arg(dir.join("s.sock"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .output()
        .unwrap()
}

#[test]
fn serve_refuses_a_base_url_without_scheme_or_host_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["not a url", "localhost:11434"] {
        let output = serve_with(dir.path(), &["--base-url", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--base-url"), "{bad}: {stderr}");
        assert!(stderr.contains(bad), "{bad}: {stderr}");
        assert!(stderr.contains("http://"), "says what would do: {stderr}");
        assert!(!dir.path().join("s.sock").exists(), "the pod never started");
    }
}

/// Values that would leave a useless pod are bad usage, refused before it
/// starts, naming the flag.
#[test]
fn serve_refuses_zero_counts_and_a_script_provider_without_a_script() {
    let dir = tempfile::tempdir().unwrap();
    for (args, named) in [
        (&["--context-window", "0"][..], "--context-window"),
        (&["--max-steps", "0"], "--max-steps"),
        (&["--max-frame-bytes", "0"], "--max-frame-bytes"),
        (&["--provider", "script"], "--script"),
    ] {
        let output = serve_with(dir.path(), args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
        assert!(!dir.path().join("s.sock").exists(), "the pod never started");
    }
}

#[test]
fn list_has_a_header_and_finds_a_pod_started_with_socket() {
    let pod = Pod::start();
    let runtime = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(POD)
        .arg("list")
        .arg("--data-dir")
        .arg(&pod.data_dir)
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("XDG_CONFIG_HOME", pod.dir.path().join("config"))
        .output()
        .unwrap();
    let stdout = succeeded(output);
    let mut lines = stdout.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("NAME") && header.ends_with("SOCKET"),
        "{stdout}"
    );
    let row = lines
        .next()
        .unwrap_or_else(|| panic!("no pod listed: {stdout}"));
    assert!(row.starts_with(&format!("{} ", pod.name())), "{row}");
    assert!(row.ends_with(&pod.socket.display().to_string()), "{row}");
    assert!(row.contains("idle"), "{row}");

    let empty = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(POD)
        .arg("list")
        .arg("--data-dir")
        .arg(empty.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    let stdout = succeeded(output);
    assert!(stdout.starts_with("no pod is running"), "{stdout}");
}

#[test]
fn a_second_serve_refuses_a_live_socket_and_a_stale_one_is_replaced() {
    let pod = Pod::start();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&pod.socket), 0o600);
    assert_eq!(mode(pod.socket.parent().unwrap()), 0o700);

    let output = std::process::Command::new(POD)
        .args(["serve", "--socket"])
        .arg(&pod.socket)
        .arg("--data-dir")
        .arg(pod.dir.path().join("other-data"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("already listening"));

    // kill -9 leaves the socket file behind; the next pod replaces it.
    let mut pod = pod;
    pod.kill9();
    assert!(pod.socket.exists());
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).start();
    let output = pod.command("status").output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("idle"));
}

#[test]
fn stop_shuts_the_pod_down_cleanly() {
    let mut pod = Pod::start();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    let output = pod.command("stop").output().unwrap();
    assert!(output.status.success());
    assert_eq!(watcher.until_type("shutdown")["type"], "shutdown");
    assert!(pod.wait_exit(std::time::Duration::from_secs(10)).success());
    assert!(
        !pod.socket.exists(),
        "the socket file is removed on a clean stop"
    );
}

#[test]
fn log_prints_the_session_readably_and_raw() {
    let pod = Pod::start();
    pod.command("send")
        .args(["--text", "hello log"])
        .output()
        .unwrap();
    let output = pod.command("log").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("  user              hello log"), "{text}");
    assert!(text.contains("  turn end          completed"), "{text}");
    let output = pod.command("log").arg("--json").output().unwrap();
    let raw = String::from_utf8_lossy(&output.stdout);
    // session_start, user_input, environment, assistant text, turn_end.
    assert_eq!(raw.lines().count(), 5);
}

/// Issue 35 item 4: `--socket` names the pod, wherever its data lives, so
/// `pod log --socket S` reads through S, not this command's data directory.
#[test]
fn log_with_a_socket_reads_the_pod_listening_there() {
    let pod = Pod::start();
    succeeded(
        pod.command("send")
            .args(["--text", "hello over the socket"])
            .output()
            .unwrap(),
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let log = |json: bool| {
        let mut cmd = std::process::Command::new(POD);
        cmd.arg("log")
            .arg("--socket")
            .arg(&pod.socket)
            .current_dir(elsewhere.path())
            .env("XDG_DATA_HOME", elsewhere.path().join("data"))
            .env("XDG_CONFIG_HOME", elsewhere.path().join("config"))
            .env_remove("POD_DATA_DIR")
            .env_remove("POD_WORKSPACE");
        if json {
            cmd.arg("--json");
        }
        succeeded(cmd.output().unwrap())
    };
    let text = log(false);
    assert!(
        text.contains("  user              hello over the socket"),
        "{text}"
    );
    assert!(text.contains("  turn end          completed"), "{text}");
    assert_eq!(log(true).lines().count(), 5);
}

#[test]
fn send_file_attaches_a_workspace_file_from_anywhere() {
    let pod = Pod::start();
    std::fs::write(pod.workspace.join("notes.txt"), "one\ntwo\n").unwrap();
    let absolute = pod.workspace.join("notes.txt");
    // From the workspace with a relative path, and from elsewhere with an
    // absolute one: both name the same file.
    for (cwd, path) in [
        (pod.workspace.clone(), "notes.txt".to_owned()),
        (std::env::temp_dir(), absolute.display().to_string()),
    ] {
        let stdout = succeeded(
            pod.command("send")
                .current_dir(&cwd)
                .args(["--text", "summarise", "--file", &path])
                .output()
                .unwrap(),
        );
        assert!(stdout.contains("notes.txt (2 lines)"), "{stdout}");
    }
}

#[test]
fn status_shows_the_settings_the_context_and_what_waits_for_approval() {
    let usage = |n| json!({"usage":{"input_tokens":n,"output_tokens":9}});
    let script = [
        json!({"events":[{"text":"sized"}, usage(25_000)]}),
        json!({"events":[{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"true"}}}, usage(30_000)]}),
        json!({"events":[{"text":"done"}]}),
    ]
    .map(|line| line.to_string())
    .join("\n");
    let pod = Pod::builder()
        .script(&script)
        .args(["--approval", "ask", "--sandbox", "read-only"])
        .args(["--sandbox-network", "off", "--context-window", "100000"])
        .start();
    succeeded(pod.command("send").args(["--text", "hi"]).output().unwrap());
    let text = succeeded(pod.command("status").output().unwrap());
    for line in [
        "pending    no tool call waits for approval",
        "model      script / script",
        "context    25000 of 100000 tokens (25%)",
        "approval   ask",
        "network off",
        "mcp        no servers",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(text.contains("sandbox    read-only, "), "{text}");
    let workspace = pod.workspace.canonicalize().unwrap();
    assert!(
        text.contains(&format!("workspace  {}", workspace.display())),
        "{text}"
    );

    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("run it");
    c.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    });
    let text = succeeded(pod.command("status").output().unwrap());
    assert!(text.contains("state      waiting"), "{text}");
    assert!(
        text.contains(&format!(
            "pending    1 tool call waits for approval (`pod --socket {} pending` shows it)",
            pod.socket.display()
        )),
        "the hint reaches the pod it was given: {text}"
    );
    assert!(
        text.contains("context    30000 of 100000 tokens (30%)"),
        "{text}"
    );

    let json = succeeded(pod.command("status").arg("--json").output().unwrap());
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["greeting"]["approval"], "ask");
    assert_eq!(json["greeting"]["sandbox"]["mode"], "read-only");
    assert_eq!(json["greeting"]["sandbox"]["network"], false);
    assert_eq!(json["status"]["pending_approvals"], json!(["c1"]));
    assert_eq!(json["status"]["context_window"], 100_000);
}

/// Without `--provider` the pod picks one and says at start which, and why.
#[test]
fn the_provider_chosen_without_provider_is_printed_at_start() {
    let said = |pod: Pod| {
        let mut pod = pod;
        succeeded(pod.command("stop").output().unwrap());
        pod.wait_exit(std::time::Duration::from_secs(10));
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut pod.child.stderr.take().unwrap(), &mut stderr).unwrap();
        stderr
    };
    let offline = said(Pod::start());
    assert!(
        offline.contains("no --provider given") && offline.contains("`offline`"),
        "{offline}"
    );
    let openai = said(
        Pod::builder()
            .args(["--base-url", "http://127.0.0.1:9/v1"])
            .start(),
    );
    assert!(
        openai.contains("--base-url is set, so `openai`"),
        "{openai}"
    );
    let chosen = said(Pod::builder().args(["--provider", "offline"]).start());
    assert!(!chosen.contains("no --provider given"), "{chosen}");
}

/// Trust item 20: `--socket p.sock`, a bare file name, is a socket in the
/// current directory (it failed with an empty directory name), recorded by
/// its absolute path so `pod list` from anywhere finds it.
#[test]
fn a_bare_socket_file_name_is_a_socket_in_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let pod = |args: &[&str]| {
        let mut cmd = std::process::Command::new(POD);
        cmd.args(args)
            .args(["--socket", "p.sock", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--workspace")
            .arg(&workspace)
            .current_dir(dir.path())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
        cmd
    };
    let mut server = pod(&["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    harness::eventually(
        "the pod to listen on p.sock",
        std::time::Duration::from_secs(20),
        || std::os::unix::net::UnixStream::connect(dir.path().join("p.sock")).is_ok(),
    );
    let reply = pod(&["send", "--text", "hi"]).output().unwrap();
    let listed = pod(&["list"]).current_dir("/").output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(succeeded(reply).contains("offline model"));
    let listed = succeeded(listed);
    let socket = dir.path().canonicalize().unwrap().join("p.sock");
    assert!(
        listed.contains(&socket.display().to_string())
            || listed.contains(&dir.path().join("p.sock").display().to_string()),
        "{listed}"
    );
}
