//! `pod exec`: the built binary running one task in its private pod with
//! the script model, as a CI job or a benchmark harness runs it — its
//! JSON lines, its patch applied with the real `git apply`, its policy that
//! never waits for a person, and its time and token limits.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use harness::{read_lines, POD};
use serde_json::{json, Value};

/// A workspace (a git repository with one commit unless asked otherwise),
/// a data directory and a runtime directory of its own.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn git() -> Setup {
        let setup = Setup::plain();
        git(&setup.workspace(), &["init", "-q"]);
        setup
    }

    fn plain() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["ws", "data", "run", "config"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Setup { dir }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn write(&self, path: &str, content: &str) {
        let path = self.workspace().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn commit(&self) {
        git(&self.workspace(), &["add", "-A"]);
        git(&self.workspace(), &["commit", "-qm", "start"]);
    }

    /// `pod exec ARGS…` with `script` as the model, run to its end.
    fn exec(&self, script: &[Value], args: &[&str]) -> Output {
        self.exec_with_stdin(script, args, Stdio::null())
    }

    fn exec_with_stdin(&self, script: &[Value], args: &[&str], stdin: Stdio) -> Output {
        let script_path = self.dir.path().join("script.jsonl");
        let lines: Vec<String> = script.iter().map(Value::to_string).collect();
        std::fs::write(&script_path, lines.join("\n")).unwrap();
        Command::new(POD)
            .arg("exec")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--workspace")
            .arg(self.workspace())
            .arg("--script")
            .arg(&script_path)
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("POD_SOCKET")
            .env_remove("POD_NAME")
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .stdin(stdin)
            .output()
            .unwrap()
    }

    fn session(&self, session_id: &str) -> Vec<Value> {
        read_lines(&self.data_dir().join(format!("sessions/{session_id}.jsonl")))
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"tool_call": {"id": id, "name": name, "arguments": arguments}})
}

