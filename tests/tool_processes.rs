//! What a tool process cannot do to the user, through real `pod serve`
//! processes: fake terminal input, reach another pod or any other local
//! server over a Unix socket, outlive a `kill -9`ed pod as a daemon, or read
//! the pod's secrets from its environment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use harness::{eventually, Client, Pod};
use serde_json::json;

fn bash_call(id: &str, command: &str) -> String {
    json!({"events":[{"tool_call":{"id":id,"name":"bash","arguments":{"command":command}}}]})
        .to_string()
}

fn text(reply: &str) -> String {
    json!({"events":[{"text":reply}]}).to_string()
}

/// Runs one turn and returns its first tool result's output.
fn turn(pod: &Pod) -> String {
    let mut client = pod.client();
    client.until_type("snapshot");
    client.run("go");
    let results = client.until_entry("tool_results");
    client.until_entry("turn_end");
    results["entry"]["results"][0]["output"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn python_command(program: &str) -> String {
    format!("python3 - <<'EOF'\n{program}\nEOF")
}

/// Tries everything that fakes terminal input: opening the controlling
/// terminal, `TIOCSTI` on a pty of its own (allowed to root without the
/// filter), and the same request with high bits set, which the kernel
/// ignores and a careless filter would not.
const FAKE_INPUT: &str = r#"
import ctypes, errno, fcntl, os, platform, termios
def name(e): return errno.errorcode.get(e, str(e))
try:
    fd = os.open('/dev/tty', os.O_RDWR)
    print('TTY OPENED')
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b'y'); print('INJECTED INTO TTY')
    except OSError as e: print('tty sti', name(e.errno))
except OSError as e: print('no tty:', name(e.errno))
m, s = os.openpty()
try:
    fcntl.ioctl(s, termios.TIOCSTI, b'y'); print('INJECTED INTO PTY')
except OSError as e: print('pty sti:', name(e.errno))
try:
    fcntl.ioctl(s, 0x541C, b'\x00'); print('TIOCLINUX RAN')
except OSError as e: print('tioclinux:', name(e.errno))
if platform.machine() == 'x86_64':
    libc = ctypes.CDLL(None, use_errno=True)
    c = ctypes.c_char(b'y')
    r = libc.syscall(16, s, ctypes.c_ulong(0x100005412), ctypes.byref(c))
    print('high bits:', 'INJECTED' if r == 0 else name(ctypes.get_errno()))
print('sid is pid:', os.getsid(0) == os.getpid() or os.getsid(0) == os.getppid())
"#;

/// The pod runs in a terminal of its own (a pty, as plain `pod` runs it in
/// the user's), and its command still cannot reach that terminal or fake
/// input on any other.
#[test]
fn a_command_has_no_terminal_and_cannot_fake_input() {
    use portable_pty::{native_pty_system, CommandBuilder, PtySize};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("pod.sock");
    let script = dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        [bash_call("c1", &python_command(FAKE_INPUT)), text("done")].join("\n"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let pty = native_pty_system().openpty(PtySize::default()).unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_pod"));
    cmd.args(["serve", "--approval", "auto", "--provider", "script"]);
    cmd.arg("--script");
    cmd.arg(&script);
    cmd.arg("--socket");
    cmd.arg(&socket);
    cmd.arg("--data-dir");
    cmd.arg(dir.path().join("data"));
    cmd.arg("--workspace");
    cmd.arg(dir.path().join("ws"));
    cmd.env("XDG_CONFIG_HOME", dir.path().join("config"));
    let mut child = pty.slave.spawn_command(cmd).unwrap();
    // Whatever the pod prints to its terminal is read and dropped.
    let mut reader = pty.master.try_clone_reader().unwrap();
    std::thread::spawn(move || {
        let mut sink = [0u8; 4096];
        while reader.read(&mut sink).is_ok_and(|n| n > 0) {}
    });
    eventually("the pod listens", Duration::from_secs(20), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let mut client = Client::connect(&socket);
    client.until_type("snapshot");
    client.run("go");
    let results = client.until_entry("tool_results");
    client.until_entry("turn_end");
    let _ = child.kill();
    let out = results["entry"]["results"][0]["output"].as_str().unwrap();
    assert!(out.contains("no tty: ENXIO"), "{out}");
    assert!(out.contains("pty sti: EPERM"), "{out}");
    assert!(out.contains("tioclinux: EPERM"), "{out}");
    assert!(!out.contains("INJECTED"), "{out}");
    assert!(!out.contains("TTY OPENED"), "{out}");
    if cfg!(target_arch = "x86_64") {
        assert!(out.contains("high bits: EPERM"), "{out}");
    }
    assert!(out.contains("sid is pid: True"), "{out}");
}

/// Connects to the Unix socket given as argument; and makes a socketpair
/// and runs an asyncio loop, which need no door to anything.
const CONNECT_UNIX: &str = r#"
import asyncio, socket, sys
a, b = socket.socketpair(); a.send(b'x'); print('socketpair:', b.recv(1) == b'x')
asyncio.run(asyncio.sleep(0)); print('asyncio ran')
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('CONNECTED')
except OSError as e: print('unix socket:', type(e).__name__, e.errno)
"#;

fn connect_unix(args: &[&str]) -> (String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let command = format!("python3 - {} <<'EOF'\n{CONNECT_UNIX}\nEOF", path.display());
    let mut builder = Pod::builder().script(&[bash_call("c1", &command), text("done")].join("\n"));
    for arg in args {
        builder = builder.arg(*arg);
    }
    let pod = builder.start();
    let out = turn(&pod);
    (out, listener.accept().is_ok())
}

/// The door to tmux, D-Bus, ssh-agent, docker and every other pod is shut
/// while the sandbox is on, and opened by `--sandbox-unix-sockets on`.
#[test]
fn unix_sockets_are_refused_while_the_sandbox_is_on_unless_opened() {
    let (out, reached) = connect_unix(&[]);
    assert!(out.contains("unix socket: PermissionError 1"), "{out}");
    assert!(!reached, "{out}");
    assert!(out.contains("socketpair: True"), "{out}");
    assert!(out.contains("asyncio ran"), "{out}");

    let (out, reached) = connect_unix(&["--sandbox-unix-sockets", "on"]);
    assert!(out.contains("CONNECTED"), "{out}");
    assert!(reached, "{out}");

    let (out, reached) = connect_unix(&["--sandbox", "off"]);
    assert!(
        out.contains("CONNECTED") && reached,
        "--sandbox off confines nothing: {out}"
    );
}

/// A command of pod A (whose user opened the Unix-socket door) runs
/// `pod approve` against pod B: B sees a tool process, not the user.
#[test]
fn a_tool_of_one_pod_cannot_approve_for_another() {
    let b = Pod::builder()
        .script(&[bash_call("b1", "touch approved-by-a-tool"), text("done")].join("\n"))
        .args(["--approval", "ask"])
        .start();
    let mut user = b.client();
    user.until_type("snapshot");
    user.run("go");
    user.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    });
    let approve = format!(
        "'{}' approve b1 --socket '{}' --data-dir '{}'; echo \"exit $?\"",
        env!("CARGO_BIN_EXE_pod"),
        b.socket.display(),
        b.data_dir.display()
    );
    let a = Pod::builder()
        .script(&[bash_call("a1", &approve), text("done")].join("\n"))
        .args(["--sandbox-unix-sockets", "on"])
        .start();
    let out = turn(&a);
    assert!(out.contains("may only read"), "{out}");
    assert!(!out.contains("exit 0"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!b.workspace.join("approved-by-a-tool").exists(), "{out}");
    let snapshot = b.client().until_type("snapshot");
    assert_eq!(snapshot["status"]["pending_approvals"], json!(["b1"]));
}

/// The command lines of every live process, by pid.
fn command_lines() -> Vec<(i32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let state = stat[stat.rfind(')')? + 2..].chars().next()?;
            if state == 'Z' {
                return None;
            }
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

fn daemons(tag: &str) -> Vec<i32> {
    command_lines()
        .into_iter()
        .filter(|(_, line)| line.contains(tag))
        .map(|(pid, _)| pid)
        .collect()
}

/// A daemon that left the command's session and forked twice — the one
/// that would approve after the user restarts the pod — dies with a
/// `kill -9`ed pod.
#[test]
fn a_daemon_does_not_outlive_a_killed_pod() {
    let tag = format!("pod-daemon-{}", uuid::Uuid::new_v4().simple());
    // `exec -a` names the sleeps so the test finds exactly these.
    // The command returns once the daemon has its own session, so that the
    // end of the command (which kills its process group) does not race it.
    let command = format!(
        "setsid bash -c 'touch ready; (exec -a {tag}-grandchild sleep 300 &); \
         exec -a {tag}-leader sleep 300' </dev/null >/dev/null 2>&1 & \
         while [ ! -e ready ]; do sleep 0.05; done; echo started"
    );
    let mut pod = Pod::builder()
        .script(&[bash_call("c1", &command), text("done")].join("\n"))
        .start();
    let out = turn(&pod);
    assert!(out.contains("started"), "{out}");
    eventually("both daemons run", Duration::from_secs(10), || {
        daemons(&tag).len() == 2
    });
    pod.kill9();
    let gone = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        daemons(&tag).is_empty()
    });
    let left = daemons(&tag);
    for pid in &left {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::Kill);
        }
    }
    assert!(gone, "daemons outlived the pod: {left:?}");
}

