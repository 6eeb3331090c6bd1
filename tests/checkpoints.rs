//! Checkpoints and rewind on real pods: the script model changes real files
//! with write_file, edit_file and bash; the pod's checkpoints, diffs, blame
//! and rewinds are checked against the files on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::fs;
use std::time::{Duration, Instant};

use harness::{succeeded, Client, Pod};
use serde_json::{json, Value};

fn call(id: &str, name: &str, arguments: Value) -> String {
    json!({"events":[{"tool_call":{"id":id,"name":name,"arguments":arguments}}]}).to_string()
}

fn text(t: &str) -> String {
    json!({"events":[{"text":t}]}).to_string()
}

/// Sends a method with a request id and returns its response or error.
fn ask(c: &mut Client, mut method: Value) -> Value {
    let id = format!("r-{}", c.frames.len());
    method["request_id"] = json!(id);
    c.send(method);
    c.until_with("the answer", |v| {
        (v["type"] == "response" || v["type"] == "error") && v["request_id"] == id.as_str()
    })
}

fn entries_of(pod: &Pod, kind: &str) -> Vec<Value> {
    pod.log_lines()
        .into_iter()
        .filter(|l| l["entry"]["kind"] == kind)
        .collect()
}

fn seq_of_user_input(pod: &Pod, n: usize) -> u64 {
    entries_of(pod, "user_input")[n]["seq"].as_u64().unwrap()
}

