//! Every flag also reads an environment variable and the config file;
//! flag beats environment beats file beats default.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::process::Command;

use harness::POD;

/// Where `pod status` says it looked, which shows the socket it resolved.
fn socket_tried(config_home: &std::path::Path, env: Option<&str>, flag: Option<&str>) -> String {
    let mut cmd = Command::new(POD);
    cmd.arg("status")
        .env("XDG_CONFIG_HOME", config_home)
        .env_remove("POD_SOCKET");
    if let Some(socket) = env {
        cmd.env("POD_SOCKET", socket);
    }
    if let Some(socket) = flag {
        cmd.args(["--socket", socket]);
    }
    let output = cmd.output().unwrap();
    assert!(
        !output.status.success(),
        "no pod runs at any of these sockets"
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn flag_beats_env_beats_config_file_beats_default() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pod")).unwrap();
    std::fs::write(
        dir.path().join("pod/config.toml"),
        "socket = \"/tmp/from-file.sock\"\nmax_steps = 3\n",
    )
    .unwrap();
    assert!(socket_tried(dir.path(), None, None).contains("/tmp/from-file.sock"));
    assert!(
        socket_tried(dir.path(), Some("/tmp/from-env.sock"), None).contains("/tmp/from-env.sock")
    );
    let flag = socket_tried(
        dir.path(),
        Some("/tmp/from-env.sock"),
        Some("/tmp/from-flag.sock"),
    );
    assert!(flag.contains("/tmp/from-flag.sock"), "{flag}");

    let empty = tempfile::tempdir().unwrap();
    let default = socket_tried(empty.path(), None, None);
    let name = pod::cli::derived_name(&std::env::current_dir().unwrap().canonicalize().unwrap());
    assert!(default.contains(&format!("{name}.sock")), "{default}");
}

#[test]
fn a_bad_config_value_is_reported_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pod")).unwrap();
    std::fs::write(dir.path().join("pod/config.toml"), "compact_at = 7\n").unwrap();
    let output = Command::new(POD)
        .args(["serve", "--socket", "/tmp/never.sock"])
        .env("XDG_CONFIG_HOME", dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("compact-at") || stderr.contains("fraction"),
        "{stderr}"
    );
}

#[test]
fn help_and_version_work_everywhere() {
    for sub in [
        "serve", "send", "attach", "approve", "deny", "pending", "status", "log", "sessions",
        "stop", "list",
    ] {
        for flag in ["--help", "--version"] {
            let output = Command::new(POD).args([sub, flag]).output().unwrap();
            assert!(output.status.success(), "pod {sub} {flag}");
        }
    }
}

#[test]
fn a_named_config_file_is_read_instead_of_the_default_and_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pod")).unwrap();
    std::fs::write(
        dir.path().join("pod/config.toml"),
        "socket = \"/tmp/from-default.sock\"\n",
    )
    .unwrap();
    let named = dir.path().join("named.toml");
    std::fs::write(&named, "socket = \"/tmp/from-named.sock\"\n").unwrap();
    let status = |config_flag: Option<&std::path::Path>, config_env: Option<&std::path::Path>| {
        let mut cmd = Command::new(POD);
        cmd.arg("status")
            .env("XDG_CONFIG_HOME", dir.path())
            .env_remove("POD_SOCKET")
            .env_remove("POD_CONFIG");
        if let Some(path) = config_flag {
            cmd.arg("--config").arg(path);
        }
        if let Some(path) = config_env {
            cmd.env("POD_CONFIG", path);
        }
        let output = cmd.output().unwrap();
        assert!(!output.status.success());
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    assert!(status(None, None).1.contains("/tmp/from-default.sock"));
    assert!(status(Some(&named), None)
        .1
        .contains("/tmp/from-named.sock"));
    assert!(status(None, Some(&named))
        .1
        .contains("/tmp/from-named.sock"));

    let missing = dir.path().join("missing.toml");
    let (code, err) = status(Some(&missing), None);
    assert_eq!(code, Some(2), "a missing config file is bad usage: {err}");
    assert!(
        err.contains("cannot read config file") && err.contains("missing.toml"),
        "{err}"
    );
}

#[test]
fn a_bad_mcp_server_table_is_reported_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[mcp_servers.fs]\nargs = [\"x\"]\n").unwrap();
    let output = Command::new(POD)
        .args(["status", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "bad usage");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("config.toml") && stderr.contains("command"),
        "{stderr}"
    );
}

/// Trust item 21: server `x` tool `y__z` and server `x__y` tool `z` would
/// both be offered as `mcp__x__y__z`; a server name that blurs the `__`
/// separator is refused, naming it.
#[test]
fn an_mcp_server_name_that_blurs_the_tool_name_separator_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    for name in ["x__y", "x_"] {
        std::fs::write(
            &config,
            format!("[mcp_servers.{name}]\ncommand = \"/bin/true\"\n"),
        )
        .unwrap();
        let output = Command::new(POD)
            .args(["status", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{name:?}")) && stderr.contains("ambiguous"),
            "{stderr}"
        );
    }
}

/// A switch's variable takes `1`, as shells and CI files write it: a pod
/// started with `POD_NEW_SESSION=1` begins a new session, and
/// `POD_JSON=1 pod status` prints JSON.
#[test]
fn switches_read_their_variables_as_shells_write_them() {
    let pod = harness::Pod::start();
    let first = pod.client().until_type("snapshot")["session_id"].clone();
    let status = pod.command("status").env("POD_JSON", "1").output().unwrap();
    let text = harness::succeeded(status);
    let json: serde_json::Value = serde_json::from_str(&text).expect("POD_JSON=1: JSON");
    assert_eq!(json["greeting"]["session_id"], first, "{text}");

    let restarted = harness::Pod::builder()
        .in_dir(pod.into_dir())
        .env("POD_NEW_SESSION", "1")
        .start();
    let second = restarted.client().until_type("snapshot")["session_id"].clone();
    assert_ne!(first, second, "POD_NEW_SESSION=1 resumed the old session");
}

/// `--deny` is repeatable, and so is its variable: one rule per line.
#[test]
fn a_repeatable_flag_reads_one_value_per_line_from_its_variable() {
    let call = |id: &str, command: &str| serde_json::json!({"tool_call":{"id":id,"name":"bash","arguments":{"command":command}}});
    let script = format!(
        "{}\n{}\n",
        serde_json::json!({"events":[call("c1", "touch a"), call("c2", "mkdir b")]}),
        serde_json::json!({"events":[{"text":"done"}]})
    );
    let pod = harness::Pod::builder()
        .script(&script)
        .env("POD_DENY", "bash:touch *\nbash:mkdir *")
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let rules: Vec<_> = pod
        .log_lines()
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_decision")
        .map(|l| (l["entry"]["decision"].clone(), l["entry"]["rule"].clone()))
        .collect();
    assert_eq!(
        rules,
        [
            (json_str("deny"), json_str("bash:touch *")),
            (json_str("deny"), json_str("bash:mkdir *"))
        ]
    );
    assert!(!pod.workspace.join("a").exists() && !pod.workspace.join("b").exists());
}

fn json_str(s: &str) -> serde_json::Value {
    serde_json::Value::String(s.into())
}
