//! Starting a pod safely: concurrent starts, private files whatever the
//! umask, a socket directory someone else controls, a `--socket` that is
//! not a socket.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod hardening_common;
mod harness;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hardening_common::{exits_within, Running};
use harness::{Pod, POD};
use serde_json::Value;

fn serve(dir: &Path, socket: &Path) -> Command {
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let mut cmd = Command::new(POD);
    cmd.arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--workspace")
        .arg(workspace)
        .arg("--name")
        .arg("default")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// A command that must give up within a few seconds.
const REFUSED_WITHIN: Duration = Duration::from_secs(10);

fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    }
    err
}

/// The session the pod on `socket` serves, from its snapshot.
fn served_session(socket: &Path) -> String {
    let stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    let snapshot: Value = serde_json::from_str(&line).unwrap();
    snapshot["session_id"].as_str().unwrap().to_owned()
}

fn pointer_session(data: &Path) -> String {
    let pointer: Value =
        serde_json::from_slice(&std::fs::read(data.join("pods/default.json")).unwrap()).unwrap();
    pointer["session_id"].as_str().unwrap().to_owned()
}

/// Item 3: three `pod serve` with one name on an empty data dir, several
/// rounds. Exactly one survives; its socket is there and the pointer names
/// the session it serves; the others exit non-zero saying why.
#[test]
fn concurrent_starts_leave_one_pod_with_its_socket_and_its_pointer() {
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/pod.sock");
        let mut children: Vec<Running> = (0..3)
            .map(|_| Running::new(serve(dir.path(), &socket).spawn().unwrap()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut losers = Vec::new();
        while losers.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "round {round}: {} pods still running",
                3 - losers.len()
            );
            let mut i = 0;
            while i < children.len() {
                if let Some(status) = children[i].child().try_wait().unwrap() {
                    let mut loser = children.remove(i);
                    losers.push((status, stderr_of(loser.child())));
                } else {
                    i += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for (status, stderr) in &losers {
            assert!(!status.success(), "round {round}: a loser exited 0");
            assert!(
                stderr.contains("already"),
                "round {round}: the loser did not say why: {stderr}"
            );
        }
        harness::eventually("the winner to listen", Duration::from_secs(20), || {
            UnixStream::connect(&socket).is_ok()
        });
        assert!(
            socket.exists(),
            "round {round}: the surviving pod has no socket"
        );
        assert_eq!(
            served_session(&socket),
            pointer_session(&dir.path().join("data")),
            "round {round}: the pointer names another session than the one served"
        );
    }
}

/// Item 3: a pod that exits removes only the socket it created. Here its
/// socket was deleted and another pod now listens at that path (another
/// data dir); when the first pod stops, the second one's socket stays.
#[test]
fn a_pod_removes_only_the_socket_it_created() {
    let mut first = Pod::start();
    std::fs::remove_file(&first.socket).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let _second = Running::new(serve(other_dir.path(), &first.socket).spawn().unwrap());
    harness::eventually("the second pod to listen", Duration::from_secs(20), || {
        UnixStream::connect(&first.socket).is_ok()
    });
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first.pid() as i32).unwrap(),
        rustix::process::Signal::Term,
    )
    .unwrap();
    assert!(first.wait_exit(Duration::from_secs(20)).success());
    assert!(
        first.socket.exists(),
        "the first pod removed the second pod's socket"
    );
    served_session(&first.socket);
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// Item 7: whatever the umask, the data directory and everything in it is
/// the user's alone.
#[test]
fn data_files_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/pod.sock");
    let mut cmd = serve(dir.path(), &socket);
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::umask(rustix::fs::Mode::empty());
            Ok(())
        });
    }
    let _pod = Running::new(cmd.spawn().unwrap());
    let data = dir.path().join("data");
    // The socket path is recorded for `pod list` just after the socket
    // listens.
    harness::eventually("the pod to listen", Duration::from_secs(20), || {
        UnixStream::connect(&socket).is_ok() && data.join("pods/default.socket").exists()
    });
    let session = data.join(format!("sessions/{}.jsonl", pointer_session(&data)));
    for (path, expected) in [
        (data.clone(), 0o700),
        (data.join("sessions"), 0o700),
        (data.join("pods"), 0o700),
        (session, 0o600),
        (data.join("pods/default.json"), 0o600),
        (data.join("pods/default.lock"), 0o600),
        (data.join("pods/default.socket"), 0o600),
        (socket.parent().unwrap().to_owned(), 0o700),
        (socket.clone(), 0o600),
    ] {
        assert_eq!(
            mode(&path),
            expected,
            "{} is {:o}",
            path.display(),
            mode(&path)
        );
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(data.join("pods"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// Item 10: `--socket` naming a regular file is refused, and the file is
/// left as it was.
#[test]
fn a_socket_path_that_is_a_regular_file_is_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("notes.txt");
    std::fs::write(&precious, "keep me").unwrap();
    let output = exits_within(&mut serve(dir.path(), &precious), REFUSED_WITHIN);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not a socket") && stderr.contains("notes.txt"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
}

/// `pod` commands using the default socket under this runtime directory.
fn with_runtime_dir(runtime: &Path, data: &Path, subcommand: &str) -> Command {
    let mut cmd = Command::new(POD);
    cmd.arg(subcommand)
        .arg("--data-dir")
        .arg(data)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("POD_NAME", "default")
        .env("XDG_CONFIG_HOME", runtime.join("config"))
        .env_remove("POD_SOCKET")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null());
    cmd
}

/// Item 6: a socket directory others can write to (someone created it to
/// squat on the pod's socket) is refused by the server and by clients, with
/// a message naming it.
#[test]
fn a_socket_directory_others_can_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    let squatted = runtime.join("pod");
    std::fs::create_dir_all(&squatted).unwrap();
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o777)).unwrap();
    let data = dir.path().join("data");
    let output = exits_within(
        with_runtime_dir(&runtime, &data, "serve")
            .arg("--workspace")
            .arg(&runtime),
        REFUSED_WITHIN,
    );
    assert!(!output.status.success(), "the server used a squatted dir");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&squatted.display().to_string()), "{stderr}");
    assert!(!squatted.join("default.sock").exists());

    // A fake server in there: `pod send` must not hand it the text.
    let fake = std::os::unix::net::UnixListener::bind(squatted.join("default.sock")).unwrap();
    fake.set_nonblocking(true).unwrap();
    let output = exits_within(
        with_runtime_dir(&runtime, &data, "send").args(["--text", "secret"]),
        REFUSED_WITHIN,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&squatted.display().to_string()), "{stderr}");
    assert!(
        fake.accept().is_err(),
        "the client connected to a socket in a squatted directory"
    );
}