fn usage(input: u64, output: u64) -> Value {
    json!({"usage": {"input_tokens": input, "output_tokens": output}})
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The JSON lines of `--json`: every one but the last a frame of the
/// protocol (checked against the published schema), the last the result
/// (checked against `#/$defs/ExecResult`).
fn json_lines(output: &Output) -> (Vec<Value>, Value) {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let result = lines.pop().expect("no output");
    for frame in &lines {
        harness::schema::check_received(frame);
    }
    check_result_schema(&result);
    (lines, result)
}

fn check_result_schema(result: &Value) {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/protocol.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let schema = json!({"$ref": "#/$defs/ExecResult", "$defs": doc["$defs"]});
    let validator = jsonschema::validator_for(&schema).unwrap();
    if let Err(e) = validator.validate(result) {
        panic!("the result line does not match #/$defs/ExecResult: {e}: {result}");
    }
}

fn entries(log: &[Value], kind: &str) -> Vec<Value> {
    log.iter()
        .filter(|l| l["entry"]["kind"] == kind)
        .map(|l| l["entry"].clone())
        .collect()
}

#[test]
fn json_prints_the_runs_frames_then_a_result_whose_usage_sums_its_calls() {
    let setup = Setup::git();
    setup.write("notes.txt", "one\n");
    setup.commit();
    let script = [
        json!({"events": [
            {"text": "Editing."},
            call("c1", "edit_file", json!({"path": "notes.txt", "old_string": "one", "new_string": "uno"})),
            call("c2", "bash", json!({"command": "echo two >> notes.txt && wc -l < notes.txt"})),
            usage(100, 10),
        ]}),
        json!({"events": [call("c3", "write_file", json!({"path": "new.txt", "content": "hi\n"})), usage(150, 20)]}),
        json!({"events": [{"text": "All done."}, usage(200, 5)]}),
    ];
    let output = setup.exec(&script, &["--approval", "auto", "--json", "edit the notes"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (frames, result) = json_lines(&output);

    // As `pod send --json`: the response to the run, then every frame from
    // its turn_start to its turn_end entry.
    assert_eq!(frames[0]["type"], "response", "{frames:#?}");
    assert_eq!(frames[1]["type"], "turn_start");
    let last = frames.last().unwrap();
    assert_eq!(last["entry"]["kind"], "turn_end", "{last}");
    assert!(frames.iter().all(|f| f["type"] != "snapshot"));
    let tool_results: Vec<&Value> = frames
        .iter()
        .filter(|f| f["entry"]["kind"] == "tool_results")
        .collect();
    assert_eq!(tool_results.len(), 3, "{frames:#?}");
    let bash = &tool_results[1]["entry"]["results"][0];
    assert_eq!(bash["call_id"], "c2");
    assert!(
        bash["output"].as_str().unwrap().starts_with("2\n"),
        "{bash}"
    );

    assert_eq!(result["type"], "result");
    assert_eq!(result["reason"], "completed");
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 450, "output_tokens": 35}),
        "the sum of its three calls"
    );
    assert_eq!(result["usage"], last["entry"]["usage"]);
    assert_eq!(result["text"], "All done.");
    assert_eq!(result["patch"], Value::Null);
    assert!(result["duration_ms"].as_u64().is_some());

    // The run happened in the workspace, in a session of the usual data
    // directory that `pod log` reads after.
    assert_eq!(
        std::fs::read_to_string(setup.workspace().join("notes.txt")).unwrap(),
        "uno\ntwo\n"
    );
    let session_id = result["session_id"].as_str().unwrap();
    let log = setup.session(session_id);
    assert_eq!(entries(&log, "turn_end").len(), 1);
    assert_eq!(
        log.last().unwrap()["entry"]["kind"],
        "turn_end",
        "the run's turn is the session's last entry"
    );
    let printed = Command::new(POD)
        .args(["log", "--json", session_id])
        .arg("--data-dir")
        .arg(setup.data_dir())
        .arg("--workspace")
        .arg(setup.workspace())
        .env("XDG_RUNTIME_DIR", setup.dir.path().join("run"))
        .output()
        .unwrap();
    assert!(printed.status.success(), "{}", stderr(&printed));

    // A private pod, named after the workspace's, stopped afterwards: its
    // state is kept, its socket is gone.
    let workspace_pod = pod::cli::derived_name(&setup.workspace().canonicalize().unwrap());
    let pods: Vec<String> = std::fs::read_dir(setup.data_dir().join("pods"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert_eq!(pods.len(), 1, "{pods:?}");
    let name = pods[0].trim_end_matches(".json");
    let hex = name
        .strip_prefix(&format!("{workspace_pod}.exec-"))
        .unwrap_or_else(|| panic!("{name} is not {workspace_pod}.exec-<8 hex>"));
    assert!(
        hex.len() == 8 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{name}"
    );
    let sockets: Vec<_> = std::fs::read_dir(setup.dir.path().join("run/pod"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name();
            name.to_string_lossy().ends_with(".sock").then_some(name)
        })
        .collect();
    assert!(sockets.is_empty(), "sockets left behind: {sockets:?}");
}

#[test]
fn without_json_stdout_is_the_final_text_alone() {
    let setup = Setup::git();
    let script = [
        json!({"events": [{"text": "Let me look."}, call("c1", "bash", json!({"command": "echo looked"}))]}),
        json!({"events": [{"text": "The answer is 42."}]}),
    ];
    let output = setup.exec(&script, &["--approval", "auto", "what is it?"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "The answer is 42.\n"
    );
    assert!(
        stderr(&output).contains("bash echo looked"),
        "{}",
        stderr(&output)
    );
    // The private pod leaves only its state file, which the hint's
    // `pod log --name` reads: no lock, socket record or job ids.
    let mut left: Vec<String> = std::fs::read_dir(setup.data_dir().join("pods"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].ends_with(".json") && left[0].contains(".exec-"),
        "{left:?}"
    );
    // The hint names the data directory the run was given, so it works.
    let hint = stderr(&output);
    let command = hint
        .split('`')
        .find(|part| part.starts_with("pod ") && part.ends_with(" log"))
        .unwrap_or_else(|| panic!("no `pod log` hint in {hint}"));
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    assert!(args.contains(&"--data-dir"), "{command}");
    let log = Command::new(POD).args(&args).output().unwrap();
    assert_eq!(log.status.code(), Some(0), "{}", stderr(&log));
    assert!(String::from_utf8_lossy(&log.stdout).contains("The answer is 42."));
}

/// Every kind of change a run makes — an edit, a new file in a new
/// directory, a deletion, an executable bit, a change made by `bash` —
/// comes out as one diff that the real `git apply` applies to a fresh
/// clone of the starting commit, giving the same files.
#[test]
fn emit_patch_applies_to_a_fresh_clone_and_reproduces_the_files() {
    let setup = Setup::git();
    setup.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    setup.write("old.txt", "going away\n");
    setup.write("run.sh", "echo run\n");
    setup.write("README.md", "# Title\n\ntext\n");
    // Binary files, changed, added and deleted: git's binary patches.
    let image: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    std::fs::write(setup.workspace().join("logo.bin"), &image).unwrap();
    std::fs::write(setup.workspace().join("gone.bin"), [0u8, 9, 9]).unwrap();
    setup.commit();
    let script = [
        json!({"events": [
            call("c1", "edit_file", json!({"path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { a() }"})),
            call("c2", "write_file", json!({"path": "docs/new/guide.md", "content": "# Guide\n"})),
            call("c3", "bash", json!({"command": "rm old.txt && chmod +x run.sh && printf 'more\\n' >> README.md"})),
            call("c4", "bash", json!({"command": "printf '\\000\\377new' > new.bin && printf '\\000x' >> logo.bin && rm gone.bin"})),
        ]}),
        json!({"events": [{"text": "Changed."}]}),
    ];
    let patch = setup.dir.path().join("out.patch");
    let output = setup.exec(
        &script,
        &[
            "--approval",
            "auto",
            "--json",
            "--emit-patch",
            patch.to_str().unwrap(),
            "change",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (_, result) = json_lines(&output);
    assert_eq!(result["patch"], patch.to_str().unwrap());

    let clone = setup.dir.path().join("clone");
    git(
        setup.dir.path(),
        &["clone", "-q", setup.workspace().to_str().unwrap(), "clone"],
    );
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(tree(&clone), tree(&setup.workspace()));
    assert!(!clone.join("old.txt").exists());
    assert!(!clone.join("gone.bin").exists());
    assert_eq!(std::fs::read(clone.join("new.bin")).unwrap(), b"\0\xffnew");
    assert!(std::fs::read_to_string(&patch)
        .unwrap()
        .contains("GIT binary patch"));
}

/// The files of a directory (without `.git`): path, executable bit, bytes.
fn tree(dir: &Path) -> Vec<(String, bool, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap() == ".git" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let mode = std::fs::metadata(&path).unwrap().permissions().mode();
                files.push((
                    path.strip_prefix(dir).unwrap().display().to_string(),
                    mode & 0o111 != 0,
                    std::fs::read(&path).unwrap(),
                ));
            }
        }
    }
    files.sort();
    files
}

/// The checkpoints make the patch, not git: a workspace that is no git
/// repository gets one too, which `git apply` applies to a copy of the
/// files as they were.
#[test]
fn emit_patch_works_in_a_workspace_that_is_not_a_git_repository() {
    let setup = Setup::plain();
    setup.write("a.txt", "alpha\n");
    let before = setup.dir.path().join("before");
    std::fs::create_dir(&before).unwrap();
    std::fs::write(before.join("a.txt"), "alpha\n").unwrap();
    let script = [
        json!({"events": [
            call("c1", "edit_file", json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"})),
            call("c2", "write_file", json!({"path": "b/c.txt", "content": "gamma\n"})),
        ]}),
        json!({"events": [{"text": "ok"}]}),
    ];
    let patch = setup.dir.path().join("out.patch");
    let output = setup.exec(
        &script,
        &[
            "--approval",
            "auto",
            "--emit-patch",
            patch.to_str().unwrap(),
            "go",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    git(&before, &["apply", patch.to_str().unwrap()]);
    assert_eq!(tree(&before), tree(&setup.workspace()));
}

/// Nobody answers in `pod exec`: a call that would ask is denied by the
/// policy (`mode:exec`), the model hears so, and the run ends — here
/// well within the `--timeout` that stops the test if it would wait.
#[test]
fn a_call_that_would_ask_is_denied_and_the_run_still_ends() {
    let setup = Setup::git();
    let script = [
        json!({"events": [call("c1", "bash", json!({"command": "touch made-by-bash"}))]}),
        json!({"events": [{"text": "I could not run it."}]}),
    ];
    let output = setup.exec(&script, &["--json", "--timeout", "60", "make a file"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (_, result) = json_lines(&output);
    assert_eq!(result["reason"], "completed");
    assert_eq!(result["text"], "I could not run it.");
    assert!(!setup.workspace().join("made-by-bash").exists());
    let log = setup.session(result["session_id"].as_str().unwrap());
    assert!(entries(&log, "approval_request").is_empty());
    let decisions = entries(&log, "approval_decision");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["decision"], "deny");
    assert_eq!(decisions[0]["by"], "policy");
    assert_eq!(decisions[0]["rule"], "mode:exec");
    assert_eq!(decisions[0]["call_id"], "c1");
}

/// `--timeout` in the middle of a long `bash`: the turn is cancelled, the
/// command killed (its result keeps what it printed and says it was
/// killed), the log says why, and the exit code is 6.
#[test]
fn timeout_during_a_long_bash_kills_it_and_exits_6() {
    let setup = Setup::git();
    let script = [
        json!({"events": [call("c1", "bash", json!({"command": "echo started; sleep 600; echo never"})), usage(70, 7)]}),
        json!({"events": [{"text": "unreachable"}]}),
    ];
    let started = Instant::now();
    let output = setup.exec(
        &script,
        &["--approval", "auto", "--json", "--timeout", "2", "wait"],
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(6), "{}", stderr(&output));
    let (frames, result) = json_lines(&output);
    assert_eq!(result["reason"], "error");
    assert_eq!(result["error"]["code"], "timeout");
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 70, "output_tokens": 7})
    );
    assert!(result["duration_ms"].as_u64().unwrap() >= 2000, "{result}");
    assert_eq!(frames.last().unwrap()["entry"]["reason"], "cancelled");

    let log = setup.session(result["session_id"].as_str().unwrap());
    let results = entries(&log, "tool_results");
    let output_text = results[0]["results"][0]["output"].as_str().unwrap();
    assert!(output_text.starts_with("started\n"), "{output_text}");
    assert!(
        output_text.contains("[cancelled: the command was killed]"),
        "{output_text}"
    );
    assert!(!output_text.contains("never"));
    assert_eq!(entries(&log, "turn_end")[0]["reason"], "cancelled");
    let notes = entries(&log, "hook_injected_items");
    assert!(
        notes.iter().any(|n| n["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains("--timeout 2 s")),
        "the log says why the turn was cancelled: {notes:?}"
    );
}

/// `--max-tokens`: once the run's calls have used that many tokens, its
/// turn ends before the next call; code `budget`, exit 6.
#[test]
fn max_tokens_ends_the_run_with_budget_and_exits_6() {
    let setup = Setup::git();
    // Every reply asks for another step: only the budget ends this run.
    let script =
        [json!({"events": [call("c1", "bash", json!({"command": "true"})), usage(40, 10)]})];
    let output = setup.exec(
        &script,
        &[
            "--approval",
            "auto",
            "--json",
            "--max-tokens",
            "120",
            "loop",
        ],
    );
    assert_eq!(output.status.code(), Some(6), "{}", stderr(&output));
    let (_, result) = json_lines(&output);
    assert_eq!(result["reason"], "error");
    assert_eq!(result["error"]["code"], "budget");
    let used = result["usage"]["input_tokens"].as_u64().unwrap()
        + result["usage"]["output_tokens"].as_u64().unwrap();
    assert!(
        (120..=150).contains(&used),
        "stopped at the budget: {result}"
    );
}

#[test]
fn an_empty_task_is_bad_usage() {
    let setup = Setup::git();
    let script = [json!({"events": [{"text": "never"}]})];
    for args in [&["-"][..], &[][..], &["  \n"][..]] {
        let output = setup.exec(&script, args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).contains("no task"), "{}", stderr(&output));
        assert!(output.stdout.is_empty());
    }
    assert!(
        !setup.data_dir().join("sessions").exists(),
        "nothing was started for an empty task"
    );
}

#[test]
fn the_task_can_come_from_stdin() {
    let setup = Setup::git();
    let task = setup.dir.path().join("task.md");
    std::fs::write(&task, "the task from a file\n").unwrap();
    let script = [json!({"events": [{"text": "read it"}]})];
    let output = setup.exec_with_stdin(
        &script,
        &["--json", "-"],
        Stdio::from(std::fs::File::open(&task).unwrap()),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let (_, result) = json_lines(&output);
    let log = setup.session(result["session_id"].as_str().unwrap());
    assert_eq!(
        entries(&log, "user_input")[0]["segments"],
        json!([{"type": "text", "text": "the task from a file\n"}])
    );
}

// `pod replay`: a session recorded by `pod exec`, re-run from its log.

impl Setup {
    /// `pod replay ARGS…`, run to its end.
    fn replay(&self, args: &[&str]) -> Output {
        Command::new(POD)
            .arg("replay")
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("POD_SOCKET")
            .env_remove("POD_NAME")
            .env_remove("POD_WORKSPACE")
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Records a session with `pod exec`: edits, and a `bash` call that
    /// reads `outside.txt`, a file beside the workspace that no checkpoint
    /// holds. Its session id and the seq of that call's result.
    fn record(&self) -> (String, u64) {
        let outside = self.dir.path().join("outside.txt");
        std::fs::write(&outside, "outside 1\nsame\n").unwrap();
        let outside = outside.display();
        self.write("notes.txt", "one\n");
        self.commit();
        let script = [
            json!({"events": [
                call("c1", "edit_file", json!({"path": "notes.txt", "old_string": "one", "new_string": "uno"})),
                call("c2", "bash", json!({"command": "cat notes.txt && echo two >> notes.txt"})),
                usage(10, 1),
            ]}),
            json!({"events": [
                call("c3", "bash", json!({"command": format!("cat {outside}; wc -l < notes.txt")})),
                usage(20, 2),
            ]}),
            json!({"events": [{"text": "Read it."}, usage(30, 3)]}),
        ];
        let output = self.exec(&script, &["--approval", "auto", "--json", "record"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let (_, result) = json_lines(&output);
        let session_id = result["session_id"].as_str().unwrap().to_owned();
        let log = self.session(&session_id);
        let seq = log
            .iter()
            .find(|l| {
                l["entry"]["kind"] == "tool_results" && l["entry"]["results"][0]["call_id"] == "c3"
            })
            .unwrap()["seq"]
            .as_u64()
            .unwrap();
        (session_id, seq)
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Replayed as recorded: every tool result the same, exit 0 — though the
/// live workspace has moved on since, because the replay starts from the
/// session's first checkpoint in a scratch copy and never touches it.
#[test]
fn replay_of_a_recorded_session_finds_no_drift() {
    let setup = Setup::git();
    let (session_id, _) = setup.record();
    setup.write("notes.txt", "changed since\n");
    let output = setup.replay(&[&session_id[..8]]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("3 tool result(s) compared"),
        "{}",
        stdout(&output)
    );
    assert!(
        stdout(&output).ends_with("no drift\n"),
        "{}",
        stdout(&output)
    );
    assert_eq!(
        std::fs::read_to_string(setup.workspace().join("notes.txt")).unwrap(),
        "changed since\n",
        "the live workspace is left alone"
    );
}

/// What a tool returns changed (a file outside the checkpoint that a
/// `bash` call reads): the drift is reported at that result's seq, with
/// the first differing line of each, and the exit code is 1.
#[test]
fn replay_reports_drift_at_the_right_seq_and_exits_1() {
    let setup = Setup::git();
    let (session_id, seq) = setup.record();
    std::fs::write(setup.dir.path().join("outside.txt"), "outside 2\nsame\n").unwrap();
    let output = setup.replay(&[&session_id]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let text = stdout(&output);
    assert!(
        text.contains(&format!("drift at seq {seq} ")),
        "drift at seq {seq}: {text}"
    );
    assert!(text.contains("bash (call c3)"), "{text}");
    assert!(text.contains("  recorded: outside 1\n"), "{text}");
    assert!(text.contains("  replayed: outside 2\n"), "{text}");
    assert!(
        text.ends_with("1 drift\n"),
        "only that call drifted: {text}"
    );

    // Up to the seq before it, nothing drifts.
    let until = (seq - 1).to_string();
    let output = setup.replay(&["--until-seq", &until, &session_id]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("2 tool result(s) compared"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn replay_of_a_session_with_no_checkpoint_says_so_and_exits_2() {
    let setup = Setup::git();
    let output = setup.exec(
        &[json!({"events": [{"text": "just words"}]})],
        &["--json", "talk"],
    );
    let (_, result) = json_lines(&output);
    let output = setup.replay(&[result["session_id"].as_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("has no checkpoint"),
        "{}",
        stderr(&output)
    );
}

/// `--workspace DIR` replays into that (empty) directory, never into the
/// live workspace; `--fork` leaves the replayed session — whose
/// `session_start` names the recorded one — current for DIR's pod.
#[test]
fn replay_into_a_given_directory_and_fork_from_it() {
    let setup = Setup::git();
    let (session_id, _) = setup.record();
    let live = setup.workspace();
    let output = setup.replay(&["--workspace", live.to_str().unwrap(), &session_id]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("own workspace"),
        "{}",
        stderr(&output)
    );

    let scratch = setup.dir.path().join("scratch");
    let output = setup.replay(&[
        "--workspace",
        scratch.to_str().unwrap(),
        "--fork",
        &session_id,
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("notes.txt")).unwrap(),
        "uno\ntwo\n",
        "the replay's tools ran in DIR"
    );
    let pod = pod::cli::derived_name(&scratch.canonicalize().unwrap());
    let pointer: Value = serde_json::from_slice(
        &std::fs::read(setup.data_dir().join(format!("pods/{pod}.json"))).unwrap(),
    )
    .unwrap();
    let replayed = pointer["session_id"].as_str().unwrap();
    assert_ne!(replayed, session_id);
    let log = setup.session(replayed);
    assert_eq!(
        log[0]["entry"]["replay_of"],
        json!({"session_id": session_id})
    );
    assert_eq!(log.last().unwrap()["entry"]["kind"], "turn_end");
}

/// A private pod that cannot start (here: a provider without its API key)
/// exits 3 with the pod's own reason, as `pod send` does for a pod it starts.
#[test]
fn a_pod_that_cannot_start_exits_3_with_its_reason() {
    let setup = Setup::git();
    let output = Command::new(POD)
        .args(["exec", "--provider", "anthropic", "task"])
        .arg("--data-dir")
        .arg(setup.data_dir())
        .arg("--workspace")
        .arg(setup.workspace())
        .env_remove("ANTHROPIC_API_KEY")
        .env("XDG_RUNTIME_DIR", setup.dir.path().join("run"))
        .env("XDG_CONFIG_HOME", setup.dir.path().join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&output)
    );
}

/// Ctrl+C stops the run as it stops a pod: the turn is cancelled, the
/// running command killed, and the exit code is 4.
#[test]
fn sigint_cancels_the_run_and_exits_4() {
    use std::io::{BufRead, BufReader};
    let setup = Setup::git();
    let script_path = setup.dir.path().join("script.jsonl");
    let script =
        json!({"events": [call("c1", "bash", json!({"command": "echo started; sleep 600"}))]});
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut child = Command::new(POD)
        .arg("exec")
        .arg("--data-dir")
        .arg(setup.data_dir())
        .arg("--workspace")
        .arg(setup.workspace())
        .arg("--script")
        .arg(&script_path)
        .args(["--approval", "auto", "--json", "wait"])
        .env("XDG_RUNTIME_DIR", setup.dir.path().join("run"))
        .env("XDG_CONFIG_HOME", setup.dir.path().join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The command's first output is streaming: it runs.
    for line in lines.by_ref() {
        if line.unwrap().contains("\"tool_output_delta\"") {
            break;
        }
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::Int).unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(4), "{rest:?}");
    let result: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(result["reason"], "cancelled");
    let log = setup.session(result["session_id"].as_str().unwrap());
    let output = entries(&log, "tool_results")[0]["results"][0]["output"].clone();
    assert!(
        output
            .as_str()
            .unwrap()
            .contains("[cancelled: the command was killed]"),
        "{output}"
    );
}