/// A workspace with a git-ignored file, a .git directory, a file to edit
/// and one to delete.
fn seed(pod: &Pod) {
    let ws = &pod.workspace;
    fs::write(ws.join(".gitignore"), "ignored.txt\n").unwrap();
    fs::write(ws.join("ignored.txt"), "keep me\n").unwrap();
    fs::create_dir_all(ws.join(".git")).unwrap();
    fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(ws.join("edit.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(ws.join("doomed.txt"), "bye\n").unwrap();
}

fn script_three_changes() -> String {
    [
        call(
            "c1",
            "write_file",
            json!({"path":"src/new.txt","content":"fresh\n"}),
        ),
        call(
            "c2",
            "edit_file",
            json!({"path":"edit.txt","old_string":"two","new_string":"TWO"}),
        ),
        call(
            "c3",
            "bash",
            json!({"command":"rm doomed.txt && echo changed > ignored.txt && chmod +x edit.txt"}),
        ),
        text("done"),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn a_turn_is_checkpointed_diffed_blamed_and_undone_and_the_undo_undone() {
    let pod = Pod::builder().script(&script_three_changes()).start();
    seed(&pod);
    let ws = pod.workspace.clone();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("change three files please now");
    c.until_entry("turn_end");

    // The checkpoints: turn_start before the first call's result, turn_end
    // just before turn_end, with what the turn changed.
    let kinds = harness::kinds(&pod.log_lines());
    let start = kinds.iter().position(|k| k == "checkpoint").unwrap();
    assert_eq!(kinds[start - 1], "assistant:tool_call");
    assert_eq!(kinds[start + 1], "tool_results");
    assert_eq!(kinds[kinds.len() - 2], "checkpoint");
    let checkpoints = entries_of(&pod, "checkpoint");
    assert_eq!(checkpoints.len(), 2);
    assert_eq!(checkpoints[0]["entry"]["reason"], "turn_start");
    assert_eq!(checkpoints[0]["entry"]["changes"], json!([]));
    let end = &checkpoints[1]["entry"];
    assert_eq!(end["reason"], "turn_end");
    assert_eq!(
        end["changes"],
        json!([
            {"path":"doomed.txt","change":"deleted","added":0,"removed":1},
            {"path":"edit.txt","change":"modified","added":1,"removed":1},
            {"path":"src/new.txt","change":"added","added":1,"removed":0},
        ])
    );

    // The diff the turn made, as git writes it.
    let out = succeeded(pod.command("diff").output().unwrap());
    assert_eq!(
        out,
        "diff --git a/doomed.txt b/doomed.txt\ndeleted file mode 100644\n--- a/doomed.txt\n\
         +++ /dev/null\n@@ -1 +0,0 @@\n-bye\n\
         diff --git a/edit.txt b/edit.txt\nold mode 100644\nnew mode 100755\n--- a/edit.txt\n\
         +++ b/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n\
         diff --git a/src/new.txt b/src/new.txt\nnew file mode 100644\n--- /dev/null\n\
         +++ b/src/new.txt\n@@ -0,0 +1 @@\n+fresh\n"
    );

    // Blame: the line the turn wrote carries its turn; the others none.
    let turn_id = entries_of(&pod, "user_input")[0]["entry"]["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let inputs = entries_of(&pod, "user_input");
    let date = &inputs[0]["entry"]["at"].as_str().unwrap()[..10];
    let blame = succeeded(
        pod.command("blame")
            .arg(ws.join("edit.txt"))
            .output()
            .unwrap(),
    );
    assert_eq!(
        blame,
        format!(
            "-│one\n{} {date} change three files please now│TWO\n-│three\n",
            &turn_id[2..10]
        )
    );

    // Undo: files and conversation back to before the message.
    let out = succeeded(pod.command("undo").output().unwrap());
    assert!(out.contains("created  doomed.txt"), "{out}");
    assert!(out.contains("written  edit.txt"), "{out}");
    assert!(out.contains("deleted  src/new.txt"), "{out}");
    assert_eq!(
        fs::read_to_string(ws.join("edit.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(fs::read_to_string(ws.join("doomed.txt")).unwrap(), "bye\n");
    assert!(!ws.join("src/new.txt").exists());
    assert!(!ws.join("src").exists(), "the emptied directory goes too");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(ws.join("edit.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "the executable bit is restored");
    // Ignored files and .git are never touched.
    assert_eq!(
        fs::read_to_string(ws.join("ignored.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        fs::read_to_string(ws.join(".git/HEAD")).unwrap(),
        "ref: refs/heads/main\n"
    );

    // The new session is a fork before the message, with the rewind's
    // checkpoint and entry.
    let lines = pod.log_lines();
    let kinds = harness::kinds(&lines);
    assert_eq!(kinds, ["session_start", "checkpoint", "rewind"]);
    let rewind = &lines[2]["entry"];
    assert_eq!(rewind["conversation"], true);
    assert_eq!(rewind["conflicts"], json!([]));
    let before = rewind["checkpoint_before"].as_str().unwrap().to_owned();

    // Undo the undo: back to what the turn left — with the id cut short as
    // `pod log` shows it.
    let shown = &before[..12];
    assert!(
        succeeded(pod.command("log").output().unwrap()).contains(shown),
        "pod log shows the id's start"
    );
    let out = succeeded(
        pod.command("rewind")
            .args(["--checkpoint", shown])
            .output()
            .unwrap(),
    );
    assert!(out.contains("edit.txt"), "{out}");
    assert_eq!(
        fs::read_to_string(ws.join("edit.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        fs::read_to_string(ws.join("src/new.txt")).unwrap(),
        "fresh\n"
    );
    assert!(!ws.join("doomed.txt").exists());
    let mode = fs::metadata(ws.join("edit.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o111, 0);
}

#[test]
fn hand_edits_between_turns_are_recorded_and_conflict_with_a_rewind() {
    let script = [
        call(
            "c1",
            "write_file",
            json!({"path":"a.txt","content":"turn one\n"}),
        ),
        text("one"),
        call(
            "c2",
            "write_file",
            json!({"path":"b.txt","content":"turn two\n"}),
        ),
        text("two"),
    ]
    .join("\n")
        + "\n";
    let pod = Pod::builder().script(&script).start();
    let ws = pod.workspace.clone();
    fs::write(ws.join("a.txt"), "original\n").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("first");
    c.until_entry("turn_end");
    // By hand, between turns.
    fs::write(ws.join("a.txt"), "by hand\n").unwrap();
    c.run("second");
    c.until_entry("turn_end");
    let checkpoints = entries_of(&pod, "checkpoint");
    let second_start = &checkpoints[2]["entry"];
    assert_eq!(second_start["reason"], "turn_start");
    assert_eq!(
        second_start["changes"],
        json!([{"path":"a.txt","change":"modified","added":1,"removed":1}])
    );

    // Rewinding the files to before the first message: a.txt changed by
    // hand since, so it is a conflict and left alone; b.txt goes.
    let seq = seq_of_user_input(&pod, 0);
    let answer = ask(
        &mut c,
        json!({"type":"rewind","before_seq":seq,"conversation":false}),
    );
    assert_eq!(answer["type"], "response", "{answer}");
    assert_eq!(answer["conflicts"], json!(["a.txt"]));
    assert_eq!(
        answer["files_restored"],
        json!([{"path":"b.txt","action":"deleted"}])
    );
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "by hand\n");
    assert!(!ws.join("b.txt").exists());

    // With force the conflict is restored too.
    let answer = ask(
        &mut c,
        json!({"type":"rewind","before_seq":seq,"conversation":false,"force":true}),
    );
    assert_eq!(answer["type"], "response", "{answer}");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "original\n");
}

/// `pod undo` is all or nothing (issue 36): a file the turn changed that
/// was also changed by hand since leaves the files and the conversation as
/// they were, exits 1, and names `pod undo --force` — which then undoes
/// that same turn, not the one before.
#[test]
fn an_undo_with_a_conflict_changes_nothing_and_its_force_hint_undoes_that_turn() {
    let script = [
        call(
            "c1",
            "write_file",
            json!({"path":"a.txt","content":"zero\n"}),
        ),
        text("zero"),
        call(
            "c2",
            "write_file",
            json!({"path":"a.txt","content":"turn\n"}),
        ),
        call(
            "c3",
            "write_file",
            json!({"path":"b.txt","content":"turn\n"}),
        ),
        text("done"),
    ]
    .join("\n")
        + "\n";
    let pod = Pod::builder().script(&script).start();
    let ws = pod.workspace.clone();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("first");
    c.until_entry("turn_end");
    c.run("second");
    c.until_entry("turn_end");
    fs::write(ws.join("a.txt"), "by hand\n").unwrap();
    let before = pod.log_lines();

    let out = pod.command("undo").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("nothing undone")
            && said.contains("a.txt")
            && said.contains("pod undo --force"),
        "{said}"
    );
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "by hand\n");
    assert_eq!(fs::read_to_string(ws.join("b.txt")).unwrap(), "turn\n");
    assert_eq!(pod.log_lines(), before, "nothing committed, no fork");
    // The hint names the command that shows the change made by hand
    // (`pod diff` alone shows only the turn's), and it does.
    assert!(!said.contains("`pod diff` shows them"), "{said}");
    let hinted = said
        .split('`')
        .find(|part| part.starts_with("pod diff --since "))
        .unwrap_or_else(|| panic!("no `pod diff --since` hint: {said}"))
        .to_owned();
    let mut words = hinted.split_whitespace().skip(1);
    let shown = succeeded(
        pod.command(words.next().unwrap())
            .args(words)
            .output()
            .unwrap(),
    );
    assert!(shown.contains("+by hand"), "{hinted}: {shown}");

    let out = succeeded(pod.command("undo").arg("--force").output().unwrap());
    assert!(out.contains("written  a.txt"), "{out}");
    assert!(out.contains("deleted  b.txt"), "{out}");
    assert_eq!(fs::read_to_string(ws.join("a.txt")).unwrap(), "zero\n");
    assert!(!ws.join("b.txt").exists());
    // The fork ends just before the second message: the first turn is kept.
    let second = before
        .iter()
        .filter(|l| l["entry"]["kind"] == "user_input")
        .nth(1)
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let start = &pod.log_lines()[0]["entry"];
    assert_eq!(start["forked_from"]["seq"], second - 1, "{start}");
}

#[test]
fn bad_rewinds_change_nothing() {
    let pod = Pod::builder()
        .script(
            &(call("c1", "write_file", json!({"path":"a.txt","content":"x\n"}))
                + "\n"
                + &text("ok")
                + "\n"),
        )
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    c.until_entry("turn_end");
    let before = pod.log_lines().len();
    for (method, code) in [
        (json!({"type":"rewind"}), "invalid_params"),
        (json!({"type":"rewind","before_seq":0}), "invalid_params"),
        (
            json!({"type":"rewind","before_seq":1,"checkpoint":"ab"}),
            "invalid_params",
        ),
        (
            json!({"type":"rewind","checkpoint":"0".repeat(64)}),
            "checkpoint_not_found",
        ),
        (
            json!({"type":"get_diff","from":"0".repeat(64),"to":null}),
            "checkpoint_not_found",
        ),
    ] {
        let answer = ask(&mut c, method.clone());
        assert_eq!(answer["type"], "error", "{method}: {answer}");
        assert_eq!(answer["code"], code, "{method}: {answer}");
    }
    let id = entries_of(&pod, "checkpoint")[0]["entry"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = ask(
        &mut c,
        json!({"type":"get_diff","from":id,"to":null,"path":"../x"}),
    );
    assert_eq!(answer["code"], "invalid_params");
    let answer = ask(
        &mut c,
        json!({"type":"get_file","checkpoint":id,"path":"nope"}),
    );
    assert_eq!(answer["code"], "not_found");
    assert_eq!(pod.log_lines().len(), before);
    assert_eq!(
        fs::read_to_string(pod.workspace.join("a.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_checkpoint_that_cannot_be_stored_is_recorded_and_the_call_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("disk-full");
    fs::write(&full, "").unwrap();
    let pod = Pod::builder()
        .env(
            "POD_FAULT",
            &format!("fail_checkpoint_writes_while={}", full.display()),
        )
        .script(
            &(call("c1", "write_file", json!({"path":"a.txt","content":"x\n"}))
                + "\n"
                + &text("ok")
                + "\n"),
        )
        .start();
    fs::write(pod.workspace.join("seed.txt"), "s\n").unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    c.until_entry("turn_end");
    let checkpoints = entries_of(&pod, "checkpoint");
    assert_eq!(checkpoints[0]["entry"]["checkpoint"], Value::Null);
    assert!(checkpoints[0]["entry"]["error"]
        .as_str()
        .unwrap()
        .contains("injected"));
    assert_eq!(
        fs::read_to_string(pod.workspace.join("a.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_pod_killed_mid_restore_leaves_every_file_old_or_new() {
    let mut files = Vec::new();
    for i in 0..20 {
        files.push(call(
            &format!("c{i}"),
            "write_file",
            json!({"path":format!("f{i:02}.txt"),"content":format!("new {i}\n")}),
        ));
    }
    files.push(text("ok"));
    let script = files.join("\n") + "\n";
    let pod = Pod::builder().script(&script).start();
    for i in 0..20 {
        fs::write(
            pod.workspace.join(format!("f{i:02}.txt")),
            format!("old {i}\n"),
        )
        .unwrap();
    }
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    c.until_entry("turn_end");
    let seq = seq_of_user_input(&pod, 0);
    let dir = pod.into_dir();
    let mut pod = Pod::builder()
        .in_dir(dir)
        .env("POD_FAULT", "crash_at=restore_written")
        .script(&script)
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"rewind","before_seq":seq,"conversation":false}));
    pod.wait_exit(Duration::from_secs(20));
    let mut old = 0;
    for i in 0..20 {
        let text = fs::read_to_string(pod.workspace.join(format!("f{i:02}.txt"))).unwrap();
        assert!(
            text == format!("old {i}\n") || text == format!("new {i}\n"),
            "{text:?}"
        );
        old += usize::from(text.starts_with("old"));
    }
    assert_eq!(old, 1, "the crash came after the first file was restored");
    let stray: Vec<_> = fs::read_dir(&pod.workspace)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".pod-restore"))
        .collect();
    assert!(stray.is_empty());

    // The next start says what happened, and the state before the rewind
    // can be restored.
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let noted = |lines: &[Value]| {
        lines.iter().any(|l| {
            l["entry"]["kind"] == "hook_injected_items"
                && l["entry"]["items"][0]["source"] == "rewind"
        })
    };
    harness::eventually("the note about the rewind", Duration::from_secs(10), || {
        noted(&pod.log_lines())
    });
    let lines = pod.log_lines();
    let before = lines
        .iter()
        .rev()
        .find(|l| l["entry"]["kind"] == "checkpoint" && l["entry"]["reason"] == "rewind")
        .expect("the state before the rewind")["entry"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = ask(&mut c, json!({"type":"rewind","checkpoint":before}));
    assert_eq!(answer["type"], "response", "{answer}");
    for i in 0..20 {
        let text = fs::read_to_string(pod.workspace.join(format!("f{i:02}.txt"))).unwrap();
        assert_eq!(text, format!("new {i}\n"));
    }
}

#[test]
fn a_pod_killed_mid_checkpoint_commits_no_checkpoint_and_leaves_no_torn_object() {
    let script = call("c1", "write_file", json!({"path":"a.txt","content":"x\n"}))
        + "\n"
        + &text("ok")
        + "\n";
    let mut pod = Pod::builder()
        .env("POD_FAULT", "crash_at=checkpoint_contents")
        .script(&script)
        .start();
    for i in 0..100 {
        fs::write(
            pod.workspace.join(format!("s{i}.txt")),
            format!("seed {i}\n"),
        )
        .unwrap();
    }
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    pod.wait_exit(Duration::from_secs(20));
    assert!(!pod.workspace.join("a.txt").exists(), "the call never ran");
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    harness::eventually("the turn closed", Duration::from_secs(10), || {
        pod.log_lines()
            .iter()
            .any(|l| l["entry"]["kind"] == "turn_end")
    });
    let lines = pod.log_lines();
    let end = lines
        .iter()
        .find(|l| l["entry"]["kind"] == "turn_end")
        .unwrap();
    assert_eq!(end["entry"]["reason"], "interrupted");
    assert!(entries_of(&pod, "checkpoint").is_empty());
    // Every object in the store is whole: named by the digest of its bytes.
    let objects = pod.data_dir.join("checkpoints/objects");
    for fan in fs::read_dir(&objects).unwrap().flatten() {
        for object in fs::read_dir(fan.path()).unwrap().flatten() {
            let name = object.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(".tmp-"), "a temporary was left: {name}");
        }
    }
    // The next turn checkpoints as usual.
    c.send(json!({"type":"run","request_id":"again","segments":[{"type":"text","text":"again"}]}));
    c.until_with("the second turn's end", |v| {
        v["type"] == "entry"
            && v["entry"]["kind"] == "turn_end"
            && v["entry"]["request_id"] == "again"
    });
    let checkpoints = entries_of(&pod, "checkpoint");
    assert_eq!(checkpoints.len(), 2, "{:?}", pod.log_lines());
    assert!(checkpoints[0]["entry"]["checkpoint"].is_string());
}

/// A daemon a command left (a setsid'd loop the pod adopted) keeps writing
/// a file: `pod undo` kills it before putting the file back, says so, and
/// the file stays as restored.
#[test]
fn undo_stops_a_daemon_that_rewrites_a_file_before_restoring_it() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("ws")).unwrap();
    fs::write(dir.path().join("ws/notes.txt"), "original\n").unwrap();
    let command = "echo model > notes.txt; \
        setsid bash -c 'while :; do echo tampered > notes.txt; sleep 0.02; done' \
        </dev/null >/dev/null 2>&1 & \
        while ! grep -q tampered notes.txt; do sleep 0.02; done; echo started";
    let script = [
        call("c1", "bash", json!({ "command": command })),
        text("done"),
    ]
    .join("\n");
    let pod = Pod::builder().in_dir(dir).script(&script).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start the writer");
    c.until_entry("turn_end");
    let notes = pod.workspace.join("notes.txt");
    // The loop truncates the file before each write, so a read can fall
    // between the two and find it empty: read until one does not.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::read_to_string(&notes).unwrap() != "tampered\n" {
        assert!(
            Instant::now() < deadline,
            "the loop never rewrote notes.txt"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // `--force`: the checkpoint at the turn's end may have caught the
    // file between the loop's truncate and its write, which would read as
    // a change made outside the turn.
    let out = succeeded(pod.command("undo").arg("--force").output().unwrap());
    assert!(out.contains("written  notes.txt"), "{out}");
    // The loop, and its `sleep` if one ran at that instant.
    assert!(out.starts_with("stopped "), "{out}");
    assert!(out.contains("a tool left running (pid "), "{out}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fs::read_to_string(&notes).unwrap(), "original\n");
}

/// A refused `pod undo` changes nothing, the processes a tool left running
/// included (re-trial of issue 35): the daemon goes on; the `--force` run
/// that does restore stops it and says so.
#[test]
fn a_refused_undo_leaves_a_daemon_running_and_the_forced_one_stops_it_and_says_so() {
    let command = "echo model > notes.txt; \
        setsid bash -c 'i=0; while :; do i=$((i+1)); echo $i > beat.txt; sleep 0.02; done' \
        </dev/null >/dev/null 2>&1 & \
        while [ ! -s beat.txt ]; do sleep 0.02; done; echo started";
    let script = [
        call("c1", "bash", json!({ "command": command })),
        text("done"),
    ]
    .join("\n");
    let pod = Pod::builder().script(&script).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("start the beat");
    c.until_entry("turn_end");
    let notes = pod.workspace.join("notes.txt");
    let beat = pod.workspace.join("beat.txt");
    fs::write(&notes, "by hand\n").unwrap();

    let out = pod.command("undo").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("nothing undone"), "{said}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("stopped"), "{stdout}");
    let seen = fs::read_to_string(&beat).unwrap_or_default();
    harness::eventually(
        "the daemon to go on beating",
        Duration::from_secs(10),
        || fs::read_to_string(&beat).is_ok_and(|now| !now.is_empty() && now != seen),
    );

    let out = succeeded(pod.command("undo").arg("--force").output().unwrap());
    assert!(out.starts_with("stopped "), "{out}");
    assert!(out.contains("a tool left running (pid "), "{out}");
    assert!(out.contains("notes.txt"), "{out}");
    assert!(
        !beat.exists(),
        "the turn made beat.txt: the undo removes it"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!beat.exists(), "nothing writes beat.txt again");
}
