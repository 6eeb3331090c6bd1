//! A hostile workspace against the file tools, file refs and completions
//! (issue 12): hard links to files outside (item 8), symlinks swapped in
//! between check and use (item 9), huge and sparse files (item 11), FIFOs
//! (item 12). Each test names its item.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use harness::Pod;
use pod::input::{check, flatten, Resolvers};
use pod::protocol::{ErrorCode, Segment};
use pod::tools::{OutputSink, ToolLimits, ToolOutcome, Toolbox};
use pod::workspace::Workspace;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    toolbox: Toolbox,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let toolbox = Toolbox::new(ws.clone(), ToolLimits::default());
    Fixture {
        _dir: dir,
        ws,
        toolbox,
    }
}

impl Fixture {
    fn path(&self, rel: &str) -> PathBuf {
        self.ws.root().join(rel)
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        self.call_with(name, args, CancellationToken::new()).await
    }

    async fn call_with(&self, name: &str, args: Value, cancel: CancellationToken) -> ToolOutcome {
        let no_output: OutputSink = Arc::new(|_: &str| {});
        self.toolbox.call(name, &args, cancel, no_output).await
    }
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

/// A file of `len` bytes that starts with `head` and is a hole after it:
/// huge on paper, nothing on disk.
fn sparse(path: &Path, head: &[u8], len: u64, tail: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(head).unwrap();
    f.seek(SeekFrom::Start(len - tail.len() as u64)).unwrap();
    f.write_all(tail).unwrap();
    f.set_len(len).unwrap();
}

/// The process's peak resident memory so far, in bytes.
fn peak_rss() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Unblocks whoever is stuck opening `fifo` (a test of the old behaviour
/// would otherwise hang instead of failing): a blocked reader gets a
/// writer, a blocked writer a reader.
fn release_fifo(fifo: PathBuf) {
    use std::os::unix::fs::OpenOptionsExt;
    let reader_side = fifo.clone();
    std::thread::spawn(move || {
        for _ in 0..100 {
            let _ = File::options().write(true).open(&fifo);
        }
    });
    for _ in 0..100 {
        let _ = File::options()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&reader_side);
    }
}

// Item 8.
#[tokio::test]
async fn hard_links_are_read_but_never_written_or_edited_in_place() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("passwd");
    fs::write(&target, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    fs::hard_link(&target, f.path("passwd")).unwrap();

    let out = f
        .call(
            "edit_file",
            json!({"path":"passwd","old_string":"/bin/sh","new_string":"/bin/evil"}),
        )
        .await;
    assert!(out.is_error, "{}", out.output);
    assert!(out.output.contains("has 2 hard links"), "{}", out.output);
    let out = f
        .call("write_file", json!({"path":"passwd","content":"gone"}))
        .await;
    assert!(out.is_error, "{}", out.output);
    assert!(out.output.contains("hard links"), "{}", out.output);
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "root:x:0:0:root:/root:/bin/sh\n",
        "the file outside the workspace is untouched"
    );

    // Reading is allowed by decision (docs/tools.md): package managers and
    // build tools hard-link files into workspaces, and a link gives no read
    // access the user's account lacks.
    let out = f.call("read_file", json!({"path":"passwd"})).await;
    assert!(
        !out.is_error && out.output.contains("root:x"),
        "{}",
        out.output
    );

