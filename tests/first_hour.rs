//! The first hour of a new user (issue 28): each project has its own pod
//! and conversation, `pod send TEXT` works with no pod running, quitting
//! the TUI says what is left running, and usage mistakes are named.
//! Every test drives the built binary as a user would, from the project's
//! directory, with its own runtime, data and config directories.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use portable_pty::CommandBuilder;
use serde_json::Value;

mod pty;

use pty::*;

/// A user's machine: XDG directories of its own, and projects in it.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("run")).unwrap();
        Machine { dir }
    }

    fn env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("XDG_RUNTIME_DIR", self.dir.path().join("run")),
            ("XDG_DATA_HOME", self.dir.path().join("data")),
            ("XDG_CONFIG_HOME", self.dir.path().join("config")),
        ]
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data/pod")
    }

    /// A project directory (its real path, as the pod records it).
    fn project(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path.canonicalize().unwrap()
    }

    /// `pod ARGS` run in `cwd`.
    fn pod(&self, cwd: &Path, args: &[&str]) -> Output {
        Command::new(POD)
            .args(args)
            .current_dir(cwd)
            .envs(self.env())
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("POD_NAME")
            .env_remove("POD_SOCKET")
            .env_remove("POD_URL")
            .output()
            .unwrap()
    }
}

impl Drop for Machine {
    /// Stops every pod this machine started.
    fn drop(&mut self) {
        let Ok(dir) = std::fs::read_dir(self.dir.path().join("run/pod")) else {
            return;
        };
        for socket in dir.flatten() {
            let _ = Command::new(POD)
                .arg("stop")
                .arg("--socket")
                .arg(socket.path())
                .envs(self.env())
                .output();
        }
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn succeeded(out: &Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    stdout(out)
}

/// The first line of a session log: its `session_start`.
fn session_start(data: &Path, session: &str) -> Value {
    let log = std::fs::read_to_string(data.join(format!("sessions/{session}.jsonl"))).unwrap();
    serde_json::from_str::<Value>(log.lines().next().unwrap()).unwrap()["entry"].clone()
}

fn sessions_json(machine: &Machine, cwd: &Path, all: bool) -> Vec<Value> {
    let mut args = vec!["sessions", "--json"];
    if all {
        args.push("--all");
    }
    serde_json::from_str(&succeeded(&machine.pod(cwd, &args))).unwrap()
}

/// Two projects, two pods: `pod send "…"` starts each project's own pod,
/// each conversation stays with its project, and `pod sessions` lists this
/// project's sessions (`--all` every one, with the workspace).
#[test]
fn each_project_has_its_own_pod_and_conversation() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let web = machine.project("web");
    let out = machine.pod(&calc, &["send", "hello from calc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("started the pod"), "{}", stderr(&out));
    let out = machine.pod(&web, &["send", "hello from web"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let listed = succeeded(&machine.pod(&calc, &["list"]));
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "two pods: {listed}");
    assert!(
        rows.iter().any(|r| r.starts_with("calc-")),
        "named after the project: {listed}"
    );

    let here = sessions_json(&machine, &calc, false);
    assert_eq!(here.len(), 1, "{here:?}");
    assert_eq!(here[0]["title"], "hello from calc");
    assert_eq!(here[0]["workspace"], calc.to_str().unwrap());
    let id = here[0]["session_id"].as_str().unwrap();
    assert_eq!(
        session_start(&machine.data(), id)["workspace"],
        calc.to_str().unwrap(),
        "session_start records the workspace"
    );
    let every = sessions_json(&machine, &calc, true);
    assert_eq!(every.len(), 2, "{every:?}");
    let table = succeeded(&machine.pod(&calc, &["sessions", "--all"]));
    assert!(
        table.lines().next().unwrap().contains("WORKSPACE"),
        "{table}"
    );
    assert!(table.contains(web.to_str().unwrap()), "{table}");
    let table = succeeded(&machine.pod(&web, &["sessions"]));
    assert!(
        table.contains("hello from web") && !table.contains("hello from calc"),
        "{table}"
    );
}

/// A name given with `--name` stays with the workspace it first served: in
/// another workspace it is bad usage that suggests another name.
#[test]
fn a_name_of_another_workspace_is_refused_with_a_way_out() {
    let machine = Machine::new();
    let a = machine.project("a");
    let b = machine.project("b");
    let out = machine.pod(&a, &["--name", "shared", "send", "hi"]);
    succeeded(&out);
    // The hint names the pod as it was typed (issue 36): a plain `pod stop`
    // would look for the workspace's own pod.
    assert!(
        stderr(&out).contains("`pod --name shared stop` stops it"),
        "{}",
        stderr(&out)
    );
    succeeded(&machine.pod(&a, &["--name", "shared", "stop"]));
    let out = machine.pod(&b, &["--name", "shared", "serve"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains(a.to_str().unwrap()) && said.contains("--name"),
        "{said}"
    );
    let out = machine.pod(&b, &["--name", "bad name!", "status"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("A-Z a-z 0-9 . _ -"),
        "{}",
        stderr(&out)
    );
}

/// The `default` pod of earlier versions, whose session was this
/// workspace's, is adopted: the conversation goes on.
#[test]
fn the_default_pod_of_earlier_versions_is_adopted_in_its_workspace() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let other = machine.project("other");
    let data = machine.data();
    std::fs::create_dir_all(data.join("sessions")).unwrap();
    std::fs::create_dir_all(data.join("pods")).unwrap();
    let id = "0c0ffee0-0000-4000-8000-000000000000";
    let start = serde_json::json!({"seq":0,"entry":{"kind":"session_start","session_id":id,
        "created_at":"2026-11-01T10:00:00Z","compacted_from":null,"forked_from":null,
        "provider":"offline","model":"offline","workspace":calc}});
    std::fs::write(
        data.join(format!("sessions/{id}.jsonl")),
        format!("{start}\n"),
    )
    .unwrap();
    std::fs::write(
        data.join("pods/default.json"),
        format!("{{\"session_id\":\"{id}\"}}"),
    )
    .unwrap();

    succeeded(&machine.pod(&other, &["send", "elsewhere"]));
    assert!(
        data.join("pods/default.json").exists(),
        "another workspace leaves it alone"
    );
    let out = machine.pod(&calc, &["send", "still here?"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let here = sessions_json(&machine, &calc, false);
    assert_eq!(here.len(), 1, "{here:?}");
    assert_eq!(here[0]["session_id"], id, "the old conversation goes on");
    assert_eq!(here[0]["title"], "still here?");
    assert!(!data.join("pods/default.json").exists());
}

/// Resuming another workspace's session from the command line needs
/// `--force`, and says why.
#[test]
fn another_workspaces_session_needs_force() {
    let machine = Machine::new();
    let a = machine.project("a");
    let b = machine.project("b");
    succeeded(&machine.pod(&a, &["send", "in a"]));
    succeeded(&machine.pod(&a, &["stop"]));
    let id = sessions_json(&machine, &a, false)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = machine.pod(&b, &["serve", "--session", &id[..8]]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--force") && stderr(&out).contains(a.to_str().unwrap()),
        "{}",
        stderr(&out)
    );
    let out = machine.pod(&b, &["--session", &id[..8], "--force", "send", "in b"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let status: Value =
        serde_json::from_str(&succeeded(&machine.pod(&b, &["status", "--json"]))).unwrap();
    assert_eq!(status["greeting"]["session_id"], id.as_str());
}

/// `pod send` never starts a pod when told not to, nor for a remote pod.
#[test]
fn send_starts_no_pod_when_told_not_to_or_for_a_remote_pod() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let out = machine.pod(&calc, &["send", "--no-start", "hi"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no pod is listening"),
        "{}",
        stderr(&out)
    );
    let out = Command::new(POD)
        .args(["send", "hi"])
        .current_dir(&calc)
        .envs(machine.env())
        .env("POD_URL", "ws://127.0.0.1:9/")
        .env("POD_TOKEN", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        !machine.dir.path().join("run/pod").exists(),
        "no pod was started"
    );
    let out = machine.pod(&calc, &["send", "--text", "a", "b"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--text and TEXT are one message"
    );
}

/// First hour, item 3: serve flags given to `pod send` for a pod already
/// running set nothing — and it says so instead of dropping them silently.
#[test]
fn send_says_when_its_serve_flags_meet_a_running_pod() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let first = machine.pod(&calc, &["send", "hi"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let out = machine.pod(&calc, &["--model", "zz", "send", "hi again"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a pod is already running, so --model=zz set nothing"),
        "{}",
        stderr(&out)
    );
    let quiet = machine.pod(&calc, &["send", "and again"]);
    assert!(
        !stderr(&quiet).contains("set nothing"),
        "{}",
        stderr(&quiet)
    );
}

/// A `--script` that names no file is bad usage, said at once, also when
/// the project's pod is already running.
#[test]
fn a_missing_script_is_bad_usage() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    for args in [
        &["serve", "--provider", "script", "--script", "nope.jsonl"][..],
        &["--provider", "script", "--script", "nope.jsonl"][..],
    ] {
        let out = machine.pod(&calc, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("nope.jsonl"), "{}", stderr(&out));
    }
    succeeded(&machine.pod(&calc, &["send", "hi"]));
    let out = machine.pod(&calc, &["--provider", "script", "--script", "nope.jsonl"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("already running"),
        "{}",
        stderr(&out)
    );
}

/// `pod pause` holds the next turn and the status says so; `pod resume`
/// lets it go on.
#[test]
fn pause_and_resume_from_the_command_line() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    succeeded(&machine.pod(&calc, &["send", "first"]));
    let said = succeeded(&machine.pod(&calc, &["pause"]));
    assert!(said.contains("pod resume"), "{said}");
    let mut sender = Command::new(POD)
        .args(["send", "held"])
        .current_dir(&calc)
        .envs(machine.env())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the turn to be held", || {
        let out = machine.pod(&calc, &["status", "--json"]);
        let status: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        status["status"]["state"] == "paused"
    });
    assert!(sender.try_wait().unwrap().is_none(), "held, not finished");
    assert_eq!(
        succeeded(&machine.pod(&calc, &["resume"])).trim(),
        "resumed"
    );
    wait_until("the held turn to finish", || {
        sender.try_wait().unwrap().is_some()
    });
    assert!(sender.wait().unwrap().success());
}

/// Quitting the TUI says that the pod keeps running and how to stop it or
/// come back.
#[test]
fn quitting_the_tui_says_what_keeps_running() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let mut pod = CommandBuilder::new(POD);
    pod.cwd(&calc);
    pod.env_remove("OPENAI_API_KEY");
    pod.env_remove("ANTHROPIC_API_KEY");
    for (k, v) in machine.env() {
        pod.env(k, v);
    }
    let (parser, mut child, mut keys) = in_pty(pod);
    wait_for_screen(&parser, "● connected");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
    wait_for_screen(
        &parser,
        "keeps running: `pod stop` stops it, `pod` comes back",
    );
}

/// First hour, item 14: `pod attach --inline` leaves its last frame in the
/// scrollback and what follows it (the detach line, the shell's prompt)
/// below the status bar, not over the middle of the screen.
#[test]
fn an_inline_tui_leaves_the_shell_below_its_frame() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    succeeded(&machine.pod(&calc, &["send", "hi"]));
    let (parser, mut child, mut keys) = tui(&machine, &calc, &["attach", "--inline"]);
    wait_for_screen(&parser, "● connected");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
    wait_for_screen(&parser, "pod: detached");
    let contents = parser.lock().unwrap().screen().contents();
    let rows: Vec<&str> = contents.lines().collect();
    let row_of = |needle: &str| rows.iter().rposition(|r| r.contains(needle));
    let (Some(bar), Some(detached)) = (row_of("● connected"), row_of("pod: detached")) else {
        panic!("{contents}");
    };
    assert!(
        detached > bar,
        "the detach line is above the status bar:\n{contents}"
    );
}

/// Plain `pod` in a project, in a pseudo-terminal, with its pod stopped when
/// the test ends (by the machine).
fn tui(machine: &Machine, cwd: &Path, args: &[&str]) -> InPty {
    let mut pod = CommandBuilder::new(POD);
    pod.cwd(cwd);
    pod.env_remove("OPENAI_API_KEY");
    pod.env_remove("ANTHROPIC_API_KEY");
    for (k, v) in machine.env() {
        pod.env(k, v);
    }
    pod.args(args);
    in_pty(pod)
}

/// Ctrl+C on a draft clears the draft (and cancels nothing, quits
/// nothing); Ctrl+U clears the whole draft, every line of it.
#[test]
fn ctrl_c_and_ctrl_u_clear_the_draft_first() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let (parser, mut child, mut keys) = tui(&machine, &calc, &[]);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"half a thought");
    wait_for_screen(&parser, "half a thought");
    press(b"\x03");
    wait_for_screen(&parser, "draft cleared");
    wait_until("the draft to go", || {
        !flat(&parser).contains("half a thought")
    });
    press(b"\x03");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        child.try_wait().unwrap().is_none(),
        "one Ctrl+C after the draft does not quit"
    );
    press(b"first line\x0asecond line");
    wait_for_screen(&parser, "second line");
    press(b"\x15");
    wait_until("Ctrl+U to clear both lines", || {
        let screen = flat(&parser);
        !screen.contains("first line") && !screen.contains("second line")
    });
    press(b"\x04");
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// A `--model` typed for a restart wins over the model the session had
/// switched to, and the pod's status says the typed one.
#[test]
fn a_typed_model_wins_over_the_sessions_earlier_choice() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    succeeded(&machine.pod(&calc, &["--model", "one", "send", "hi"]));
    succeeded(&machine.pod(&calc, &["stop"]));
    // Restarted without --model: the session switches to the default.
    succeeded(&machine.pod(&calc, &["send", "hi"]));
    succeeded(&machine.pod(&calc, &["stop"]));
    succeeded(&machine.pod(&calc, &["--model", "one", "send", "hi"]));
    let status: Value =
        serde_json::from_str(&succeeded(&machine.pod(&calc, &["status", "--json"]))).unwrap();
    assert_eq!(status["status"]["model"], "one", "{status}");
    assert_eq!(status["greeting"]["model"], "one", "{status}");
}

/// When the pod dies mid-turn, the TUI says so: no "running", no tool clock
/// counting on, and how to start the pod again.
#[test]
fn the_tui_says_when_the_pod_is_gone() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let script = machine.dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        "{\"events\":[{\"tool_call\":{\"id\":\"c1\",\"name\":\"bash\",\"arguments\":{\"command\":\"sleep 30\"}}}]}\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let args = [
        "--provider",
        "script",
        "--script",
        script,
        "--approval",
        "auto",
    ];
    let (parser, mut child, mut keys) = tui(&machine, &calc, &args);
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"build it\r");
    wait_for_screen(&parser, "running… 1s");
    let status: Value =
        serde_json::from_str(&succeeded(&machine.pod(&calc, &["status", "--json"]))).unwrap();
    let pid = status["greeting"]["pid"].as_i64().unwrap();
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_for_screen(&parser, "[disconnected]");
    wait_for_screen(&parser, "start it again with `pod`");
    wait_for_screen(&parser, "outcome unknown");
    let screen = flat(&parser);
    assert!(!screen.contains("running…"), "{screen}");
    assert!(
        !screen.contains("⠋ running") && !screen.contains(" running "),
        "{screen}"
    );
    press(b"\x04");
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
    // Item 14: quitting does not claim that a dead pod keeps running.
    wait_for_screen(
        &parser,
        "is not running (it stopped): `pod` starts it again",
    );
    assert!(
        !flat(&parser).contains("keeps running"),
        "{}",
        flat(&parser)
    );
}

/// An API key set after the pod started is not ignored: plain `pod` says
/// the running pod uses another provider and restarts it on `r`.
#[test]
fn a_key_set_later_is_noticed_and_the_pod_restarted_on_request() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    succeeded(&machine.pod(&calc, &["send", "hi"]));
    let mut pod = CommandBuilder::new(POD);
    pod.cwd(&calc);
    pod.env_remove("OPENAI_API_KEY");
    pod.env("ANTHROPIC_API_KEY", "sk-test-never-used");
    for (k, v) in machine.env() {
        pod.env(k, v);
    }
    let (parser, mut child, mut keys) = in_pty(pod);
    wait_for_screen(&parser, "r: restart it as asked]");
    let screen = flat(&parser);
    assert!(
        screen.contains("the provider is offline, not anthropic (ANTHROPIC_API_KEY is set)"),
        "{screen}"
    );
    keys.write_all(b"r\r").unwrap();
    keys.flush().unwrap();
    wait_for_screen(&parser, "● connected");
    wait_for_screen(&parser, "anthropic/");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// A config mistake is shown in the TUI, at the bottom, not only in the
/// pod's log.
#[test]
fn the_tui_shows_the_pods_start_warnings() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    let config = machine.dir.path().join("config/pod");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "aproval = \"auto\"\n").unwrap();
    let (parser, mut child, mut keys) = tui(&machine, &calc, &[]);
    wait_for_screen(&parser, "● connected");
    wait_for_screen(&parser, "[pod warning]");
    wait_for_screen(&parser, "(did you mean `approval`?)");
    keys.write_all(b"\x04").unwrap();
    keys.flush().unwrap();
    wait_until("pod to exit on Ctrl+D", || {
        child.try_wait().unwrap().is_some()
    });
}

