//! Hooks through a real `pod serve`: the config file's `[[hooks]]` run
//! real commands, and what they do is read back from the log, the
//! workspace and the frames clients get.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::{bash_step, Client, Pod};
use serde_json::{json, Value};

fn text_reply() -> String {
    format!("{}\n", json!({"events":[{"text":"done"}]}))
}

/// A pod directory whose default config file (`$XDG_CONFIG_HOME/pod/
/// config.toml`, as the harness sets it) holds `config`.
fn dir_with_config(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, config).unwrap();
    dir
}

fn config_path(dir: &Path) -> PathBuf {
    dir.join("config/pod/config.toml")
}

fn entries(pod: &Pod) -> Vec<Value> {
    pod.log_lines()
        .into_iter()
        .map(|l| l["entry"].clone())
        .collect()
}

fn of_kind(pod: &Pod, kind: &str) -> Vec<Value> {
    entries(pod)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

fn turn(c: &mut Client, text: &str) -> Value {
    c.until_type("snapshot");
    c.run(text);
    c.until_entry("turn_end")
}

/// A recipe of `docs/hooks.md`, as written: its script (if it has one)
/// installed in `dir/bin`, standing in for `~/.config/pod/hooks/`, and
/// its config excerpt, returned with that directory moved too.
fn recipe(dir: &Path, title: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/hooks.md")).unwrap();
    let section = doc
        .split("\n### ")
        .find(|s| s.starts_with(title))
        .unwrap_or_else(|| panic!("no recipe {title:?} in docs/hooks.md"));
    let block = |lang: &str| {
        section
            .split(&format!("```{lang}\n"))
            .nth(1)
            .map(|rest| rest.split("```").next().unwrap().to_owned())
    };
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let moved = |text: &str| text.replace("~/.config/pod/hooks/", &format!("{}/", bin.display()));
    if let Some(script) = block("bash") {
        let name = script
            .lines()
            .find_map(|l| l.strip_prefix("# ~/.config/pod/hooks/"))
            .and_then(|l| l.split(':').next())
            .expect("the script names its file")
            .to_owned();
        use std::os::unix::fs::PermissionsExt;
        let path = bin.join(name);
        std::fs::write(&path, moved(&script)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    moved(&block("toml").expect("a config excerpt"))
}

/// A pod directory whose config file holds the recipe `title`.
fn dir_with_recipe(title: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{}{extra}", recipe(dir.path(), title));
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, config).unwrap();
    dir
}

#[test]
fn recipe_block_a_push_to_main_and_the_model_reads_why() {
    let dir = dir_with_recipe("Block `git push` to main", "");
    let script = bash_step(&[
        ("c1", "git push origin main; touch pushed"),
        ("c2", "git push origin feature; touch other"),
    ]);
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    assert_eq!(turn(&mut c, "push it")["entry"]["reason"], "completed");
    assert!(
        !pod.workspace.join("pushed").exists(),
        "the blocked call ran"
    );
    assert!(
        pod.workspace.join("other").exists(),
        "a push of a branch was held"
    );
    let decisions = of_kind(&pod, "approval_decision");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    let d = &decisions[0];
    assert_eq!(d["call_id"], "c1");
    assert_eq!(d["decision"], "deny");
    assert_eq!(d["by"], "hook");
    assert_eq!(d["scope"], "once");
    assert_eq!(d["client"], "hook:pre_tool_use#1");
    assert_eq!(
        d["message"],
        "pushing to main is not allowed here; push a branch and open a PR"
    );
    let results = of_kind(&pod, "tool_results");
    let first = results[0]["results"][0]["output"].as_str().unwrap();
    assert!(first.contains("denied by a hook"), "{first}");
    assert!(first.contains("open a PR"), "{first}");
}

#[test]
fn recipe_cargo_fmt_after_every_edit() {
    let dir = dir_with_recipe("`cargo fmt` after every edit", "");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(
        workspace.join("Cargo.toml"),
        "[package]\nname = \"fmtme\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    let script = format!(
        "{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"w1","name":"write_file",
            "arguments":{"path":"src/main.rs","content":"fn main(){println!(\"hi\");}\n"}}}]}),
        json!({"events":[{"text":"done"}]})
    );
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    assert_eq!(turn(&mut c, "write it")["entry"]["reason"], "completed");
    let text = std::fs::read_to_string(pod.workspace.join("src/main.rs")).unwrap();
    assert_eq!(text, "fn main() {\n    println!(\"hi\");\n}\n");
}

