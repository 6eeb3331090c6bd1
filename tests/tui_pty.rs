//! End to end, in a pseudo-terminal: a real `pod serve` with the offline
//! model, a real `pod attach` reading keys from the PTY, and the screen read
//! back through a vt100 emulator. Every wait is on screen contents with a
//! deadline, never a blind sleep.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use portable_pty::CommandBuilder;
use serde_json::{json, Value};

mod pty;
mod support;

use pty::*;

#[test]
fn plain_pod_starts_a_pod_in_the_background_and_attaches() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let env = [
        ("XDG_RUNTIME_DIR", dir.path().join("run")),
        ("XDG_DATA_HOME", dir.path().join("data")),
        ("XDG_CONFIG_HOME", dir.path().join("config")),
    ];
    let mut pod = CommandBuilder::new(POD);
    pod.cwd(&workspace);
    pod.env_remove("OPENAI_API_KEY");
    pod.env_remove("ANTHROPIC_API_KEY");
    for (k, v) in &env {
        pod.env(k, v);
    }
    let (parser, mut child, mut keys) = in_pty(pod);
    wait_for_screen(&parser, "● connected");
    wait_for_screen(&parser, "offline/offline");
    // Not only the status bar: the transcript says it, and what to do.
    wait_for_screen(&parser, "[offline model]");
    wait_for_screen(&parser, "ANTHROPIC_API_KEY=...");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });

    let status = |sub: &str| {
        let mut cmd = Command::new(POD);
        cmd.arg(sub).current_dir(&workspace);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let out = status("status");
    assert!(out.status.success(), "the background pod outlives the TUI");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&workspace.display().to_string()), "{text}");
    assert!(status("stop").status.success());
}