/// The provider keys and the remote door's token are not in a command's
/// environment; `--pass-env` keeps the one named.
#[test]
fn commands_do_not_see_the_pods_secrets() {
    let command = "echo \"openai=${OPENAI_API_KEY:-unset} token=${POD_TOKEN:-unset} \
                   anthropic=${ANTHROPIC_API_KEY:-unset} \
                   other=${OTHER_VAR:-unset}\"";
    let pod = Pod::builder()
        .script(&[bash_call("c1", command), text("done")].join("\n"))
        .env("OPENAI_API_KEY", "sk-secret")
        .env("POD_TOKEN", "tok-secret")
        .env("ANTHROPIC_API_KEY", "ak-kept")
        .env("OTHER_VAR", "kept")
        .args(["--pass-env", "ANTHROPIC_API_KEY"])
        .start();
    let out = turn(&pod);
    assert!(
        out.contains("openai=unset token=unset anthropic=ak-kept other=kept"),
        "{out}"
    );
}

/// No byte a terminal acts on: ESC, the C1 controls, BEL, CR, the bidi
/// overrides.
fn assert_inert(what: &str, text: &str) {
    for bad in ['\u{1b}', '\u{9b}', '\u{7}', '\r', '\u{202e}'] {
        assert!(!text.contains(bad), "{what} printed {bad:?} raw:\n{text}");
    }
}