/// `pod blame` on a terminal numbers the lines and lines up its columns
/// (issue 36): the `│` of a line no turn wrote sits under those of the
/// lines a turn wrote.
#[test]
fn blame_on_a_terminal_numbers_lines_and_lines_up_its_columns() {
    let machine = Machine::new();
    let calc = machine.project("calc");
    std::fs::write(calc.join("ops.txt"), "kept\n").unwrap();
    let script = machine.dir.path().join("script.jsonl");
    let call = serde_json::json!({"events":[{"tool_call":{"id":"c1","name":"write_file",
        "arguments":{"path":"ops.txt","content":"kept\nadded by the turn\n"}}}]});
    let done = serde_json::json!({"events":[{"text":"done"}]});
    std::fs::write(&script, format!("{call}\n{done}\n")).unwrap();
    let script = script.to_str().unwrap();
    succeeded(&machine.pod(
        &calc,
        &[
            "--provider",
            "script",
            "--script",
            script,
            "--approval",
            "auto",
            "send",
            "add a line",
        ],
    ));
    let (parser, mut child, _keys) = tui(&machine, &calc, &["blame", "ops.txt"]);
    wait_until("pod blame to end", || child.try_wait().unwrap().is_some());
    wait_for_screen(&parser, "added by the turn");
    let screen = parser.lock().unwrap().screen().contents();
    let rows: Vec<&str> = screen.lines().filter(|l| l.contains('│')).collect();
    assert_eq!(rows.len(), 2, "{screen}");
    assert!(rows[0].starts_with("1 -"), "{screen}");
    assert!(
        rows[1].starts_with("2 ") && rows[1].contains("add a line"),
        "{screen}"
    );
    let bar = |row: &str| row.chars().position(|c| c == '│');
    assert_eq!(bar(rows[0]), bar(rows[1]), "{screen}");
}