/// The default socket directory is the pod's own: one an earlier run or
/// tool left readable by others (0755, but writable only by us) is accepted
/// and made 0700, as the contract puts the socket in a 0700 directory.
#[test]
fn an_own_default_socket_directory_is_made_private() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("runtime");
    let sockets = runtime.join("pod");
    std::fs::create_dir_all(&sockets).unwrap();
    std::fs::set_permissions(&sockets, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = with_runtime_dir(&runtime, &dir.path().join("data"), "serve");
    cmd.arg("--workspace").arg(&sockets);
    let _pod = Running::new(cmd.spawn().unwrap());
    let socket = sockets.join("default.sock");
    harness::eventually("the pod to listen", Duration::from_secs(20), || {
        UnixStream::connect(&socket).is_ok()
    });
    assert_eq!(
        mode(&sockets),
        0o700,
        "{} is {:o}",
        sockets.display(),
        mode(&sockets)
    );
    assert_eq!(mode(&socket), 0o600);
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Item 6: a socket directory owned by another user is refused even when
/// its mode looks private, and a client refuses a server run by another
/// user wherever its socket is. Needs root to act as that other user.
#[test]
fn another_users_socket_directory_and_server_are_refused() {
    if !running_as_root() {
        // CI runs as root: there, the test must run, not pass unchecked.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set, so this test may not skip: it needs root to create files as another user"
        );
        eprintln!("skipped: needs root to create files as another user");
        return;
    }
    const NOBODY: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = dir.path().join("runtime");
    let squatted = runtime.join("pod");
    std::fs::create_dir_all(&squatted).unwrap();
    std::os::unix::fs::chown(&squatted, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o700)).unwrap();
    let data = dir.path().join("data");
    let output = exits_within(
        &mut with_runtime_dir(&runtime, &data, "status"),
        REFUSED_WITHIN,
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&squatted.display().to_string()) && stderr.contains("owned"),
        "{stderr}"
    );

    // A real pod run by another user, at an explicit socket.
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let socket = theirs.join("run/pod.sock");
    let mut other = serve(&theirs, &socket);
    other.uid(NOBODY).gid(NOBODY);
    let other = Running::new(other.spawn().unwrap());
    harness::eventually("the other user's pod", Duration::from_secs(20), || {
        std::fs::metadata(&socket).is_ok_and(|m| m.uid() == NOBODY)
    });
    let output = exits_within(
        Command::new(POD)
            .args(["send", "--text", "secret", "--socket"])
            .arg(&socket),
        REFUSED_WITHIN,
    );
    drop(other);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("uid 65534"), "{stderr}");
}

/// Trust item 11: a data directory inside the workspace would let a tool
/// forge an `approval_decision` in the log and have it believed after a
/// restart, so the pod refuses to start (exit 2) and says why; nothing is
/// created there.
#[test]
fn a_data_directory_inside_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/pod.sock");
    let mut cmd = Command::new(POD);
    cmd.arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.path().join(".pod-data"))
        .arg("--workspace")
        .arg(dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"));
    let out = exits_within(&mut cmd, REFUSED_WITHIN);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is inside the workspace"), "{err}");
    assert!(!dir.path().join(".pod-data").exists());
}
