//! Helpers shared by the hardening tests: child processes that cannot
//! outlive a failed test, and commands that must exit rather than serve.
#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when the test ends, pass or fail.
pub struct Running(Option<Child>);

impl Running {
    pub fn new(child: Child) -> Running {
        Running(Some(child))
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child was already taken")
    }

    /// Waits for the (exited) child and collects its output.
    pub fn output(mut self) -> Output {
        let child = self.0.take().expect("the child was already taken");
        child.wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a command that must exit by itself (a refused `pod serve`, a
/// client): if it is still running after `within`, it is killed and the
/// test fails saying so, instead of hanging.
pub fn exits_within(cmd: &mut Command, within: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running::new(child);
    let deadline = Instant::now() + within;
    while running.child().try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "{cmd:?} was still running after {within:?} (it should have refused and exited)"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    running.output()
}