/// A command that hides itself behind `ESC[2K\r` and prints OSC 52 (set
/// the clipboard), an answer that sets the window title and moves the
/// cursor up: every CLI shows them as visible escapes.
#[test]
fn no_cli_prints_a_tools_or_the_models_control_characters() {
    let command =
        "printf '\\033]52;c;cm0gLXJmIH4=\\007out\\n'; touch PWN\u{1b}[2K\rbash: git status";
    let answer = "title\u{1b}]2;owned\u{7} up\u{1b}[1A\u{202e}txt.exe";
    let pod = Pod::builder()
        .script(&[bash_call("c1", command), text(answer)].join("\n"))
        .args(["--approval", "ask"])
        .start();
    let send = pod
        .command("send")
        .args(["--text", "go\u{1b}[31m red"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut watcher = pod.client();
    watcher.until_type("snapshot");
    watcher.until_entry("approval_request");

    let pending = harness::succeeded(pod.command("pending").output().unwrap());
    assert_inert("pod pending", &pending);
    assert!(
        pending.contains("touch PWN\\e[2K\\rbash: git status"),
        "{pending}"
    );
    let approved = harness::succeeded(pod.command("approve").arg("c1").output().unwrap());
    assert_inert("pod approve", &approved);
    assert!(approved.contains("PWN\\e[2K\\r"), "{approved}");

    let sent = send.wait_with_output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&sent.stdout),
        String::from_utf8_lossy(&sent.stderr),
    );
    assert!(sent.status.success(), "{out}\n{err}");
    assert_inert("pod send (stdout)", &out);
    assert_inert("pod send (stderr)", &err);
    assert!(
        out.contains("title\\e]2;owned\\x07 up\\e[1A\\u202etxt.exe"),
        "{out}"
    );
    assert!(err.contains("PWN\\e[2K\\r"), "{err}");

    let log = harness::succeeded(pod.command("log").output().unwrap());
    assert_inert("pod log", &log);
    assert!(log.contains("\\e]52;c;cm0gLXJmIH4=\\x07out"), "{log}");
    let status = harness::succeeded(pod.command("status").output().unwrap());
    assert_inert("pod status", &status);
    let sessions = harness::succeeded(pod.command("sessions").output().unwrap());
    assert_inert("pod sessions", &sessions);
    assert!(sessions.contains("go\\e[31m red"), "{sessions}");
}

