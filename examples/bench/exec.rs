//! Scenario 19, headless runs (issue #41): what `pod exec` and `pod replay`
//! cost beyond the work they do.
//!
//! - **`pod exec`, cold.** A one-line task answered by the script model, a
//!   fresh data directory: the whole `pod exec` process, spawn to exit,
//!   against the same task the way a user does it without exec — `pod
//!   serve` on a fresh data directory, one `pod send`, a stop (scenario
//!   15's one-shot). exec hosts its pod in its own process, so being private
//!   must cost nothing extra. Peak RSS of the exec process (it holds the pod
//!   and its client) against the serving pod's.
//! - **`pod replay` of 200 turns.** A session whose every turn runs one
//!   `bash` call, recorded live on a running pod; the replay (its own start,
//!   the checkpoint's restore, 200 turns with the model's replies served
//!   from the log and each tool run again for real) against that live run
//!   of the same turns. A context row shows the same commands run bare.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};

use crate::oneshot::one_shot;
use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

/// Turns in the replayed session.
const TURNS: usize = 200;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let scratch = tempfile::tempdir_in(&config.tmp)?;
    let script = scratch.path().join("answer.jsonl");
    std::fs::write(&script, "{\"events\":[{\"text\":\"done\"}]}\n")?;
    let script_args = ["--script", path_str(&script)?];

    let (mut exec, mut serve_send) = (Vec::new(), Vec::new());
    let (mut exec_peak, mut serve_peak) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let fresh = tempfile::tempdir_in(&config.tmp)?;
        let shot = one_shot(fresh.path(), &script_args)?;
        serve_send.push(ms(shot.total));
        serve_peak.push(shot.peak as f64);
        let fresh = tempfile::tempdir_in(&config.tmp)?;
        let t = Instant::now();
        let output = pod_exec(fresh.path(), &script, None)?;
        exec.push(ms(t.elapsed()));
        ensure!(
            String::from_utf8_lossy(&output.stdout).trim() == "done",
            "pod exec printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
        // The peak in a run of its own: GNU time's wait4 reads it, and its
        // own start would blur the timing above.
        let fresh = tempfile::tempdir_in(&config.tmp)?;
        let output = pod_exec(fresh.path(), &script, Some("/usr/bin/time"))?;
        exec_peak.push(max_rss_kib(&output)? as f64 * 1024.0);
    }
    let (exec, serve_send) = (median(&exec), median(&serve_send));
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let (exec_peak, serve_peak) = (median(&exec_peak), median(&serve_peak));

    let (live, replay, bare) = replay_rows(config, reps.min(5))?;
    Ok(vec![
        Row::at_most(
            "19. pod exec, one-line task, cold (fresh data directory)",
            format!("{serve_send:.1} ms pod serve + pod send + stop, fresh data directory"),
            format!("{exec:.1} ms pod exec, spawn → exit"),
            exec / serve_send,
            "≤ 1.5×",
            1.5,
        ),
        Row::at_most(
            "19. pod exec, peak RSS",
            format!("{:.1} MiB the pod serve of the row above", mib(serve_peak)),
            format!(
                "{:.1} MiB the pod exec process (pod and client)",
                mib(exec_peak)
            ),
            exec_peak / serve_peak,
            "≤ 1.2×",
            1.2,
        ),
        Row::at_most(
            "19. pod replay of a 200-turn session (one bash call a turn)",
            format!("{live:.0} ms the session's live run on a running pod"),
            format!("{replay:.0} ms pod replay, spawn → exit"),
            replay / live,
            "≤ 1.2×",
            1.2,
        ),
        Row::context(
            "19. the same 200 commands, bash -c each, no pod",
            format!("{bare:.0} ms bare"),
            format!("{live:.0} ms live run in a pod"),
            live / bare,
        ),
    ])
}

