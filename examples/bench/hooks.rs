//! Issue #26, hooks: what one no-op `pre_tool_use` hook adds to each tool
//! call, against spawning `bash -c true` (what a hook is: `bash -c
//! COMMAND`) in the same run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};

use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

/// Tool calls in the turn's one tool-using step.
const CALLS: usize = 20;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 3 } else { 11 };
    let plain_dir = tempfile::tempdir_in(&config.tmp)?;
    let hooked_dir = tempfile::tempdir_in(&config.tmp)?;
    let plain = start(plain_dir.path(), false)?;
    let hooked = start(hooked_dir.path(), true)?;
    let (mut without, mut with, mut spawns) = (Vec::new(), Vec::new(), Vec::new());
    // One turn of each first: the processes' first spawns and file reads.
    turn(&plain.socket)?;
    turn(&hooked.socket)?;
    for _ in 0..reps {
        without.push(ms(turn(&plain.socket)?));
        with.push(ms(turn(&hooked.socket)?));
        let t = Instant::now();
        for _ in 0..CALLS {
            bash_true()?;
        }
        spawns.push(ms(t.elapsed()) / CALLS as f64);
    }
    let (without, with, spawn) = (median(&without), median(&with), median(&spawns));
    let per_call = (with - without) / CALLS as f64;
    Ok(vec![Row::at_most(
        "9. one no-op pre_tool_use hook, cost per tool call",
        format!("{spawn:.2} ms spawning bash -c true"),
        format!(
            "{per_call:.2} ms ({CALLS} calls: a turn {with:.1} ms with the hook, {without:.1} ms without)"
        ),
        per_call / spawn,
        "≤ 1.5×",
        1.5,
    )])
}

/// A pod on the script provider whose every turn is one step of `CALLS`
/// `read_file` calls and then a text; with `hook`, its config file holds
/// one `pre_tool_use` hook that does nothing.
fn start(dir: &Path, hook: bool) -> anyhow::Result<PodProcess> {
    let calls: Vec<serde_json::Value> = (0..CALLS)
        .map(|i| {
            serde_json::json!({"tool_call": {
                "id": format!("call_{i}"), "name": "read_file", "arguments": {"path": "a.txt"}
            }})
        })
        .collect();
    let script = format!(
        "{}\n{}\n",
        serde_json::json!({ "events": calls }),
        serde_json::json!({"events": [{"text": "done"}]})
    );
    let script_path = dir.join("script.jsonl");
    std::fs::write(&script_path, script)?;
    std::fs::create_dir_all(dir.join("ws"))?;
    std::fs::write(dir.join("ws/a.txt"), "a small file\n")?;
    let config = dir.join("config/pod");
    std::fs::create_dir_all(&config)?;
    let hooks = if hook {
        "[[hooks]]\nevent = \"pre_tool_use\"\ncommand = \"true\"\n"
    } else {
        ""
    };
    std::fs::write(config.join("config.toml"), hooks)?;
    let script_arg = script_path.to_string_lossy().into_owned();
    let mut pod = PodProcess::spawn(
        dir,
        &[
            "--provider",
            "script",
            "--script",
            &script_arg,
            "--approval",
            "auto",
        ],
    )?;
    pod.wait_listening(Instant::now())?;
    Ok(pod)
}

/// `run` → the turn's `turn_end` entry; fails unless every call ran.
fn turn(socket: &Path) -> anyhow::Result<Duration> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let t = Instant::now();
    writer.write_all(b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n")?;
    let mut results = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            bail!("the pod closed the connection mid-turn");
        }
        if !line.starts_with(b"{\"type\":\"entry\"") {
            continue;
        }
        if crate::sse::find(&line, b"\"kind\":\"tool_results\"").is_some() {
            let text = String::from_utf8_lossy(&line);
            ensure!(
                !text.contains("\"is_error\":true"),
                "a tool call failed: {text}"
            );
            results += text.matches("\"call_id\"").count();
        }
        if crate::sse::find(&line, b"\"kind\":\"turn_end\"").is_some() {
            let took = t.elapsed();
            ensure!(results == CALLS, "{results} of {CALLS} calls ran");
            return Ok(took);
        }
    }
}

/// What a hook is at the least: `bash -c true`, waited for.
fn bash_true() -> anyhow::Result<()> {
    let status = Command::new("bash")
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    ensure!(status.success(), "bash -c true failed");
    Ok(())
}