    // A file with one link is written and edited as before.
    fs::write(f.path("own.txt"), "a\n").unwrap();
    let out = f
        .call(
            "edit_file",
            json!({"path":"own.txt","old_string":"a","new_string":"b"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.output);
    assert_eq!(fs::read_to_string(f.path("own.txt")).unwrap(), "b\n");
}

// Item 9.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_between_check_and_open_never_leaks() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "SECRET-CONTENT\n").unwrap();
    fs::create_dir(f.path("d")).unwrap();
    fs::write(f.path("d/secret"), "harmless\n").unwrap();
    fs::write(f.path("secret"), "harmless\n").unwrap();

    // Swaps `secret` between a plain file and a link to the outside file,
    // and `d` between a directory and a link to the outside directory.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (root, out, stop) = (
            f.ws.root().to_owned(),
            outside.path().to_owned(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            let (file_tmp, link_tmp) = (root.join(".f.tmp"), root.join(".l.tmp"));
            let (dir_real, dir_link) = (root.join(".d.real"), root.join(".d.link"));
            while !stop.load(Ordering::Relaxed) {
                let _ = symlink(out.join("secret"), &link_tmp);
                let _ = fs::rename(&link_tmp, root.join("secret"));
                let _ = fs::rename(root.join("d"), &dir_real);
                let _ = symlink(&out, &dir_link);
                let _ = fs::rename(&dir_link, root.join("d"));
                let _ = fs::write(&file_tmp, "harmless\n");
                let _ = fs::rename(&file_tmp, root.join("secret"));
                let _ = fs::remove_file(root.join("d"));
                let _ = fs::rename(&dir_real, root.join("d"));
            }
        })
    };
    let resolvers = Resolvers::for_workspace(&f.ws);
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut harmless = 0;
    for i in 0..4000 {
        if Instant::now() > deadline {
            break;
        }
        let path = if i % 2 == 0 { "secret" } else { "d/secret" };
        let read = f.call("read_file", json!({ "path": path })).await.output;
        let grep = f
            .call("grep", json!({"pattern":"SECRET|harmless","path":path}))
            .await
            .output;
        let inlined = flatten(
            &[Segment::file_ref(path)],
            &Default::default(),
            &f.ws,
            &resolvers,
        )
        .text;
        for out in [&read, &grep, &inlined] {
            assert!(
                !out.contains("SECRET-CONTENT"),
                "leaked through {path}: {out}"
            );
        }
        harmless += usize::from(read.contains("harmless"));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(harmless > 0, "the race never let a read through at all");
}

// Item 11; issue 35 item 3.
#[tokio::test]
async fn read_file_keeps_a_bounded_part_of_a_huge_line() {
    let f = fixture();
    let len = 512 * 1024 * 1024;
    sparse(
        &f.path("huge.txt"),
        &[b'a'; 16 * 1024],
        len,
        b"\nsecond line\n",
    );
    let before = peak_rss();
    let out = f.call("read_file", json!({"path":"huge.txt"})).await;
    assert!(!out.is_error, "{}", out.output);
    assert!(
        out.output
            .contains("not read to its end; read on with offset=2]"),
        "{}",
        &out.output[out.output.len().saturating_sub(300)..]
    );
    assert!(!out.output.contains("second line"), "{}", out.output);
    // Reading on from line 2 has to pass the whole first line, in bounded memory.
    let out = f
        .call("read_file", json!({"path":"huge.txt","offset":2}))
        .await;
    let grew = peak_rss().saturating_sub(before);
    assert_eq!(out.output, "     2\tsecond line\n");
    assert!(
        grew < 128 * 1024 * 1024,
        "reading past one 512 MiB line raised peak memory by {} MiB",
        grew >> 20
    );
}

// Issue 35 item 3: a read stops once it has what it can show, even inside a
// line that never ends (2 GiB: 8 KiB of text, then holes).
#[tokio::test]
async fn read_file_stops_inside_a_line_that_never_ends() {
    let f = fixture();
    sparse(
        &f.path("endless.txt"),
        &[b'a'; 8 * 1024],
        2 * 1024 * 1024 * 1024,
        b"",
    );
    let started = Instant::now();
    let out = f
        .call("read_file", json!({"path":"endless.txt","limit":1}))
        .await;
    assert!(!out.is_error, "{}", out.output);
    let expected = format!(
        "     1\t{}… [line cut; longer than {} bytes, not read to its end]\n\
         [... line 1 was not read to its end; read on with offset=2]\n",
        "a".repeat(2000),
        2004 + 1024 * 1024
    );
    assert_eq!(out.output, expected);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

// Item 11.
#[tokio::test]
async fn a_cancelled_read_stops_instead_of_reading_on() {
    let f = fixture();
    sparse(
        &f.path("big.txt"),
        &[b'a'; 16 * 1024],
        64 * 1024 * 1024,
        b"\nend\n",
    );
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = f
        .call_with("read_file", json!({"path":"big.txt"}), cancel)
        .await;
    assert!(out.is_error, "{}", &out.output[..out.output.len().min(200)]);
    assert_eq!(out.output, "cancelled");
}

// Item 11.
#[tokio::test]
async fn edit_file_refuses_files_over_its_size_limit_naming_it() {
    let f = fixture();
    let limit = pod::tools::MAX_EDIT_BYTES;
    sparse(&f.path("data.txt"), b"needle\n", limit + 1, b"\n");
    let out = f
        .call(
            "edit_file",
            json!({"path":"data.txt","old_string":"needle","new_string":"pin"}),
        )
        .await;
    assert!(out.is_error, "{}", out.output);
    assert!(
        out.output.contains(&format!("at most {limit} bytes")),
        "{}",
        out.output
    );
    let mut head = [0u8; 7];
    std::io::Read::read_exact(&mut File::open(f.path("data.txt")).unwrap(), &mut head).unwrap();
    assert_eq!(&head, b"needle\n", "not edited");
}

// Item 12.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_tools_refuse_a_fifo_at_once() {
    let f = fixture();
    mkfifo(&f.path("pipe"));
    for (tool, args) in [
        ("read_file", json!({"path":"pipe"})),
        ("write_file", json!({"path":"pipe","content":"x"})),
        (
            "edit_file",
            json!({"path":"pipe","old_string":"a","new_string":"b"}),
        ),
    ] {
        let call = f.call(tool, args);
        let out = match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(out) => out,
            Err(_) => {
                release_fifo(f.path("pipe"));
                panic!("{tool} on a FIFO blocked");
            }
        };
        assert!(out.is_error, "{tool}: {}", out.output);
        assert!(
            out.output.contains("FIFO"),
            "{tool} says what the file is: {}",
            out.output
        );
    }
}

