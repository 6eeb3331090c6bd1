//! Scenario 15, the one-shot as a user runs it: `pod serve`, one `pod
//! send`, stop — the whole process tree timed from outside, from spawning
//! the server to its exit. Measured on a fresh data directory (cold) and
//! on one used before (primed), against the same parts measured apart (a
//! primed start, one turn to a running pod, a stop), so what a one-shot
//! costs beyond its parts shows as a ratio. A second turn's cost against
//! the first's, and a one-shot pod's peak memory against an idle pod's, in
//! the same run.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};

use crate::sse::{Plan, SseServer};
use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

/// A short answer, as fast as the server can write it.
const PLAN: Plan = Plan {
    think: Duration::ZERO,
    tokens: 20,
    interval: None,
};

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let sse = SseServer::start(PLAN)?;
    let args = sse.pod_args();
    let primed = tempfile::tempdir_in(&config.tmp)?;
    one_shot(primed.path(), &args)?;
    let (mut cold, mut warm, mut parts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let (mut one_shot_peak, mut idle_peak) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let fresh = tempfile::tempdir_in(&config.tmp)?;
        cold.push(ms(one_shot(fresh.path(), &args)?.total));
        let shot = one_shot(primed.path(), &args)?;
        warm.push(ms(shot.total));
        one_shot_peak.push(shot.peak as f64);
        // The parts, apart: a primed start, a turn to a pod already
        // running (its second: the first pays the session's first turn),
        // and the stop.
        let t = Instant::now();
        let mut pod = PodProcess::spawn(primed.path(), &args)?;
        pod.wait_listening(t)?;
        let start = t.elapsed();
        let turn_1 = send(&pod)?;
        let turn_2 = send(&pod)?;
        first.push(ms(turn_1));
        second.push(ms(turn_2));
        let t = Instant::now();
        pod.stop()?;
        parts.push(ms(start + turn_2 + t.elapsed()));
        // An idle pod, for as long as a one-shot's pod lived.
        let idle = tempfile::tempdir_in(&config.tmp)?;
        let t = Instant::now();
        let mut pod = PodProcess::spawn(idle.path(), &args)?;
        pod.wait_listening(t)?;
        std::thread::sleep(shot.total.saturating_sub(t.elapsed()));
        idle_peak.push(pod.rss()?.1 as f64);
        pod.stop()?;
    }
    let (cold, warm, parts) = (median(&cold), median(&warm), median(&parts));
    let (first, second) = (median(&first), median(&second));
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let (one_shot_peak, idle_peak) = (median(&one_shot_peak), median(&idle_peak));
    Ok(vec![
        Row::at_most(
            "15. one-shot, cold (fresh data directory) vs primed",
            format!("{warm:.1} ms serve + send + stop, primed data directory"),
            format!("{cold:.1} ms on a fresh one"),
            cold / warm,
            "≤ 1.2×",
            1.2,
        ),
        Row::at_most(
            "15. one-shot, cold vs its parts measured apart",
            format!("{parts:.1} ms primed start → listening + one warm turn + stop"),
            format!("{cold:.1} ms cold one-shot"),
            cold / parts,
            "≤ 1.5×",
            1.5,
        ),
        Row::at_most(
            "15. a running pod's second turn vs its first (pod send, whole)",
            format!("{first:.1} ms first turn"),
            format!("{second:.1} ms second turn"),
            second / first,
            "≤ 1.1×",
            1.1,
        ),
        Row::at_most(
            "15. one-shot, pod peak RSS vs an idle pod's",
            format!("{:.1} MiB idle, as long", mib(idle_peak)),
            format!("{:.1} MiB", mib(one_shot_peak)),
            one_shot_peak / idle_peak,
            "≤ 1.1×",
            1.1,
        ),
    ])
}

pub struct Shot {
    pub total: Duration,
    /// The pod's peak RSS (VmHWM) once the turn had ended.
    pub peak: u64,
}

/// `pod serve` on `dir`, one `pod send` once it listens, then a stop; timed
/// from the spawn to the server's exit.
pub fn one_shot(dir: &std::path::Path, args: &[&str]) -> anyhow::Result<Shot> {
    let t = Instant::now();
    let mut pod = PodProcess::spawn(dir, args)?;
    pod.wait_listening(t)?;
    send(&pod)?;
    let peak = pod.rss()?.1;
    pod.stop()?;
    Ok(Shot {
        total: t.elapsed(),
        peak,
    })
}

/// `pod send --socket … hi` (this program re-executed as `pod`) to its
/// exit, when the turn has ended.
fn send(pod: &PodProcess) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let status = Command::new(std::env::current_exe()?)
        .arg("send")
        .arg("--socket")
        .arg(&pod.socket)
        .arg("hi")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("cannot run pod send")?;
    ensure!(status.success(), "pod send failed: {status}");
    Ok(t.elapsed())
}