#[test]
fn recipe_tell_the_model_which_tests_fail() {
    let dir = dir_with_recipe("Tell the model which tests fail", "");
    let command = "cargo test --no-run 2>/dev/null; \
                   printf 'test parser::empty ... FAILED\\ntest lexer::ok ... ok\\ntest lexer::eof ... FAILED\\n'";
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", command)]))
        .start();
    let mut c = pod.client();
    assert_eq!(turn(&mut c, "test")["entry"]["reason"], "completed");
    let all = entries(&pod);
    let kinds: Vec<&str> = all.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let results = kinds.iter().position(|k| *k == "tool_results").unwrap();
    assert_eq!(kinds[results + 1], "hook_injected_items", "{kinds:?}");
    assert_eq!(kinds[results + 2], "assistant_items", "{kinds:?}");
    assert_eq!(
        all[results + 1]["items"],
        json!([{"source":"hook","text":"failing tests: parser::empty, lexer::eof"}])
    );
}

#[test]
fn recipe_a_phone_notification_when_an_approval_waits() {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/my-topic", listener.local_addr().unwrap());
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
            .unwrap();
        sent.send((head, String::from_utf8(body).unwrap())).unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let config = recipe(dir.path(), "A phone notification when an approval waits");
    let script = dir.path().join("bin/ntfy");
    let text = std::fs::read_to_string(&script)
        .unwrap()
        .replace("https://ntfy.sh/my-secret-topic", &url);
    std::fs::write(&script, text).unwrap();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, config).unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "touch marker")]))
        .args(["--approval", "ask"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    let (head, body) = received.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(head.starts_with("POST /my-topic"), "{head}");
    assert!(head.contains("Title: pod waits for you"), "{head}");
    assert_eq!(body, "touch marker");
    // It decided nothing: the request waits for a person.
    assert!(of_kind(&pod, "approval_decision").is_empty());
    c.send(json!({"type":"approve","call_id":"c1","decision":"allow","request_id":"a"}));
    c.until_entry("turn_end");
    assert!(pod.workspace.join("marker").exists());
}

#[test]
fn the_event_reaches_stdin_as_one_json_object_with_its_fields() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events");
    std::fs::create_dir_all(&out).unwrap();
    let record = |event: &str| {
        format!(
            "[[hooks]]\nevent = \"{event}\"\ncommand = 'cat > {}/{event}.json'\n",
            out.display()
        )
    };
    let config: String = [
        "session_start",
        "user_prompt_submit",
        "pre_tool_use",
        "post_tool_use",
        "turn_end",
    ]
    .map(record)
    .concat();
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, config).unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "echo hi")]))
        .start();
    let mut c = pod.client();
    let end = turn(&mut c, "say hi");
    let turn_id = end["entry"]["turn_id"].as_str().unwrap().to_owned();
    let read = |event: &str| -> Value {
        let file = out.join(format!("{event}.json"));
        harness::eventually(&format!("{event}'s stdin"), Duration::from_secs(10), || {
            std::fs::read(&file).is_ok_and(|b| serde_json::from_slice::<Value>(&b).is_ok())
        });
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap()
    };
    let session_id = pod.log_lines()[0]["entry"]["session_id"].clone();
    let start = read("session_start");
    assert_eq!(start["event"], "session_start");
    assert_eq!(start["session_id"], session_id);
    let prompt = read("user_prompt_submit");
    assert_eq!(prompt["turn_id"], turn_id.as_str());
    assert_eq!(prompt["segments"], json!([{"type":"text","text":"say hi"}]));
    let pre = read("pre_tool_use");
    assert_eq!(
        pre["call"],
        json!({"call_id":"c1","name":"bash","arguments":{"command":"echo hi"}})
    );
    assert_eq!(pre["session_id"], session_id);
    let post = read("post_tool_use");
    assert_eq!(post["result"]["is_error"], false);
    assert!(post["result"]["output"]
        .as_str()
        .unwrap()
        .starts_with("hi\n"));
    let end = read("turn_end");
    assert_eq!(end["reason"], "completed");
    assert_eq!(end["turn_id"], turn_id.as_str());
}