// Item 12.
#[test]
fn a_file_ref_swapped_for_a_fifo_never_blocks_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let root = ws.root().to_owned();
    // The FIFO swapped in is a link to this one, so a checker blocked on it
    // can be released by path.
    let keep = tempfile::tempdir().unwrap();
    let fifo = keep.path().join("fifo");
    mkfifo(&fifo);
    fs::write(root.join("f"), "text\n").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (root, fifo, stop) = (root.clone(), fifo.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::remove_file(root.join(".p"));
                let _ = fs::hard_link(&fifo, root.join(".p"));
                let _ = fs::rename(root.join(".p"), root.join("f"));
                let _ = fs::write(root.join(".t"), "text\n");
                let _ = fs::rename(root.join(".t"), root.join("f"));
            }
        })
    };
    let (done, finished) = mpsc::channel();
    let checker = std::thread::spawn(move || {
        let mut refused = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Err(e) = check(&[Segment::file_ref("f")], &ws, None) {
                assert_eq!(e.code, ErrorCode::FileRefUnreadable, "{}", e.message);
                refused += 1;
            }
        }
        done.send(refused).unwrap();
    });
    let result = finished.recv_timeout(Duration::from_secs(40));
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    if result.is_err() {
        release_fifo(fifo);
        panic!("a file_ref check blocked on a FIFO swapped in under it");
    }
    checker.join().unwrap();
    assert!(
        result.unwrap() > 0,
        "the FIFO was never seen; the race did not run"
    );
}

fn read_file_call(path: &str) -> String {
    json!({"events":[{"tool_call":{"id":"c1","name":"read_file","arguments":{"path":path}}}]})
        .to_string()
}