/// This pod's reaper: the child of `pod` run as `pod __reaper`.
fn reaper_of(pod: u32) -> i32 {
    let mut found = 0;
    eventually("the reaper runs", Duration::from_secs(10), || {
        found = command_lines()
            .into_iter()
            .find(|(pid, line)| line.contains("__reaper") && parent_of(*pid) == Some(pod as i32))
            .map_or(0, |(pid, _)| pid);
        found != 0
    });
    found
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn kill9_all(pids: &[i32]) {
    for pid in pids {
        if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::Kill);
        }
    }
}

/// A sandboxed command cannot stop (or kill) the pod or its reaper — the
/// first step of taking over the pod's port — while it still signals what
/// it started itself. Each `STOP` that got through is undone at once, so
/// on a pod without the scope the test fails on its assertions, not by
/// hanging.
#[test]
fn a_command_cannot_stop_the_pod_or_its_reaper() {
    let command = "pod=$(cat pod.pid); reaper=$(cat reaper.pid); \
         kill -STOP $pod; echo \"stop pod: $?\"; kill -CONT $pod; \
         kill -STOP $reaper; echo \"stop reaper: $?\"; kill -CONT $reaper; \
         kill -0 $pod; echo \"probe pod: $?\"; \
         sleep 30 & kill $!; wait $!; echo \"own child: $?\"";
    let pod = Pod::builder()
        .script(
            &[
                bash_call("c1", command),
                text("done"),
                text("still answering"),
            ]
            .join("\n"),
        )
        .start();
    let mut client = pod.client();
    let snapshot = client.until_type("snapshot");
    let pid = snapshot["greeting"]["pid"].as_u64().unwrap() as u32;
    assert_eq!(pid, pod.pid());
    std::fs::write(pod.workspace.join("pod.pid"), pid.to_string()).unwrap();
    let reaper = reaper_of(pid);
    std::fs::write(pod.workspace.join("reaper.pid"), reaper.to_string()).unwrap();
    client.run("go");
    let results = client.until_entry("tool_results");
    client.until_entry("turn_end");
    let out = results["entry"]["results"][0]["output"].as_str().unwrap();
    assert!(out.contains("stop pod: 1"), "{out}");
    assert!(out.contains("stop reaper: 1"), "{out}");
    assert!(out.contains("probe pod: 1"), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(out.contains("own child: 143"), "{out}");
    assert!(
        out.contains("may signal only processes it started"),
        "{out}"
    );
    client.run("again");
    let reply = client.until_entry("assistant_items");
    assert!(reply.to_string().contains("still answering"), "{reply}");
    assert!(
        parent_of(reaper) == Some(pid as i32),
        "the reaper still runs beside the pod"
    );
}

/// A daemon that keeps forking — each link forks the next and exits, in a
/// session of its own — is gone once the pod stops: the reaper keeps
/// passing over `/proc` until none is left, killing each link as it finds
/// it.
#[test]
fn a_forking_daemon_chain_is_gone_once_the_pod_stops() {
    let tag = format!("pod-chain-{}", uuid::Uuid::new_v4().simple());
    // Every link is a fork of the `exec -a`-named bash, so it carries the
    // tag, and truncates `beat` (a builtin: no process of its own), so the
    // test sees it live without catching one; `stop-chain` in the
    // workspace ends a chain the pod failed to.
    let command = format!(
        "setsid bash -c 'exec -a {tag} bash -c \"step() {{ [ -e stop-chain ] && exit; \
         : > beat; ( step ) & exit; }}; touch ready; step\"' </dev/null >/dev/null 2>&1 & \
         while [ ! -e ready ]; do sleep 0.05; done; echo started"
    );
    let mut pod = Pod::builder()
        .script(&[bash_call("c1", &command), text("done")].join("\n"))
        .start();
    let out = turn(&pod);
    assert!(out.contains("started"), "{out}");
    let beat = pod.workspace.join("beat");
    let beating = |over: Duration| {
        let before = std::fs::metadata(&beat).and_then(|m| m.modified()).ok();
        std::thread::sleep(over);
        std::fs::metadata(&beat).and_then(|m| m.modified()).ok() != before
    };
    // Still running well after the command ended: it is a daemon.
    assert!(
        beating(Duration::from_millis(300)),
        "the chain ended by itself"
    );
    harness::succeeded(pod.command("stop").output().unwrap());
    pod.wait_exit(Duration::from_secs(20));
    let gone = (0..50).any(|_| !beating(Duration::from_millis(200)));
    std::fs::write(pod.workspace.join("stop-chain"), "").unwrap();
    eventually("the chain stops", Duration::from_secs(10), || {
        !beating(Duration::from_millis(200))
    });
    assert!(gone, "a forking chain outlived the pod by 10 s");
}

/// Starts `pod serve` in `dir` (`ws`, `data`, `run/pod.sock`, as the
/// harness lays it out) under a Python process that makes itself a child
/// subreaper: what the pod leaves when it dies is handed to that process,
/// not to init, so no other test's reaper (which kills the orphans handed
/// to its own adopter) takes it.
fn serve_under_a_subreaper(dir: &std::path::Path, script: &str) -> std::process::Child {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("script.jsonl"), script).unwrap();
    let wrapper = r#"
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
subprocess.Popen(sys.argv[1:])
while True:
    try: os.wait()
    except ChildProcessError: break
"#;
    let child = std::process::Command::new("python3")
        .args(["-c", wrapper, harness::POD, "serve", "--approval", "auto"])
        .args(["--provider", "script", "--script"])
        .arg(dir.join("script.jsonl"))
        .arg("--socket")
        .arg(dir.join("run/pod.sock"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--workspace")
        .arg(dir.join("ws"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually("the pod listens", Duration::from_secs(20), || {
        std::os::unix::net::UnixStream::connect(dir.join("run/pod.sock")).is_ok()
    });
    child
}

/// A pod that starts while tool processes of a dead pod still run in its
/// workspace (here: its reaper was killed before the pod) kills them, and
/// says so with their pids, on stderr and in the greeting.
#[test]
fn a_pod_stops_tool_processes_a_dead_pod_left_in_its_workspace() {
    let tag = format!("pod-leftover-{}", uuid::Uuid::new_v4().simple());
    let command = format!(
        "setsid bash -c 'touch ready; exec -a {tag} sleep 300' </dev/null >/dev/null 2>&1 & \
         while [ ! -e ready ]; do sleep 0.05; done; echo started"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut subreaper = serve_under_a_subreaper(
        dir.path(),
        &[bash_call("c1", &command), text("done")].join("\n"),
    );
    let mut client = Client::connect(&dir.path().join("run/pod.sock"));
    let pid = client.until_type("snapshot")["greeting"]["pid"]
        .as_u64()
        .unwrap() as i32;
    client.run("go");
    let out = client.until_entry("tool_results").to_string();
    client.until_entry("turn_end");
    assert!(out.contains("started"), "{out}");
    eventually("the daemon runs", Duration::from_secs(10), || {
        daemons(&tag).len() == 1
    });
    let daemon = daemons(&tag)[0];
    kill9_all(&[reaper_of(pid as u32)]);
    kill9_all(&[pid]);
    eventually("the pod is gone", Duration::from_secs(10), || {
        parent_of(pid).is_none()
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(daemons(&tag), [daemon], "nothing killed the daemon");

    let mut again = Pod::builder().in_dir(dir).start();
    let rx = stderr_lines(again.child.stderr.take().unwrap());
    let said = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(10)).ok())
        .find(|line| line.starts_with("warning:") && line.contains("pod that is gone"));
    let snapshot = again.client().until_type("snapshot");
    let left = daemons(&tag);
    kill9_all(&left);
    let _ = subreaper.kill();
    let _ = subreaper.wait();
    let said = said.expect("nothing said of the leftover process");
    assert!(said.contains("killed 1 process "), "{said}");
    assert!(said.contains(&format!("{daemon} (sleep)")), "{said}");
    assert!(left.is_empty(), "the leftover still runs: {left:?}; {said}");
    let warnings = snapshot["greeting"]["warnings"].to_string();
    assert!(
        warnings.contains(&format!("{daemon} (sleep)")),
        "{warnings}"
    );
}

/// A second pod started in the workspace of a live one leaves the first
/// pod's tool processes alone — even a daemon that left its command's
/// session and forked twice, whose parent is now that pod — and says
/// nothing of them.
#[test]
fn a_second_pod_of_a_workspace_leaves_a_live_pods_daemon_alone() {
    let tag = format!("pod-live-{}", uuid::Uuid::new_v4().simple());
    let command = format!(
        "setsid bash -c 'touch ready; (exec -a {tag} sleep 300 &)' </dev/null >/dev/null 2>&1 & \
         while [ ! -e ready ]; do sleep 0.05; done; echo started"
    );
    let pod = Pod::builder()
        .script(&[bash_call("c1", &command), text("done")].join("\n"))
        .start();
    assert!(turn(&pod).contains("started"));
    eventually("the daemon runs", Duration::from_secs(10), || {
        daemons(&tag).len() == 1
    });
    let daemon = daemons(&tag)[0];
    assert_eq!(parent_of(daemon), Some(pod.pid() as i32));

    let other = tempfile::tempdir().unwrap();
    let mut second = std::process::Command::new(harness::POD)
        .args(["serve", "--approval", "auto", "--socket"])
        .arg(other.path().join("pod.sock"))
        .arg("--data-dir")
        .arg(other.path().join("data"))
        .arg("--workspace")
        .arg(&pod.workspace)
        .env("XDG_CONFIG_HOME", other.path().join("config"))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(second.stderr.take().unwrap());
    let mut client = {
        let mut connected = None;
        eventually("the second pod listens", Duration::from_secs(20), || {
            connected = std::os::unix::net::UnixStream::connect(other.path().join("pod.sock")).ok();
            connected.is_some()
        });
        drop(connected);
        Client::connect(&other.path().join("pod.sock"))
    };
    let warnings = client.until_type("snapshot")["greeting"]["warnings"].to_string();
    let _ = second.kill();
    let _ = second.wait();
    let said: Vec<String> = rx.try_iter().collect();
    assert_eq!(
        daemons(&tag),
        [daemon],
        "the live pod's daemon was killed: {said:?}"
    );
    assert!(!warnings.contains("pod that is gone"), "{warnings}");
    assert!(
        !said.iter().any(|line| line.contains("pod that is gone")),
        "{said:?}"
    );
}

/// Starts, through a pod in `dir` that is then `kill -9`ed with its reaper
/// first, a fast fork chain in its workspace: each link `setsid`s, lives
/// 20 ms, starts the next and ends, logging its pid to `chain.log`. Returns
/// the workspace, once the chain is seen to go on without the pod, and the
/// subreaper the pod ran under; `stop-chain` in the workspace ends it.
fn a_chain_a_dead_pod_left(dir: &std::path::Path) -> (std::path::PathBuf, std::process::Child) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("ws/link.sh"),
        "[ -e stop-chain ] && exit\necho $$ >> chain.log\nsleep 0.02\n\
         (setsid bash link.sh </dev/null >/dev/null 2>&1 &)\n",
    )
    .unwrap();
    let command = "setsid bash link.sh </dev/null >/dev/null 2>&1 & \
        while [ ! -s chain.log ]; do sleep 0.02; done; echo started";
    let subreaper =
        serve_under_a_subreaper(dir, &[bash_call("c1", command), text("done")].join("\n"));
    let ws = dir.join("ws");
    let mut client = Client::connect(&dir.join("run/pod.sock"));
    let pid = client.until_type("snapshot")["greeting"]["pid"]
        .as_u64()
        .unwrap() as i32;
    client.run("go");
    client.until_entry("turn_end");
    kill9_all(&[reaper_of(pid as u32)]);
    kill9_all(&[pid]);
    eventually("the pod is gone", Duration::from_secs(10), || {
        parent_of(pid).is_none()
    });
    let before = chain_links(&ws);
    eventually("the chain goes on", Duration::from_secs(10), || {
        chain_links(&ws) > before + 2
    });
    (ws, subreaper)
}

/// How many links of a chain ([`a_chain_a_dead_pod_left`]) have run.
fn chain_links(ws: &std::path::Path) -> usize {
    std::fs::read_to_string(ws.join("chain.log"))
        .map(|log| log.lines().count())
        .unwrap_or(0)
}

/// Ends a chain whatever happens to the test.
struct StopChain(std::path::PathBuf);

impl Drop for StopChain {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("stop-chain"), "");
    }
}

/// Whether a chain starts no new link for 25 of its periods (20 ms each),
/// looking every 10 ms; false as soon as one does.
fn chain_stays_stopped(ws: &std::path::Path) -> bool {
    let before = chain_links(ws);
    let until = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < until {
        if chain_links(ws) != before {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// A fast fork chain a dead pod's tool left (each link `setsid`s, lives
/// 20 ms and starts the next), though one pass over `/proc` can miss every
/// link (re-trial of issue 35), is gone once the next pod of the workspace
/// has started: it stops each link it finds, so none forks again, then
/// kills them all, and says so.
#[test]
fn a_pod_stops_a_fast_fork_chain_a_dead_pod_left() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, mut subreaper) = a_chain_a_dead_pod_left(dir.path());
    let _stop = StopChain(ws.clone());

    let mut again = Pod::builder().in_dir(dir).start();
    let rx = stderr_lines(again.child.stderr.take().unwrap());
    let snapshot = again.client().until_type("snapshot");
    let _ = subreaper.kill();
    let _ = subreaper.wait();
    let warnings = snapshot["greeting"]["warnings"].to_string();
    let said = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(2)).ok())
        .find(|line| line.starts_with("warning:") && line.contains("pod that is gone"))
        .unwrap_or_else(|| panic!("nothing said of the chain; greeting warnings: {warnings}"));
    assert!(
        chain_stays_stopped(&ws),
        "the chain went on after the pod started: {said}"
    );
    assert!(said.contains("killed "), "{said}");
    // A link is caught as the chain's `bash`, or as the `setsid` it runs
    // before `exec`ing the next one.
    assert!(
        said.contains("(bash)") || said.contains("(setsid)"),
        "{said}"
    );
    assert!(!said.contains("  "), "runs of spaces: {said:?}");
}

/// The loop docs/sandbox.md gives, for what a pod could not stop itself,
/// stops a fast fork chain a dead pod left.
#[test]
fn the_loop_in_the_sandbox_docs_stops_a_fast_fork_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, mut subreaper) = a_chain_a_dead_pod_left(dir.path());
    let _stop = StopChain(ws.clone());
    let _ = subreaper.kill();
    let _ = subreaper.wait();
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/sandbox.md")).unwrap();
    let block = docs
        .split("```sh\n")
        .skip(1)
        .find(|block| block.contains("Seccomp_filters"))
        .and_then(|block| block.split("```").next())
        .expect("docs/sandbox.md shows a loop that stops a chain");
    let stopped = std::process::Command::new("bash")
        .args(["-c", block])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(stopped.success(), "{stopped:?}");
    assert!(chain_stays_stopped(&ws), "the loop left the chain running");
}

/// The lines a pod writes to stderr, as they come, read on a thread of
/// their own so that a test can wait for one with a timeout.
fn stderr_lines(stderr: std::process::ChildStderr) -> std::sync::mpsc::Receiver<String> {
    let (lines, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
