//! What a tool process cannot do to the user, through real `pod serve`
//! processes: fake terminal input, reach another pod or any other local
//! server over a Unix socket, outlive a `kill -9`ed pod as a daemon, or read
//! the pod's secrets from its environment.

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