// Item 12, end to end: a FIFO blocks neither a `run`, nor a tool call, nor
// the pod's shutdown.
#[test]
fn a_fifo_in_the_workspace_blocks_neither_runs_nor_tools_nor_stop() {
    let script = [
        read_file_call("pipe"),
        json!({"events":[{"text":"could not read it"}]}).to_string(),
    ]
    .join("\n");
    let mut pod = Pod::builder().script(&script).start();
    mkfifo(&pod.workspace.join("pipe"));
    let mut a = pod.client();
    let mut b = pod.client();
    a.until_type("snapshot");
    b.until_type("snapshot");

    let started = Instant::now();
    a.send(json!({"type":"run","request_id":"ref","segments":[
        {"type":"text","text":"look"},{"type":"file_ref","path":"pipe"}]}));
    let err = a.until_type("error");
    assert_eq!(err["code"], "file_ref_unreadable", "{err}");
    assert!(err["message"].as_str().unwrap().contains("FIFO"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    b.send(json!({"type":"list_completions","request_id":"b","kind":"file","prefix":"pi"}));
    let answer = b.until_type("response");
    assert_eq!(answer["completions"], json!(["pipe"]));

    a.run("read the pipe");
    let results = a.until_entry("tool_results");
    let result = &results["entry"]["results"][0];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("FIFO"),
        "{result}"
    );
    a.until_entry("turn_end");

    let output = pod.command("stop").output().unwrap();
    assert!(output.status.success());
    assert!(pod.wait_exit(Duration::from_secs(10)).success());
}

// Item 12: completions walk a directory; a big one must not hold up the
// clients that share the pod's main thread.
#[test]
fn completions_of_a_huge_directory_do_not_hold_up_other_clients() {
    let pod = Pod::start();
    let big = pod.workspace.join("big");
    fs::create_dir(&big).unwrap();
    for i in 0..60_000 {
        File::create(big.join(format!("f{i:05}"))).unwrap();
    }
    let mut a = pod.client();
    let mut b = pod.client();
    a.until_type("snapshot");
    b.until_type("snapshot");

    let (tx, rx) = mpsc::channel();
    let (tx_a, tx_b) = (tx.clone(), tx);
    a.send(json!({"type":"list_completions","request_id":"slow","kind":"file","prefix":"big/"}));
    let reader_a = std::thread::spawn(move || {
        let r = a.until_type("response");
        tx_a.send(("a", r["request_id"].clone())).unwrap();
    });
    // Give the pod time to start on A's walk (it takes far longer).
    std::thread::sleep(Duration::from_millis(200));
    b.send(json!({"type":"list_completions","request_id":"quick","kind":"file","prefix":"zz"}));
    let reader_b = std::thread::spawn(move || {
        let r = b.until_type("response");
        tx_b.send(("b", r["request_id"].clone())).unwrap();
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let second = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    reader_a.join().unwrap();
    reader_b.join().unwrap();
    assert_eq!(
        (first.0, second.0),
        ("b", "a"),
        "B's quick answer waited for A's walk"
    );
}

// Item 12: the walkers (grep, glob, completions) open every `.gitignore` on
// their way with a blocking open; a FIFO there must not hang them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_named_like_an_ignore_file_does_not_hang_a_walk() {
    let f = fixture();
    fs::create_dir_all(f.path("sub")).unwrap();
    fs::write(f.path("a.txt"), "needle\n").unwrap();
    fs::write(f.path("sub/b.txt"), "needle\n").unwrap();
    mkfifo(&f.path("sub/.gitignore"));

    let prompt = |what: &'static str, fifo: PathBuf| {
        move |result: Result<ToolOutcome, tokio::time::error::Elapsed>| match result {
            Ok(out) => out,
            Err(_) => {
                release_fifo(fifo);
                panic!("{what} blocked on a FIFO .gitignore");
            }
        }
    };
    let limit = Duration::from_secs(5);
    let grep = f.call("grep", json!({"pattern":"needle"}));
    let out = prompt("grep", f.path("sub/.gitignore"))(tokio::time::timeout(limit, grep).await);
    assert_eq!(out.output.trim(), "a.txt:1:needle", "sub/ is skipped");
    let glob = f.call("glob", json!({"pattern":"*.txt"}));
    let out = prompt("glob", f.path("sub/.gitignore"))(tokio::time::timeout(limit, glob).await);
    assert_eq!(out.output.trim(), "a.txt");
    let grep = f.call("grep", json!({"pattern":"needle","path":"sub"}));
    let out =
        prompt("grep in sub", f.path("sub/.gitignore"))(tokio::time::timeout(limit, grep).await);
    assert!(
        out.is_error && out.output.contains("is a FIFO"),
        "{}",
        out.output
    );

    let ws = f.ws.clone();
    let completions = tokio::task::spawn_blocking(move || ws.completions("sub/", 10));
    match tokio::time::timeout(limit, completions).await {
        Ok(found) => assert!(found.unwrap().is_empty()),
        Err(_) => {
            release_fifo(f.path("sub/.gitignore"));
            panic!("completions blocked on a FIFO .gitignore");
        }
    }
}

// Item 12: the check a `run` needs, as a future that owns what it needs and
// runs the file I/O on the blocking pool, for a caller on an actor thread.
#[tokio::test]
async fn check_async_answers_like_check_from_the_blocking_pool() {
    let f = fixture();
    fs::write(f.path("ok.rs"), "fn main() {}\n").unwrap();
    mkfifo(&f.path("pipe"));
    for (path, code) in [
        ("ok.rs", None),
        ("pipe", Some(ErrorCode::FileRefUnreadable)),
        ("../x", Some(ErrorCode::FileRefOutOfScope)),
    ] {
        let segments = vec![Segment::text("see "), Segment::file_ref(path)];
        let pending = pod::input::check_async(&segments, &f.ws, None);
        drop(segments);
        let result = tokio::spawn(pending).await.unwrap();
        assert_eq!(result.map_err(|e| e.code).err(), code, "{path}");
    }
}