/// Records a [`TURNS`]-turn session live (`reps` times, each on a fresh
/// pod), replays each, and runs its commands bare: the medians, in ms.
fn replay_rows(config: &Config, reps: usize) -> anyhow::Result<(f64, f64, f64)> {
    let scratch = tempfile::tempdir_in(&config.tmp)?;
    let script = scratch.path().join("turns.jsonl");
    let mut lines = String::new();
    for i in 0..TURNS {
        let call = serde_json::json!({"events": [{"tool_call": {
            "id": format!("c{i}"), "name": "bash",
            "arguments": {"command": command(i)}}}]});
        lines.push_str(&format!(
            "{call}\n{{\"events\":[{{\"text\":\"turn {i}\"}}]}}\n"
        ));
    }
    std::fs::write(&script, lines)?;
    let args = ["--script", path_str(&script)?, "--approval", "auto"];
    let (mut live, mut replay, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let dir = tempfile::tempdir_in(&config.tmp)?;
        let mut pod = PodProcess::spawn(dir.path(), &args)?;
        pod.wait_listening(Instant::now())?;
        live.push(ms(run_turns(&pod.socket)?));
        pod.stop()?;
        let session = only_session(&dir.path().join("data/sessions"))?;
        let t = Instant::now();
        let output = pod_command(dir.path())?
            .arg("replay")
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg(&session)
            .output()
            .context("cannot run pod replay")?;
        replay.push(ms(t.elapsed()));
        ensure!(
            output.status.success(),
            "pod replay failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let ws = tempfile::tempdir_in(&config.tmp)?;
        let t = Instant::now();
        for i in 0..TURNS {
            let status = Command::new("bash")
                .arg("-c")
                .arg(command(i))
                .current_dir(ws.path())
                .stdout(Stdio::null())
                .status()?;
            ensure!(status.success(), "bash -c {} failed", command(i));
        }
        bare.push(ms(t.elapsed()));
    }
    Ok((median(&live), median(&replay), median(&bare)))
}

/// Turn `i`'s command: a small edit and a read of what it changed, so that
/// every turn has a checkpoint to take and a result to compare.
fn command(i: usize) -> String {
    format!("echo line {i} >> notes.txt && wc -l < notes.txt")
}

/// Sends [`TURNS`] runs, each after the last one's `turn_end`: the session's
/// live run, timed.
fn run_turns(socket: &Path) -> anyhow::Result<Duration> {
    let stream = UnixStream::connect(socket)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let t = Instant::now();
    for _ in 0..TURNS {
        writer.write_all(
            b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n",
        )?;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                bail!("the pod closed the connection mid-turn");
            }
            if line.starts_with(b"{\"type\":\"entry\"")
                && crate::sse::find(&line, b"\"kind\":\"turn_end\"").is_some()
            {
                ensure!(
                    crate::sse::find(&line, b"\"reason\":\"completed\"").is_some(),
                    "a turn did not complete: {}",
                    String::from_utf8_lossy(&line)
                );
                break;
            }
        }
    }
    Ok(t.elapsed())
}

/// The id of the one session a data directory's pod recorded.
fn only_session(sessions: &Path) -> anyhow::Result<String> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(sessions)? {
        let name = entry?.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) {
            ids.push(id.to_owned());
        }
    }
    match ids.as_slice() {
        [id] => Ok(id.clone()),
        _ => bail!(
            "expected one session in {}, found {ids:?}",
            sessions.display()
        ),
    }
}

/// `pod exec` of the one-line task on `dir/data` and `dir/ws`, optionally
/// under `wrapper` (GNU time), to its exit.
fn pod_exec(dir: &Path, script: &Path, wrapper: Option<&str>) -> anyhow::Result<Output> {
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace)?;
    let mut command = match wrapper {
        Some(time) => {
            let mut command = Command::new(time);
            command.args(["-f", "%M"]).arg(std::env::current_exe()?);
            command
        }
        None => Command::new(std::env::current_exe()?),
    };
    command
        .arg("exec")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--workspace")
        .arg(&workspace)
        .arg("--script")
        .arg(script)
        .arg("say done");
    with_bench_env(&mut command, dir);
    let output = command.output().context("cannot run pod exec")?;
    ensure!(
        output.status.success(),
        "pod exec failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}

/// This program re-executed as `pod`, with the environment the bench's
/// pods get.
fn pod_command(dir: &Path) -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe()?);
    with_bench_env(&mut command, dir);
    Ok(command)
}

fn with_bench_env(command: &mut Command, dir: &Path) {
    command
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("POD_SOCKET")
        .env_remove("POD_NAME")
        .env_remove("POD_WORKSPACE")
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null());
}

/// GNU time's `%M` (peak RSS in KiB): the last line of stderr.
fn max_rss_kib(output: &Output) -> anyhow::Result<u64> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("no peak RSS from /usr/bin/time in {stderr:?}"))
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().context("a scratch path that is not UTF-8")
}