/// Stops the background pod of a plain-`pod` test, however the test ends.
struct StopPod(Vec<(&'static str, PathBuf)>);

impl Drop for StopPod {
    fn drop(&mut self) {
        let _ = Command::new(POD)
            .arg("stop")
            .envs(self.0.iter().map(|(k, v)| (k, v)))
            .output();
    }
}

/// Plain `pod` hands the `serve` flags typed to the pod it starts. Typed
/// again, against that pod (one `--name`) from another directory, it names
/// each difference and asks before the TUI takes the screen: `n` leaves,
/// Enter attaches to the pod as it is. Flags that match attach without a
/// word.
#[test]
fn plain_pod_passes_serve_flags_and_asks_when_the_running_pod_differs() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let script = dir.path().join("script.jsonl");
    std::fs::write(&script, "{\"events\":[{\"echo_model\":{}}]}\n").unwrap();
    let env = StopPod(vec![
        ("XDG_RUNTIME_DIR", dir.path().join("run")),
        ("XDG_DATA_HOME", dir.path().join("data")),
        ("XDG_CONFIG_HOME", dir.path().join("config")),
        ("POD_NAME", "shared".into()),
    ]);
    let pod = |cwd: &Path, args: &[&str]| {
        let mut pod = CommandBuilder::new(POD);
        pod.cwd(cwd);
        pod.env_remove("OPENAI_API_KEY");
        pod.env_remove("ANTHROPIC_API_KEY");
        for (k, v) in &env.0 {
            pod.env(k, v);
        }
        pod.args(args);
        in_pty(pod)
    };
    let quit = |(_, mut child, mut keys): InPty| {
        keys.write_all(b"\x04").unwrap();
        keys.flush().unwrap();
        wait_until("pod to exit on Ctrl+D", || {
            child.try_wait().unwrap().is_some()
        });
    };

    let script = script.to_str().unwrap();
    let first = pod(
        &workspace,
        &[
            "--provider",
            "script",
            "--script",
            script,
            "--model",
            "first",
            "--approval",
            "auto",
        ],
    );
    wait_for_screen(&first.0, "● connected");
    wait_for_screen(&first.0, "script/first");
    quit(first);
    let status = Command::new(POD)
        .args(["status", "--json"])
        .envs(env.0.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "the pod runs on after the TUI quits"
    );
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let greeting = &status["greeting"];
    assert_eq!(greeting["provider"], "script");
    assert_eq!(greeting["model"], "first");
    assert_eq!(greeting["approval"], "auto");
    let here = workspace.canonicalize().unwrap();
    assert_eq!(greeting["workspace"], here.to_str().unwrap());

    let (parser, mut child, mut keys) = pod(&elsewhere, &["--model", "other"]);
    wait_for_screen(
        &parser,
        "Attach to it as it is? [Y/n, r: restart it as asked]",
    );
    let screen = flat(&parser);
    for said in [
        "already running, not as asked:",
        "--model is first, not other (`/model other` in the TUI switches it)",
        "workspace is",
        "(the current directory)",
        "`pod --name shared stop`",
        "answer r",
        "--name NEW_NAME",
    ] {
        assert!(screen.contains(said), "{said:?} on screen:\n{screen}");
    }
    keys.write_all(b"n\r").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on `n`", || child.try_wait().unwrap().is_some());
    assert!(
        !child.wait().unwrap().success(),
        "declining is not a success"
    );

    let second = pod(&workspace, &["--model", "other"]);
    wait_for_screen(
        &second.0,
        "Attach to it as it is? [Y/n, r: restart it as asked]",
    );
    let mut keys = second.2;
    keys.write_all(b"\r").unwrap();
    keys.flush().unwrap();
    wait_for_screen(&second.0, "● connected");
    wait_for_screen(&second.0, "script/first");
    quit((second.0, second.1, keys));

    let same = pod(&workspace, &["--model", "first", "--approval", "auto"]);
    wait_for_screen(&same.0, "● connected");
    quit(same);
}

/// Flags that imply another provider than the running pod's — `--script`
/// (script), `--base-url` (an OpenAI-compatible server) — are a difference
/// plain `pod` names and asks about, as `--provider` is (issue 36).
#[test]
fn plain_pod_asks_when_script_or_base_url_imply_another_provider() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let script = dir.path().join("script.jsonl");
    std::fs::write(&script, "{\"events\":[{\"text\":\"hi\"}]}\n").unwrap();
    let env = StopPod(vec![
        ("XDG_RUNTIME_DIR", dir.path().join("run")),
        ("XDG_DATA_HOME", dir.path().join("data")),
        ("XDG_CONFIG_HOME", dir.path().join("config")),
        // So that `StopPod`, run from elsewhere, stops this pod.
        ("POD_NAME", "implied".into()),
    ]);
    let pod = |args: &[&str]| {
        let mut pod = CommandBuilder::new(POD);
        pod.cwd(&workspace);
        pod.env_remove("OPENAI_API_KEY");
        pod.env_remove("ANTHROPIC_API_KEY");
        for (k, v) in &env.0 {
            pod.env(k, v);
        }
        pod.args(args);
        in_pty(pod)
    };
    let (parser, mut child, mut keys) = pod(&[]);
    wait_for_screen(&parser, "offline/offline");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });

    let script = script.to_str().unwrap();
    for (args, said) in [
        (
            vec!["--script", script],
            "the provider is offline, not script (--script is given)",
        ),
        (
            vec!["--base-url", "http://127.0.0.1:9/v1"],
            "the provider is offline, not openai (--base-url is given)",
        ),
    ] {
        let (parser, mut child, mut keys) = pod(&args);
        wait_for_screen(
            &parser,
            "Attach to it as it is? [Y/n, r: restart it as asked]",
        );
        let screen = flat(&parser);
        assert!(screen.contains(said), "{said:?} on screen:\n{screen}");
        keys.write_all(b"n\r").unwrap();
        keys.flush().unwrap();
        wait_until("pod to exit on `n`", || child.try_wait().unwrap().is_some());
    }
}

#[test]
fn attach_send_paste_and_detach() {
    let dir = tempfile::tempdir().unwrap();
    let ServedPod {
        mut server,
        socket,
        data,
    } = serve_offline(dir.path());

    let mut attach = CommandBuilder::new(POD);
    attach.arg("attach");
    attach.arg("--socket");
    attach.arg(&socket);
    let (parser, mut child, mut keys) = in_pty(attach);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };

    wait_for_screen(&parser, "● connected");
    press(b"hello");
    wait_for_screen(&parser, "› hello");
    press(b"\r");
    wait_for_screen(&parser, "offline model");
    wait_for_screen(&parser, "5 characters in 1 line(s)");

    // Terminals send line breaks inside a paste as carriage returns.
    press(b"\x1b[200~first line\rsecond line\rthird line\x1b[201~");
    let label = "[Clipboard #1 | 33 chars, 3 lines]";
    wait_for_screen(&parser, label);
    press(b"\r");
    wait_for_screen(&parser, "33 characters in 3 line(s)");
    assert!(
        flat(&parser).contains(&format!("› {label}")),
        "shown as a label"
    );

    let inputs = user_inputs(&data);
    let (session, paste) = inputs
        .iter()
        .find(|(_, e)| e["segments"][0]["type"] == "paste")
        .unwrap_or_else(|| panic!("no paste segment in the log: {inputs:?}"));
    assert_eq!(
        paste["segments"][0],
        serde_json::json!({"type":"paste","id":1,"text":"first line\nsecond line\nthird line"})
    );
    let short: String = session.chars().take(8).collect();
    assert!(flat(&parser).contains(&format!("session {short}")));

    press(b"\x04");
    wait_until("pod attach to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "detaching leaves the pod running"
    );
    assert!(socket.exists());
}

