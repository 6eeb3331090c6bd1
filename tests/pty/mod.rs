//! Driving a program in a pseudo-terminal: its screen read back through a
//! vt100 emulator, its keyboard written to; every wait is on what the
//! screen (or the disk) shows, with a deadline. Shared by the TUI's
//! end-to-end tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use serde_json::Value;

pub const POD: &str = env!("CARGO_BIN_EXE_pod");
pub const DEADLINE: Duration = Duration::from_secs(15);
pub const ROWS: u16 = 30;
pub const COLS: u16 = 100;

/// Kills the server when the test ends, however it ends.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `pod serve` in `run/pod.sock`, `data` and `ws` under a test's
/// directory.
pub struct ServedPod {
    pub server: Server,
    pub socket: PathBuf,
    pub data: PathBuf,
}

/// Starts a [`ServedPod`] under `dir`, with what `configure` adds to its
/// command (the provider, above all), and waits for its socket.
pub fn serve(dir: &Path, configure: impl FnOnce(&mut Command)) -> ServedPod {
    let socket = dir.join("run").join("pod.sock");
    let data = dir.join("data");
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let mut command = Command::new(POD);
    command
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(&data)
        .arg("--workspace")
        .arg(&workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    configure(&mut command);
    let server = Server(command.spawn().unwrap());
    wait_until("the pod's socket", || socket.exists());
    ServedPod {
        server,
        socket,
        data,
    }
}

/// [`serve`] on the offline model.
pub fn serve_offline(dir: &Path) -> ServedPod {
    serve(dir, |command| {
        command.args(["--provider", "offline"]);
    })
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The screen as one line of single-spaced words, so that text the TUI
/// wrapped across rows still matches.
pub fn flat(parser: &Mutex<vt100::Parser>) -> String {
    let contents = parser.lock().unwrap().screen().contents();
    contents.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn wait_for_screen(parser: &Mutex<vt100::Parser>, needle: &str) {
    let start = Instant::now();
    loop {
        let screen = flat(parser);
        if screen.contains(needle) {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for {needle:?} on screen:\n{}",
            parser.lock().unwrap().screen().contents()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every `user_input` entry in the session logs under `data`.
pub fn user_inputs(data: &Path) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir(data.join("sessions")) else {
        return found;
    };
    for file in dir.flatten() {
        let path = file.path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let Ok(line) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if line["entry"]["kind"] == "user_input" {
                found.push((stem.clone(), line["entry"].clone()));
            }
        }
    }
    found
}

/// A program in a pseudo-terminal: its emulated screen (kept up to date by a
/// reader thread), the process, and its keyboard.
pub type InPty = (
    Arc<Mutex<vt100::Parser>>,
    Box<dyn portable_pty::Child + Send + Sync>,
    Box<dyn Write + Send>,
);

/// Runs `command` in a fresh pseudo-terminal.
pub fn in_pty(mut command: CommandBuilder) -> InPty {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: ROWS,
            cols: COLS,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    command.env("TERM", "xterm-256color");
    let child = pty.slave.spawn_command(command).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let keys = pty.master.take_writer().unwrap();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
    let screen = Arc::clone(&parser);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            screen.lock().unwrap().process(&buf[..n]);
        }
    });
    (parser, child, keys)
}

/// [`in_pty`], also keeping every byte the program wrote, for escapes the
/// screen does not show (a bell, a desktop notification).
pub fn in_pty_raw(command: CommandBuilder) -> (InPty, Arc<Mutex<Vec<u8>>>) {
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: ROWS,
            cols: COLS,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut command = command;
    command.env("TERM", "xterm-256color");
    let child = pty.slave.spawn_command(command).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let keys = pty.master.take_writer().unwrap();
    let parser = Arc::new(Mutex::new(vt100::Parser::new(ROWS, COLS, 0)));
    let raw = Arc::new(Mutex::new(Vec::new()));
    let (screen, bytes) = (Arc::clone(&parser), Arc::clone(&raw));
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            bytes.lock().unwrap().extend_from_slice(&buf[..n]);
            screen.lock().unwrap().process(&buf[..n]);
        }
    });
    ((parser, child, keys), raw)
}

pub fn count(raw: &Mutex<Vec<u8>>, needle: &[u8]) -> usize {
    raw.lock()
        .unwrap()
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

/// Waits until `needle` is on screen with its first character drawn bold:
/// how the approval panel shows that its keys answer (they are dim while
/// it arms).
pub fn wait_for_bold(parser: &Mutex<vt100::Parser>, needle: &str) {
    wait_until(&format!("{needle:?} in bold"), || {
        let parser = parser.lock().unwrap();
        let screen = parser.screen();
        let (rows, cols) = screen.size();
        (0..rows).any(|row| {
            let text: String = (0..cols)
                .map(|col| {
                    screen
                        .cell(row, col)
                        .map_or(" ".to_owned(), |c| c.contents().to_owned())
                })
                .map(|c| if c.is_empty() { " ".to_owned() } else { c })
                .collect();
            text.find(needle).is_some_and(|at| {
                let col = text[..at].chars().count() as u16;
                screen.cell(row, col).is_some_and(|c| c.bold())
            })
        })
    });
}
