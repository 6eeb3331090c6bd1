//! The agent's craft against a real pod: the environment entry, background
//! jobs (start, output, kill, end notes idle and mid-turn, the limit, death
//! with the pod however it stops), `update_plan` and `pod jobs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{eventually, first_of, kinds, Pod};
use serde_json::{json, Value};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"events":[{"tool_call":{"id":id,"name":name,"arguments":arguments}}]})
}

fn text(t: &str) -> Value {
    json!({"events":[{"text":t}]})
}

fn script(replies: &[Value]) -> String {
    replies
        .iter()
        .map(|r| r.to_string() + "\n")
        .collect::<String>()
}

fn background(id: &str, command: &str) -> Value {
    call(id, "bash", json!({"command": command, "background": true}))
}

/// The texts of the injected items of `source`, in log order.
fn injected(log: &[Value], source: &str) -> Vec<String> {
    log.iter()
        .filter(|l| l["entry"]["kind"] == "hook_injected_items")
        .flat_map(|l| l["entry"]["items"].as_array().unwrap().clone())
        .filter(|i| i["source"] == source)
        .map(|i| i["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The result the tool call `id` got.
fn result(log: &[Value], id: &str) -> Value {
    log.iter()
        .filter(|l| l["entry"]["kind"] == "tool_results")
        .flat_map(|l| l["entry"]["results"].as_array().unwrap().clone())
        .find(|r| r["call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

fn ask(c: &mut harness::Client, method: Value) -> Value {
    let id = method["request_id"].as_str().unwrap().to_owned();
    c.send(method);
    c.until(|f| f["request_id"] == id.as_str() && (f["type"] == "response" || f["type"] == "error"))
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn read_pid(pod: &Pod, file: &str) -> u32 {
    let path = pod.workspace.join(file);
    eventually("the job to write its pid", Duration::from_secs(10), || {
        std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n'))
    });
    std::fs::read_to_string(&path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_environment_is_told_at_the_first_turn_and_again_only_when_it_changes() {
    let pod = Pod::builder()
        .script(&script(&[text("one"), text("two"), text("three")]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("hello");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    assert_eq!(
        kinds(&log),
        [
            "session_start",
            "user_input",
            "environment",
            "assistant:text",
            "turn_end"
        ]
    );
    let env = &injected(&log, "environment")[0];
    let keys: Vec<&str> = env.lines().map(|l| l.split(": ").next().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "os",
            "shell",
            "date",
            "workspace",
            "git",
            "approval",
            "sandbox"
        ]
    );
    let workspace = pod.workspace.canonicalize().unwrap();
    assert!(
        env.contains(&format!("\nworkspace: {}\n", workspace.display())),
        "{env}"
    );
    assert!(env.contains("\ngit: not a repository\n"), "{env}");
    assert!(env.contains("\napproval: auto\n"), "{env}");
    assert!(
        env.contains("\nsandbox: workspace-write, network on"),
        "{env}"
    );
    assert!(
        env.lines().nth(1).unwrap().starts_with("shell: bash "),
        "{env}"
    );

    // Nothing changed: the second turn tells nothing again.
    c.run("again");
    c.until_entry("turn_end");
    assert_eq!(injected(&pod.log_lines(), "environment").len(), 1);

    // The approval mode changed: told at the next turn.
    assert_eq!(
        ask(
            &mut c,
            json!({"type":"set_approval","mode":"edits","request_id":"m"})
        )["type"],
        "response"
    );
    c.run("and now");
    c.until_entry("turn_end");
    let told = injected(&pod.log_lines(), "environment");
    assert_eq!(told.len(), 2);
    assert!(told[1].contains("\napproval: edits\n"), "{}", told[1]);
}

#[test]
fn a_git_workspace_says_its_branch_and_how_many_files_changed() {
    let pod = Pod::builder().script(&script(&[text("ok")])).start();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&pod.workspace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q", "-b", "trunk"]);
    std::fs::write(pod.workspace.join("a.txt"), "a").unwrap();
    std::fs::write(pod.workspace.join("b.txt"), "b").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("hello");
    c.until_entry("turn_end");
    let env = &injected(&pod.log_lines(), "environment")[0];
    assert!(env.contains("\ngit: trunk, 2 changed files\n"), "{env}");
}

/// Runs `git` in `dir` as a user would, with an identity for commits.
fn git_in(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The kinds of the entries from the last `user_input` on, checkpoints
/// left out.
fn last_turn(log: &[Value]) -> Vec<String> {
    let all = kinds(log);
    let start = all.iter().rposition(|k| k == "user_input").unwrap();
    all[start..]
        .iter()
        .filter(|k| *k != "checkpoint")
        .cloned()
        .collect()
}

#[test]
fn a_branch_switch_is_told_before_the_next_model_call_between_turns_and_mid_turn() {
    let pod = Pod::builder()
        .script(&script(&[
            text("one"),
            text("two"),
            call("s", "bash", json!({"command": "git switch -q -c fix"})),
            text("three"),
        ]))
        .start();
    git_in(&pod.workspace, &["init", "-q", "-b", "trunk"]);
    std::fs::write(pod.workspace.join("a.txt"), "a").unwrap();
    git_in(&pod.workspace, &["add", "a.txt"]);
    git_in(&pod.workspace, &["commit", "-q", "-m", "a"]);
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("hello");
    c.until_entry("turn_end");
    let told = injected(&pod.log_lines(), "environment");
    assert!(
        told[0].contains("\ngit: trunk, 0 changed files\n"),
        "{}",
        told[0]
    );

    // Switched by the user between two turns: told with the next input,
    // before the model is asked.
    git_in(&pod.workspace, &["switch", "-q", "-c", "side"]);
    c.run("again");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    assert_eq!(
        last_turn(&log),
        ["user_input", "environment", "assistant:text", "turn_end"]
    );
    let told = injected(&log, "environment");
    assert!(
        told[1].contains("\ngit: side, 0 changed files\n"),
        "{}",
        told[1]
    );

    // Switched by the model's own command: told at the step boundary,
    // before its next model call.
    c.run("switch to a fix branch");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    assert_eq!(
        last_turn(&log),
        [
            "user_input",
            "assistant:tool_call",
            "tool_results",
            "environment",
            "assistant:text",
            "turn_end"
        ]
    );
    let told = injected(&log, "environment");
    assert_eq!(told.len(), 3, "{told:?}");
    assert!(
        told[2].contains("\ngit: fix, 0 changed files\n"),
        "{}",
        told[2]
    );
}

#[test]
fn an_unchanged_environment_costs_a_turn_no_process() {
    // A `git` that notes each run before doing its work, first on the
    // pod's PATH.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let runs = dir.path().join("git-runs");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            runs.display(),
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git_in(&ws, &["init", "-q", "-b", "trunk"]);
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let pod = Pod::builder()
        .in_dir(dir)
        .env("PATH", &path)
        .script(&script(&[text("one"), text("two"), text("three")]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    for input in ["one", "two", "three"] {
        c.run(input);
        c.until_entry("turn_end");
    }
    let told = injected(&pod.log_lines(), "environment");
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].contains("\ngit: trunk, 1 changed file\n"),
        "{}",
        told[0]
    );
    let runs = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "git ran once, as the pod started:\n{runs}"
    );
}

#[test]
fn a_linked_worktree_says_its_own_branch() {
    let pod = Pod::builder()
        .script(&script(&[text("one"), text("two")]))
        .start();
    let main = pod.workspace.parent().unwrap().join("main");
    std::fs::create_dir_all(&main).unwrap();
    git_in(&main, &["init", "-q", "-b", "trunk"]);
    std::fs::write(main.join("a.txt"), "a").unwrap();
    git_in(&main, &["add", "a.txt"]);
    git_in(&main, &["commit", "-q", "-m", "a"]);
    let ws = pod.workspace.to_str().unwrap();
    git_in(&main, &["worktree", "add", "-q", "-b", "feature", ws]);
    std::fs::write(pod.workspace.join("new.txt"), "new").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("hello");
    c.until_entry("turn_end");
    let told = injected(&pod.log_lines(), "environment");
    assert!(
        told[0].contains("\ngit: feature, 1 changed file\n"),
        "{}",
        told[0]
    );

    git_in(&pod.workspace, &["switch", "-q", "-c", "feature-2"]);
    c.run("again");
    c.until_entry("turn_end");
    let told = injected(&pod.log_lines(), "environment");
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(
        told[1].contains("\ngit: feature-2, 1 changed file\n"),
        "{}",
        told[1]
    );
}

#[test]
fn a_background_job_runs_past_its_call_and_is_read_listed_and_killed() {
    let pod = Pod::builder()
        .script(&script(&[
            background("b1", "echo serving; echo $$ > job.pid; exec sleep 300"),
            // The job has printed once its pid is written: the model waits
            // for that, as it would for a server's port, before reading.
            call(
                "w",
                "bash",
                json!({"command": "until [ -s job.pid ]; do sleep 0.01; done"}),
            ),
            call("o1", "job_output", json!({"job": 1})),
            text("it runs"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start a server");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    let started = result(&log, "b1");
    assert_eq!(started["is_error"], false, "{started}");
    assert!(
        started["output"]
            .as_str()
            .unwrap()
            .contains("background job 1"),
        "{started}"
    );
    let pid = read_pid(&pod, "job.pid");
    assert!(alive(pid), "the job outlived its call");
    let output = result(&log, "o1")["output"].as_str().unwrap().to_owned();
    assert!(
        output.contains("serving") && output.contains("[job 1: still running]"),
        "{output}"
    );

    let jobs = ask(&mut c, json!({"type":"list_jobs","request_id":"l"}));
    let listed = &jobs["jobs"][0];
    assert_eq!(listed["job"], 1);
    assert_eq!(listed["running"], true);
    assert_eq!(
        listed["command"],
        "echo serving; echo $$ > job.pid; exec sleep 300"
    );
    let snapshot = pod.client().until_type("snapshot");
    assert_eq!(snapshot["status"]["jobs"], 1);
    let cli = pod.command("jobs").output().unwrap();
    let printed = String::from_utf8_lossy(&cli.stdout);
    assert!(
        printed.contains("   1  running") && printed.contains("exec sleep 300"),
        "{printed}"
    );

    // #36.7: a person reads the output so far, from the start, without
    // taking it from the model (`job_output` read it already).
    let read = ask(
        &mut c,
        json!({"type":"get_job_output","job":1,"request_id":"g"}),
    );
    assert_eq!(read["output"], "serving\n", "{read}");
    assert_eq!(read["jobs"][0]["running"], true, "{read}");
    let cli = pod.command("jobs").args(["output", "1"]).output().unwrap();
    assert!(cli.status.success(), "{cli:?}");
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout),
        "serving\n[job 1: running]\n"
    );
    let cli = pod.command("jobs").args(["output", "7"]).output().unwrap();
    assert!(!cli.status.success());
    let said = String::from_utf8_lossy(&cli.stderr);
    assert!(said.contains("no background job 7"), "{said}");

    let unknown = ask(&mut c, json!({"type":"kill_job","job":7,"request_id":"k7"}));
    assert_eq!(unknown["code"], "job_not_found", "{unknown}");
    assert_eq!(
        ask(&mut c, json!({"type":"kill_job","job":1,"request_id":"k"}))["ok"],
        true
    );
    // Idle: the end note is committed at once, in this conversation.
    let note = c.until(|f| {
        f["type"] == "entry"
            && f["entry"]["kind"] == "hook_injected_items"
            && f["entry"]["items"][0]["source"] == "job"
    });
    let note = note["entry"]["items"][0]["text"].as_str().unwrap();
    assert!(
        note.starts_with("job 1 (") && note.contains("killed by signal 9"),
        "{note}"
    );
    assert!(!alive(pid));
    assert_eq!(pod.client().until_type("snapshot")["status"]["jobs"], 0);
    let jobs = ask(&mut c, json!({"type":"list_jobs","request_id":"l2"}));
    assert_eq!(jobs["jobs"][0]["running"], false);
    assert_eq!(jobs["jobs"][0]["signal"], 9);
}

#[test]
fn a_job_that_ends_mid_turn_is_noted_at_the_next_step_boundary() {
    let pod = Pod::builder()
        .script(&script(&[
            background("b1", "sleep 0.5; echo finished"),
            call("s1", "bash", json!({"command": "sleep 2"})),
            text("done"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    let shape = kinds(&log);
    let note_at = log
        .iter()
        .position(|l| injected(std::slice::from_ref(l), "job").len() == 1)
        .expect("a job note");
    let sleep_result = log
        .iter()
        .position(|l| {
            l["entry"]["kind"] == "tool_results" && l["entry"]["results"][0]["call_id"] == "s1"
        })
        .unwrap();
    assert_eq!(
        note_at,
        sleep_result + 1,
        "after the step's results, before the next call: {shape:?}"
    );
    let note = &injected(&log, "job")[0];
    assert!(
        note.contains("exited with code 0") && note.ends_with("finished"),
        "{note}"
    );
}

#[test]
fn starts_beyond_max_jobs_are_refused() {
    let pod = Pod::builder()
        .arg("--max-jobs")
        .arg("1")
        .script(&script(&[
            background("b1", "exec sleep 300"),
            background("b2", "exec sleep 300"),
            text("ok"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("two servers");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    assert_eq!(result(&log, "b1")["is_error"], false);
    let refused = result(&log, "b2");
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["output"].as_str().unwrap().contains("--max-jobs"),
        "{refused}"
    );
}

#[test]
fn jobs_die_with_the_pod_on_sigterm_with_their_notes() {
    let pod = Pod::builder()
        .script(&script(&[
            background("b1", "echo $$ > job.pid; exec sleep 300"),
            text("ok"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start");
    c.until_entry("turn_end");
    let pid = read_pid(&pod, "job.pid");
    let mut pod = pod;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pod.pid() as i32).unwrap(),
        rustix::process::Signal::Term,
    )
    .unwrap();
    assert!(pod.wait_exit(Duration::from_secs(20)).success());
    assert!(!alive(pid), "the job died with the pod");
    let notes = injected(&pod.log_lines(), "job");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("killed: the pod stopped"), "{}", notes[0]);
}

#[test]
fn jobs_die_with_a_killed_pod_and_the_next_pod_says_so_and_numbers_on() {
    let pod = Pod::builder()
        .script(&script(&[
            background("b1", "echo $$ > job.pid; exec sleep 300"),
            text("ok"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start");
    c.until_entry("turn_end");
    let pid = read_pid(&pod, "job.pid");
    let mut pod = pod;
    pod.kill9();
    eventually(
        "the reaper to kill the job",
        Duration::from_secs(10),
        || !alive(pid),
    );

    let pod = Pod::builder()
        .in_dir(pod.into_dir())
        .script(&script(&[background("b2", "exec sleep 300"), text("ok")]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    eventually("the leftover's note", Duration::from_secs(10), || {
        !injected(&pod.log_lines(), "job").is_empty()
    });
    let note = &injected(&pod.log_lines(), "job")[0];
    assert!(
        note.starts_with("job 1 (echo $$ > job.pid; exec sleep 300)"),
        "{note}"
    );
    c.run("again");
    c.until_entry("turn_end");
    let started = result(&pod.log_lines(), "b2");
    assert!(
        started["output"]
            .as_str()
            .unwrap()
            .contains("background job 2"),
        "{started}"
    );
}

#[test]
fn update_plan_is_never_asked_and_a_huge_plan_is_refused() {
    let items: Vec<Value> = (0..3)
        .map(
            |i| json!({"text": format!("step {i}"), "status": if i == 0 {"done"} else {"pending"}}),
        )
        .collect();
    // 10,000 items are refused the same way (the unit test); a thousand
    // keep this context far from compaction.
    let huge: Vec<Value> = (0..1_000)
        .map(|i| json!({"text": format!("step {i}"), "status": "pending"}))
        .collect();
    let pod = Pod::builder()
        .arg("--approval")
        .arg("ask")
        .script(&script(&[
            call("p1", "update_plan", json!({"items": items})),
            call("p2", "update_plan", json!({"items": huge})),
            text("planned"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("plan it");
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed", "{end}");
    let log = pod.log_lines();
    assert!(
        !kinds(&log).iter().any(|k| k == "approval_request"),
        "{:?}",
        kinds(&log)
    );
    assert_eq!(
        result(&log, "p1")["output"],
        "plan updated: 1 of 3 done; the user sees it."
    );
    let refused = result(&log, "p2");
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["output"].as_str().unwrap().contains("1000 items"),
        "{refused}"
    );
    assert_eq!(
        first_of(&log, "assistant:text")["entry"]["items"][0]["text"],
        "planned"
    );
}

/// A plain HTTP/1.1 server on 127.0.0.1, one thread per connection:
/// `/page` (HTML), `/redir` (to `/page`), `/loop` (to itself), `/away`
/// (to the same server named `localhost`: another origin), `/big`.
fn web_server() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                let path = request.split(' ').nth(1).unwrap_or("/").to_owned();
                let redirect = |to: &str| {
                    format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n")
                        .into_bytes()
                };
                let response = match path.as_str() {
                    "/page" => {
                        let body = "<html><head><style>p{color:red}</style></head><body>\
                                    <h1>Docs</h1><p>Read <a href=\"/x\">this</a>.</p>\
                                    <script>steal()</script></body></html>";
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                             Content-Length: {}\r\n\r\n{body}",
                            body.len()
                        )
                        .into_bytes()
                    }
                    "/redir" => redirect("/page"),
                    "/loop" => redirect("/loop"),
                    "/away" => redirect(&format!("http://localhost:{port}/page")),
                    "/big" => {
                        let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                                      Content-Length: 20000000\r\n\r\n"
                            .to_vec();
                        r.extend(std::iter::repeat_n(b'x', 20_000_000));
                        r
                    }
                    _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
                };
                let mut stream = stream;
                let _ = stream.write_all(&response);
            });
        }
    });
    port
}

fn fetch(id: &str, url: &str) -> Value {
    call(id, "web_fetch", json!({"url": url}))
}

#[test]
fn web_fetch_reads_a_local_page_as_markdown_and_follows_only_same_origin_redirects() {
    let port = web_server();
    let base = format!("http://127.0.0.1:{port}");
    let pod = Pod::builder()
        .arg("--fetch-private")
        .script(&script(&[
            fetch("f1", &format!("{base}/page")),
            fetch("f2", &format!("{base}/redir")),
            fetch("f3", &format!("{base}/loop")),
            fetch("f4", &format!("{base}/away")),
            call(
                "f5",
                "web_fetch",
                json!({"url": format!("{base}/big"), "max_bytes": 1000}),
            ),
            fetch("f6", "file:///etc/passwd"),
            text("read"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("read the docs");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    let page = result(&log, "f1");
    let text = page["output"].as_str().unwrap();
    assert_eq!(page["is_error"], false, "{text}");
    assert!(text.starts_with(&format!("URL: {base}/page\n")), "{text}");
    assert!(
        text.contains("Content-Type: text/html; charset=utf-8"),
        "{text}"
    );
    assert!(
        text.contains("# Docs") && text.contains("[this](/x)"),
        "{text}"
    );
    assert!(
        !text.contains("steal") && !text.contains("color:red"),
        "{text}"
    );
    let redirected = result(&log, "f2")["output"].as_str().unwrap().to_owned();
    assert!(
        redirected.starts_with(&format!("URL: {base}/page\n")),
        "{redirected}"
    );
    let looped = result(&log, "f3");
    assert_eq!(looped["is_error"], true);
    assert!(
        looped["output"]
            .as_str()
            .unwrap()
            .contains("after 5 redirects"),
        "{looped}"
    );
    let away = result(&log, "f4")["output"].as_str().unwrap().to_owned();
    assert!(
        away.contains(&format!(
            "redirects to another site: http://localhost:{port}/page"
        )),
        "{away}"
    );
    let big = result(&log, "f5")["output"].as_str().unwrap().to_owned();
    assert!(
        big.contains("[only the first 1000 bytes of the body were read]"),
        "{big}"
    );
    let file = result(&log, "f6");
    assert_eq!(file["is_error"], true);
    assert!(
        file["output"]
            .as_str()
            .unwrap()
            .contains("only http:// and https://"),
        "{file}"
    );
}

#[test]
fn web_fetch_refuses_this_machine_without_fetch_private() {
    let port = web_server();
    let pod = Pod::builder()
        .script(&script(&[
            fetch("f1", &format!("http://127.0.0.1:{port}/page")),
            fetch("f2", &format!("http://[::ffff:127.0.0.1]:{port}/page")),
            fetch("f3", &format!("http://user:pw@127.0.0.1:{port}/page")),
            // IPv4-compatible IPv6 (issue 35 item 13).
            fetch("f4", &format!("http://[::127.0.0.1]:{port}/page")),
            text("refused"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("fetch");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    for id in ["f1", "f2", "f4"] {
        let refused = result(&log, id);
        let text = refused["output"].as_str().unwrap();
        assert_eq!(refused["is_error"], true);
        assert!(
            text.contains("127.0.0.0/8 (loopback)") && text.contains("--fetch-private"),
            "{text}"
        );
    }
    let user = result(&log, "f3")["output"].as_str().unwrap().to_owned();
    assert!(user.contains("user name or password"), "{user}");
}

#[test]
fn web_fetch_is_asked_about_and_a_session_answer_allows_its_origin_only() {
    let port = web_server();
    let base = format!("http://127.0.0.1:{port}");
    let pod = Pod::builder()
        .args(["--approval", "ask", "--fetch-private"])
        .script(&script(&[
            fetch("f1", &format!("{base}/page")),
            fetch("f2", &format!("{base}/redir")),
            text("done"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("fetch twice");
    let request = c.until_entry("approval_request");
    assert_eq!(request["entry"]["tool"], "web_fetch");
    c.send(json!({"type":"approve","call_id":"f1","decision":"allow","scope":"session"}));
    c.until_entry("turn_end");
    let log = pod.log_lines();
    let decisions: Vec<&Value> = log
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_decision")
        .collect();
    assert_eq!(
        decisions.len(),
        1,
        "the second fetch of that origin is not asked about"
    );
    assert_eq!(decisions[0]["entry"]["rule"], format!("web_fetch:{base}/*"));
    assert_eq!(result(&log, "f2")["is_error"], false);
}

#[test]
fn web_fetch_is_off_without_asking_when_the_sandbox_network_is_off() {
    let pod = Pod::builder()
        .args(["--approval", "ask", "--sandbox-network", "off"])
        .script(&script(&[fetch("f1", "https://example.org/"), text("ok")]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("fetch");
    c.until_entry("turn_end");
    let log = pod.log_lines();
    assert!(
        !kinds(&log).iter().any(|k| k.starts_with("approval_")),
        "{:?}",
        kinds(&log)
    );
    let off = result(&log, "f1");
    assert_eq!(off["is_error"], true);
    assert!(
        off["output"]
            .as_str()
            .unwrap()
            .contains("--sandbox-network off"),
        "{off}"
    );
}

#[test]
fn a_rewind_of_files_waits_for_no_job_it_is_refused_or_kills_them() {
    let pod = Pod::builder()
        .script(&script(&[
            background("b1", "echo $$ > job.pid; exec sleep 300"),
            call(
                "w1",
                "write_file",
                json!({"path": "a.txt", "content": "new\n"}),
            ),
            text("written"),
        ]))
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start and write");
    c.until_entry("turn_end");
    let pid = read_pid(&pod, "job.pid");
    let seq = first_of(&pod.log_lines(), "user_input")["seq"].clone();
    let refused = ask(
        &mut c,
        json!({"type":"rewind","before_seq":seq,"conversation":false,"request_id":"r1"}),
    );
    assert_eq!(refused["code"], "jobs_running", "{refused}");
    assert!(alive(pid));
    let done = ask(
        &mut c,
        json!({"type":"rewind","before_seq":seq,"conversation":false,"kill_jobs":true,"request_id":"r2"}),
    );
    assert_eq!(done["type"], "response", "{done}");
    assert!(
        !alive(pid),
        "the job was killed before the files were restored"
    );
    assert!(!pod.workspace.join("a.txt").exists());
}