#[test]
fn context_from_post_tool_use_is_committed_before_the_next_model_call() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"post_tool_use\"\nmatcher = \"bash:cargo test*\"\n\
         command = 'echo \"{\\\"context\\\": \\\"failing tests: parser::empty, lexer::eof\\\"}\"'\n",
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "cargo test || true")]))
        .start();
    let mut c = pod.client();
    assert_eq!(turn(&mut c, "test")["entry"]["reason"], "completed");
    let kinds: Vec<String> = entries(&pod)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    let results = kinds.iter().position(|k| k == "tool_results").unwrap();
    assert_eq!(kinds[results + 1], "hook_injected_items", "{kinds:?}");
    assert_eq!(kinds[results + 2], "assistant_items", "{kinds:?}");
    let injected = &entries(&pod)[results + 1];
    assert_eq!(
        injected["items"],
        json!([{"source":"hook","text":"failing tests: parser::empty, lexer::eof"}])
    );
}

#[test]
fn recipe_allow_read_only_git_and_leave_the_rest_waiting() {
    let dir = dir_with_recipe("Allow read-only `git` commands without asking", "");
    let script = bash_step(&[("c1", "git status --short"), ("c2", "git status; touch b")]);
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--approval", "ask"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    // c1 is decided by the hook; c2 waits for a person.
    let decided = c.until_with("the hook's decision", |v| {
        v["type"] == "entry" && v["entry"]["kind"] == "approval_decision"
    });
    assert_eq!(decided["entry"]["call_id"], "c1");
    assert_eq!(decided["entry"]["by"], "hook");
    assert_eq!(decided["entry"]["scope"], "once");
    assert_eq!(decided["entry"]["client"], "hook:approval_request#1");
    c.until_with("c2 still waiting", |v| {
        v["type"] == "status" && v["pending_approvals"] == json!(["c2"])
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pod.workspace.join("b").exists());
    c.send(json!({"type":"approve","call_id":"c2","decision":"deny","request_id":"d"}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let results = of_kind(&pod, "tool_results");
    let c1 = results[0]["results"][0]["output"].as_str().unwrap();
    assert!(!c1.contains("denied"), "the hook's allow ran it: {c1}");
    assert!(c1.contains("[exit code:"), "{c1}");
    let decisions = of_kind(&pod, "approval_decision");
    assert_eq!(decisions.len(), 2, "one decision per call: {decisions:?}");
}

#[test]
fn a_hook_cannot_approve_through_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/pod.sock");
    let out = dir.path().join("approve.out");
    let config = format!(
        "[[hooks]]\nevent = \"approval_request\"\ncommand = '{} approve --socket {} > {} 2>&1; echo \"exit $?\" >> {}'\n",
        env!("CARGO_BIN_EXE_pod"),
        socket.display(),
        out.display(),
        out.display()
    );
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, config).unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "touch marker")]))
        // Unix sockets opened, so the check behind that shut door is what
        // is tested: the pod itself refuses its hook.
        .args(["--approval", "ask", "--sandbox-unix-sockets", "on"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    harness::eventually("the hook's try", Duration::from_secs(20), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("exit "))
    });
    let said = std::fs::read_to_string(&out).unwrap();
    assert!(said.contains("may only read"), "{said}");
    assert!(said.contains("exit 1"), "{said}");
    assert!(!pod.workspace.join("marker").exists());
    assert!(of_kind(&pod, "approval_decision").is_empty());
    c.send(json!({"type":"approve","call_id":"c1","decision":"allow","request_id":"a"}));
    c.until_entry("turn_end");
    assert!(pod.workspace.join("marker").exists());
}