/// Lines of every session log under `data`, so a test can see that
/// nothing was committed.
fn log_line_count(data: &Path) -> usize {
    std::fs::read_dir(data.join("sessions"))
        .map(|dir| {
            dir.flatten()
                .map(|f| {
                    std::fs::read_to_string(f.path())
                        .unwrap_or_default()
                        .lines()
                        .count()
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The issue's scenario, typed as a user would: a workflow chosen from the
/// `/` menu with arguments, a knowledge file from the `#` menu, one Enter.
/// The log holds typed segments and the model reads both files; `/help`
/// and an unknown `/x` never reach the pod.
#[test]
fn workflow_and_knowledge_from_the_menus_reach_the_model() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply = support::data_frames(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Reviewed."},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let model = runtime.block_on(support::Server::start(vec![support::Reply::sse(&reply)]));

    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    let write = |path: &str, text: &str| {
        let path = workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".pod/workflows/review.md",
        "# Review a change\n\nCheck WORKFLOW-BODY for bugs.\n",
    );
    write(
        ".pod/knowledge/style.md",
        "# House style\n\nKNOWLEDGE-BODY: four spaces.\n",
    );
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    let ServedPod {
        server: _server,
        socket,
        data,
    } = serve(dir.path(), |command| {
        command
            .args(["--provider", "openai", "--model", "test", "--base-url"])
            .arg(format!("{}/v1", model.url))
            .env("OPENAI_API_KEY", "test-key");
    });

    let mut attach = CommandBuilder::new(POD);
    attach.arg("attach");
    attach.arg("--socket");
    attach.arg(&socket);
    let (parser, mut child, mut keys) = in_pty(attach);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");

    press(b"/rev");
    wait_for_screen(&parser, "/review workflow · Review a change");
    press(b"\t");
    wait_for_screen(&parser, "› /review");
    press(b" src #sty");
    wait_for_screen(&parser, "#style House style");
    press(b"\t");
    wait_for_screen(&parser, "› /review src #style");
    press(b"\r");
    wait_for_screen(&parser, "Reviewed.");

    let inputs = user_inputs(&data);
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(
        inputs[0].1["segments"],
        json!([{"type":"workflow_invoke","slug":"review","args":"src"},
               {"type":"knowledge_ref","slug":"style"}])
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    for expanded in ["WORKFLOW-BODY", "KNOWLEDGE-BODY", "Arguments: src"] {
        assert!(
            body.contains(expanded),
            "{expanded} not in the request: {body}"
        );
    }

    wait_until("the turn to end in the log", || {
        std::fs::read_dir(data.join("sessions"))
            .unwrap()
            .flatten()
            .any(|f| {
                std::fs::read_to_string(f.path())
                    .unwrap_or_default()
                    .contains("\"turn_end\"")
            })
    });
    let before = log_line_count(&data);
    press(b"/help\r");
    wait_for_screen(&parser, "Esc closes");
    press(b"\x1b");
    wait_for_screen(&parser, "Reviewed.");
    press(b"/x\r");
    wait_for_screen(&parser, "unknown command /x");
    assert!(
        flat(&parser).contains("› /x"),
        "the refused command stays in the input box"
    );
    assert_eq!(log_line_count(&data), before, "nothing was committed");
    assert_eq!(model.requests().len(), 1, "nothing reached the model");

    press(b"\x04");
    wait_until("pod attach to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// A `pod serve` on the script provider in `dir` (workspace `dir/ws`,
/// approval mode `approval`), and `pod attach` to it in a pseudo-terminal.
fn scripted_pod_and_tui(dir: &tempfile::TempDir, approval: &str, script: &str) -> (Server, InPty) {
    let script_path = dir.path().join("script.jsonl");
    std::fs::write(&script_path, script).unwrap();
    let ServedPod { server, socket, .. } = serve(dir.path(), |command| {
        command
            .args(["--approval", approval, "--provider", "script", "--script"])
            .arg(&script_path);
    });
    let mut attach = CommandBuilder::new(POD);
    attach.arg("attach");
    attach.arg("--socket");
    attach.arg(&socket);
    (server, in_pty(attach))
}

/// The approval round trip in a real terminal: a pod in mode `ask` whose
/// scripted model calls `bash touch marker`; the attached TUI shows the
/// panel, `y` answers it, the command runs and the turn completes.
#[test]
fn approving_a_command_with_y_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    let script = concat!(
        r#"{"events":[{"text":"Creating it."},{"tool_call":{"id":"call-1","name":"bash","arguments":{"command":"touch marker"}}}]}"#,
        "\n",
        r#"{"events":[{"text":"The marker is there."}]}"#,
        "\n"
    );
    let (_server, (parser, mut child, mut keys)) = scripted_pod_and_tui(&dir, "ask", script);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"make the marker\r");
    wait_for_screen(&parser, "bash wants to run");
    wait_for_screen(&parser, "y allow once");
    // Its keys answer once it has armed (drawn bold, not dim).
    wait_for_bold(&parser, "y allow once");
    let marker = workspace.join("marker");
    assert!(!marker.exists(), "nothing runs before the answer");

    press(b"y");
    wait_until("the marker file", || marker.exists());
    wait_for_screen(&parser, "The marker is there.");
    wait_for_screen(&parser, "done in");
    let screen = flat(&parser);
    assert!(screen.contains("✓ allowed by tui@"), "{screen}");
    assert!(
        !screen.contains("wants to run"),
        "the panel is gone: {screen}"
    );

    press(b"\x04");
    wait_until("pod attach to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// QA, "the first hour" item 8, as it was found: `echo compiling; sleep
/// 30` cancelled with Esc read `error: compiling (2 lines)`. It reads
/// `cancelled after Ns` now, and the colour its output set is a colour on
/// the terminal, not `\e[31m` text.
#[test]
fn a_command_cancelled_with_esc_says_cancelled_after() {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        r#"{"events":[{"tool_call":{"id":"call-1","name":"bash","arguments":{"command":"printf '\\033[31mred\\033[0m\\n'; echo compiling; sleep 30"}}}]}"#,
        "\n",
    );
    let (_server, (parser, mut child, mut keys)) = scripted_pod_and_tui(&dir, "auto", script);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"build it\r");
    wait_for_screen(&parser, "│ compiling");
    let red = |parser: &std::sync::Mutex<vt100::Parser>| {
        let parser = parser.lock().unwrap();
        let screen = parser.screen();
        let (rows, cols) = screen.size();
        (0..rows).any(|row| {
            (0..cols.saturating_sub(2)).any(|col| {
                let cell = |c: u16| screen.cell(row, c);
                let text: String = (col..col + 3)
                    .filter_map(|c| cell(c).map(|c| c.contents()))
                    .collect();
                text == "red" && cell(col).is_some_and(|c| c.fgcolor() == vt100::Color::Idx(1))
            })
        })
    };
    wait_until("the streamed output, in red", || red(&parser));
    wait_for_screen(&parser, "running… 1s");
    press(b"\x1b");
    wait_for_screen(&parser, "└ cancelled after ");
    let screen = flat(&parser);
    assert!(!screen.contains("error: compiling"), "{screen}");
    assert!(!screen.contains("\\e[31m"), "{screen}");

    press(b"\x04");
    wait_until("pod attach to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// While the terminal is not focused, an approval request rings the bell
/// and sends OSC 9 and OSC 777 notifications; while it is focused, the end
/// of the turn sends nothing.
#[test]
fn an_approval_while_unfocused_rings_and_notifies() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        concat!(
            r#"{"events":[{"tool_call":{"id":"call-1","name":"bash","arguments":{"command":"touch marker"}}}]}"#,
            "\n",
            r#"{"events":[{"text":"Made it."}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let ServedPod {
        server: _server,
        socket,
        ..
    } = serve(dir.path(), |command| {
        command
            .args(["--approval", "ask", "--provider", "script", "--script"])
            .arg(&script)
            .env("XDG_CONFIG_HOME", dir.path().join("config"));
    });
    let mut attach = CommandBuilder::new(POD);
    attach.args(["attach", "--notify", "desktop", "--socket"]);
    attach.arg(&socket);
    attach.env("XDG_CONFIG_HOME", dir.path().join("config"));
    let ((parser, mut child, mut keys), raw) = in_pty_raw(attach);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"make the marker\r");
    // The terminal loses focus (its focus report) before the request comes.
    press(b"\x1b[O");
    wait_for_screen(&parser, "bash wants to run");
    wait_until("the notification", || count(&raw, b"\x1b]9;") == 1);
    assert!(
        count(
            &raw,
            b"\x1b]777;notify;pod waits for approval;bash: touch marker"
        ) == 1
    );
    assert!(count(&raw, b"\x07") >= 1);
    press(b"\x1b[I");
    std::thread::sleep(Duration::from_millis(100));
    wait_for_bold(&parser, "y allow once");
    press(b"y");
    wait_for_screen(&parser, "Made it.");
    wait_for_screen(&parser, "done in");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(count(&raw, b"\x1b]9;"), 1, "nothing while focused");
    press(b"\x04");
    wait_until("pod attach to exit", || child.try_wait().unwrap().is_some());
}

#[test]
fn a_pasted_image_path_is_a_chip_and_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    // Outside the workspace, as a screenshot usually is.
    let shot = dir.path().join("shot.png");
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(&1280u32.to_be_bytes());
    png.extend_from_slice(&720u32.to_be_bytes());
    png.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    png.resize(214_000, 0);
    std::fs::write(&shot, &png).unwrap();
    let ServedPod {
        server: _server,
        socket,
        data,
    } = serve_offline(dir.path());
    let mut attach = CommandBuilder::new(POD);
    attach.arg("attach");
    attach.arg("--socket");
    attach.arg(&socket);
    let (parser, _child, mut keys) = in_pty(attach);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"what is ");
    // A file dropped on a terminal arrives as a paste of its path.
    press(format!("\x1b[200~'{}'\x1b[201~", shot.display()).as_bytes());
    wait_for_screen(&parser, "[Image #1 | shot.png 1280×720 · 214 KB]");
    press(b"\r");
    wait_for_screen(&parser, "1 image(s): image/png 214000 bytes 1280×720");
    wait_for_screen(&parser, "› what is [Image #1 | shot.png]");
    let inputs = user_inputs(&data);
    let segments = &inputs[0].1["segments"];
    assert_eq!(segments[1]["type"], "image", "{segments}");
    assert_eq!(segments[1]["name"], "shot.png");
    assert_eq!(segments[1]["media_type"], "image/png");
}

/// `/agents` in a real terminal: a parent's turn starts a child, the TUI
/// shows it, `/agents tests` switches the view into the child's own log,
/// what is typed there goes to the child (its log has it), and `/agents ..`
/// comes back to the parent's view.
#[test]
fn agents_switches_the_view_into_a_child_and_typing_there_goes_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.jsonl");
    let lines = [
        json!({"events":[{"tool_call":{"id":"s1","name":"spawn_agent",
            "arguments":{"task":"look at the tests","name":"tests","wait":false}}}]}),
        json!({"events":[{"text":"the parent spawned it"}]}),
        json!({"agent":"tests","events":[{"text":"child ready"}]}),
        json!({"agent":"tests","events":[{"text":"child got the message"}]}),
    ];
    std::fs::write(&script, lines.map(|l| l.to_string()).join("\n") + "\n").unwrap();
    let ServedPod {
        server: _server,
        socket,
        data,
    } = serve(dir.path(), |command| {
        command
            .args(["--provider", "script", "--script"])
            .arg(&script);
    });

    let mut attach = CommandBuilder::new(POD);
    attach.args(["attach", "--socket"]);
    attach.arg(&socket);
    let (parser, mut child, mut keys) = in_pty(attach);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"delegate\r");
    wait_for_screen(&parser, "the parent spawned it");
    wait_for_screen(&parser, ".tests started · /agents opens it");
    wait_for_screen(&parser, "Agents 1");

    press(b"/agents tests\r");
    wait_for_screen(&parser, "/agents goes back");
    wait_for_screen(&parser, "look at the tests");
    wait_for_screen(&parser, "child ready");
    assert!(
        !flat(&parser).contains("the parent spawned it"),
        "the child's own view"
    );
    press(b"steer it\r");
    wait_for_screen(&parser, "child got the message");
    let steered = user_inputs(&data)
        .into_iter()
        .filter(|(_, e)| e["segments"][0]["text"] == "steer it")
        .count();
    assert_eq!(steered, 1, "typed into the child, once");
    let parent_log = std::fs::read_to_string(
        std::fs::read_dir(data.join("sessions"))
            .unwrap()
            .flatten()
            .map(|f| f.path())
            .find(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .contains("the parent spawned it")
            })
            .unwrap(),
    )
    .unwrap();
    assert!(!parent_log.contains("steer it"), "not the parent's input");

    press(b"/agents ..\r");
    wait_for_screen(&parser, "the parent spawned it");
    assert!(!flat(&parser).contains("/agents goes back"));
    press(b"\x04");
    wait_until("pod attach to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}
