//! Ctrl+V of a clipboard image, end to end: a real X server (Xvfb) whose
//! clipboard this test owns, a real `pod serve` with the offline model, and
//! `pod attach` in a pseudo-terminal. Its own test binary, because it sets
//! `DISPLAY` for the process (the clipboard's owner is this test).
//!
//! In CI (`CI` set) a missing Xvfb fails the test; `.ci/run` installs it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use portable_pty::CommandBuilder;

mod pty;

use pty::*;

/// An X server on a free display, killed when dropped.
struct Xvfb {
    _server: Server,
    display: String,
}

fn start_xvfb() -> Option<Xvfb> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|dir| dir.join("Xvfb").is_file());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but Xvfb is not installed (.ci/run installs it)"
        );
        eprintln!("skipping: Xvfb is not installed (apt-get install xvfb); CI runs this test");
        return None;
    }
    let number = (60..200)
        .find(|n| !Path::new(&format!("/tmp/.X{n}-lock")).exists())
        .expect("a free X display number");
    let server = Server(
        Command::new("Xvfb")
            .arg(format!(":{number}"))
            .args(["-nolisten", "tcp", "-screen", "0", "640x480x24"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb starts"),
    );
    let socket = PathBuf::from(format!("/tmp/.X11-unix/X{number}"));
    wait_until("Xvfb's socket", || socket.exists());
    Some(Xvfb {
        _server: server,
        display: format!(":{number}"),
    })
}

fn attach(socket: &Path, display: Option<&str>) -> InPty {
    let mut attach = CommandBuilder::new(POD);
    attach.args(["attach", "--socket"]);
    attach.arg(socket);
    attach.env_remove("SSH_CONNECTION");
    attach.env_remove("WAYLAND_DISPLAY");
    match display {
        Some(display) => attach.env("DISPLAY", display),
        None => {
            attach.env_remove("DISPLAY");
            attach.env("SSH_CONNECTION", "192.0.2.1 50000 192.0.2.2 22");
        }
    }
    in_pty(attach)
}

#[test]
fn ctrl_v_attaches_the_clipboard_image_and_says_why_when_it_cannot() {
    let Some(x) = start_xvfb() else { return };
    std::env::set_var("DISPLAY", &x.display);
    let dir = tempfile::tempdir().unwrap();
    let ServedPod {
        server: _server,
        socket,
        data,
    } = serve_offline(dir.path());

    // Text on the clipboard: Ctrl+V says there is no image.
    let mut clipboard = arboard::Clipboard::new().expect("the X clipboard opens");
    clipboard.set_text("just words").unwrap();
    let (parser, _child, mut keys) = attach(&socket, Some(&x.display));
    let mut press = |bytes: &[u8]| {
        keys.write_all(bytes).unwrap();
        keys.flush().unwrap();
    };
    wait_for_screen(&parser, "● connected");
    press(b"\x16");
    wait_for_screen(&parser, "the clipboard holds no image");

    // An image (as a screenshot tool leaves it): a chip, sent as a PNG.
    let pixels: Vec<u8> = (0..64 * 32)
        .flat_map(|i| [i as u8, 0x40, 0x80, 0xff])
        .collect();
    clipboard
        .set_image(arboard::ImageData {
            width: 64,
            height: 32,
            bytes: pixels.into(),
        })
        .unwrap();
    press(b"what is ");
    press(b"\x16");
    wait_for_screen(&parser, "[Image #1 | clipboard.png 64×32 ·");
    press(b"\r");
    wait_for_screen(&parser, "1 image(s): image/png");
    wait_for_screen(&parser, "64×32");
    let inputs = user_inputs(&data);
    let segments = &inputs[0].1["segments"];
    assert_eq!(segments[1]["type"], "image", "{segments}");
    assert_eq!(segments[1]["name"], "clipboard.png");
    assert_eq!(segments[1]["media_type"], "image/png");

    // Over SSH without a forwarded display: it says why, and what to do.
    let (parser, _child, mut keys) = attach(&socket, None);
    wait_for_screen(&parser, "● connected");
    keys.write_all(b"\x16").unwrap();
    keys.flush().unwrap();
    wait_for_screen(
        &parser,
        "over SSH the clipboard you copied to is on the other machine",
    );
}