#[test]
fn a_blocking_user_prompt_submit_hook_refuses_the_run_and_commits_nothing() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"user_prompt_submit\"\n\
         command = 'if grep -q secret; then echo \"no secrets in prompts\" >&2; exit 2; fi'\n",
    );
    let pod = Pod::builder().in_dir(dir).script(&text_reply()).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let before = pod.log_lines().len();
    c.send(json!({"type":"run","request_id":"r1",
        "segments":[{"type":"text","text":"the secret is 42"}]}));
    let response = c.until_with("the response", |v| v["request_id"] == "r1");
    assert_eq!(response["type"], "response");
    let error = c.until_with("the refusal", |v| {
        v["type"] == "error" && v["request_id"] == "r1"
    });
    assert_eq!(error["code"], "blocked_by_hook");
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("no secrets in prompts"));
    assert_eq!(pod.log_lines().len(), before, "nothing committed");
    assert!(!c.frames.iter().any(|f| f["type"] == "turn_start"));
    // The next run goes on.
    c.send(json!({"type":"run","request_id":"r2",
        "segments":[{"type":"text","text":"hello"}]}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
}

#[test]
fn misbehaving_hooks_cost_a_warning_and_the_turn_goes_on() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"pre_tool_use\"\ncommand = 'sleep 30'\ntimeout_s = 1\n\
         [[hooks]]\nevent = \"pre_tool_use\"\ncommand = 'echo broken >&2; exit 1'\n\
         [[hooks]]\nevent = \"pre_tool_use\"\ncommand = '/nonexistent/hook'\n\
         [[hooks]]\nevent = \"post_tool_use\"\ncommand = 'echo oops >&2; exit 2'\n",
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "touch ran")]))
        .start();
    let mut c = pod.client();
    let started = Instant::now();
    assert_eq!(turn(&mut c, "go")["entry"]["reason"], "completed");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(pod.workspace.join("ran").exists());
    let warnings: Vec<String> = c
        .frames
        .iter()
        .filter(|f| f["type"] == "notification" && f["source"] == "hook")
        .inspect(|f| assert_eq!(f["level"], "warn"))
        .map(|f| f["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    assert!(warnings[0].contains("hook:pre_tool_use#1") && warnings[0].contains("killed"));
    assert!(warnings[1].contains("exited 1: broken"), "{}", warnings[1]);
    assert!(
        warnings[2].contains("hook:pre_tool_use#3"),
        "{}",
        warnings[2]
    );
    assert!(warnings[3].contains("exited 2") && warnings[3].contains("oops"));
}

#[test]
fn turn_end_hooks_observe_without_holding_the_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!(
            "[[hooks]]\nevent = \"turn_end\"\ncommand = 'sleep 3; echo seen >> {}'\n",
            seen.display()
        ),
    )
    .unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&format!("{}{}", text_reply(), text_reply()))
        .start();
    let mut c = pod.client();
    let started = Instant::now();
    turn(&mut c, "one");
    c.run("two");
    c.until_entry("turn_end");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the second turn waited for the first turn's hook: {:?}",
        started.elapsed()
    );
    harness::eventually("both hooks ran", Duration::from_secs(15), || {
        std::fs::read_to_string(&seen).is_ok_and(|t| t.lines().count() == 2)
    });
}

#[test]
fn session_start_context_reaches_the_first_turn() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"session_start\"\ncommand = 'echo \"{\\\"context\\\": \\\"branch: main\\\"}\"'\n",
    );
    let pod = Pod::builder().in_dir(dir).script(&text_reply()).start();
    let mut c = pod.client();
    turn(&mut c, "hi");
    let injected = of_kind(&pod, "hook_injected_items");
    assert!(
        injected
            .iter()
            .any(|e| e["items"] == json!([{"source":"hook","text":"branch: main"}])),
        "{injected:?}"
    );
    let kinds: Vec<String> = entries(&pod)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    let hook = kinds
        .iter()
        .position(|k| k == "hook_injected_items")
        .unwrap();
    let reply = kinds.iter().position(|k| k == "assistant_items").unwrap();
    assert!(hook < reply, "{kinds:?}");
}

#[test]
fn an_unsandboxed_hook_a_tool_could_rewrite_is_refused_at_start() {
    for command in ["./check.sh", "/tmp/check.sh"] {
        let dir = dir_with_config(&format!(
            "[[hooks]]\nevent = \"turn_end\"\ncommand = '{command}'\nsandbox = false\n"
        ));
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pod"))
            .arg("serve")
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--workspace")
            .arg(dir.path().join("config"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{command}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("hook:turn_end#1"), "{stderr}");
        assert!(stderr.contains("sandbox = false"), "{stderr}");
    }
}

#[test]
fn hooks_run_in_the_bash_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The harness's dir is under /tmp, where the sandbox lets writes
    // through; the hook tries to write beside the target directory instead.
    let forbidden = tempfile::tempdir_in(harness::outside_temp_dirs()).unwrap();
    let probe = forbidden.path().join("pod-hook-probe");
    let path = config_path(dir.path());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!(
            "[[hooks]]\nevent = \"turn_end\"\ncommand = 'touch {} 2> hook.err; touch inside'\n",
            probe.display()
        ),
    )
    .unwrap();
    let pod = Pod::builder().in_dir(dir).script(&text_reply()).start();
    let mut c = pod.client();
    let snapshot = c.until_type("snapshot");
    c.run("hi");
    c.until_entry("turn_end");
    let inside = pod.workspace.join("inside");
    harness::eventually("the hook ran", Duration::from_secs(10), || inside.exists());
    if snapshot["greeting"]["sandbox"]["available"] == true {
        assert!(
            !probe.exists(),
            "a sandboxed hook wrote outside the workspace"
        );
    } else {
        // A kernel without Landlock: nothing was confined, so nothing can be
        // checked — which CI may not pass off as a success.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set, so this test may not skip: this kernel cannot enforce the sandbox ({})",
            snapshot["greeting"]["warnings"]
        );
        eprintln!("skipping the check: this kernel cannot enforce the sandbox");
    }
}

#[test]
fn pod_send_exits_1_when_a_hook_blocks_the_message() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"user_prompt_submit\"\n\
         command = 'echo \"not today\" >&2; exit 2'\n",
    );
    let pod = Pod::builder().in_dir(dir).script(&text_reply()).start();
    let out = pod
        .command("send")
        .args(["--text", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not today"), "{stderr}");
    assert!(of_kind(&pod, "user_input").is_empty(), "nothing committed");
}

/// A hook that misbehaves during `pod send`'s turn is said on its stderr
/// too, not only in the TUI (found by a new-user trial of docs/hooks.md).
#[test]
fn pod_send_prints_a_failing_hooks_warning() {
    let dir = dir_with_config(
        "[[hooks]]\nevent = \"post_tool_use\"\ncommand = 'echo boom-from-hook >&2; exit 1'\n",
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&bash_step(&[("c1", "true")]))
        .start();
    let out = pod.command("send").args(["--text", "go"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pod: [hook]") && stderr.contains("boom-from-hook"),
        "{stderr}"
    );
}
