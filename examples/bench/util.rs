//! What every scenario shares: statistics, session logs written straight to
//! disk, and a `pod serve` child process.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use pod::protocol::{AssistantItem, LogEntry, LogLine, Segment, ToolResult, TurnEndReason};
use pod::store::pointer;
use uuid::Uuid;

/// Microseconds since the epoch: a clock both the bench and the pod's peers
/// read, so a time embedded by one process can be compared in another.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// Nearest-rank percentile; NaN for no values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A filler text of exactly `len` ASCII bytes.
pub fn filler(len: usize, salt: usize) -> String {
    let word = format!("lorem{salt} ipsum dolor sit amet ");
    word.repeat(len / word.len() + 1)[..len].to_owned()
}

/// The entry kinds of a real session, in a turn's order, with bodies of
/// about `size` bytes.
pub fn realistic_entry(i: usize, size: usize) -> LogEntry {
    match i % 5 {
        0 => LogEntry::UserInput {
            segments: vec![Segment::text(filler(size, i))],
            at: LogEntry::now(),
            turn_id: None,
            request_id: None,
            resolved: Default::default(),
        },
        1 => LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: format!("call_{i}"),
                name: "read_file".into(),
                arguments: serde_json::json!({ "path": filler(size / 4, i) }),
            }],
        },
        2 => LogEntry::ToolResults {
            results: vec![ToolResult {
                call_id: format!("call_{}", i - 1),
                output: filler(size, i),
                is_error: false,
            }],
        },
        3 => LogEntry::AssistantItems {
            items: vec![AssistantItem::Text {
                text: filler(size, i),
            }],
        },
        _ => LogEntry::TurnEnd {
            reason: TurnEndReason::Completed,
            turn_id: None,
            request_id: None,
            usage: None,
            error: None,
        },
    }
}

/// Writes the session log of pod `default` under `data_dir`: a
/// `session_start` and then `entries` (seq 1…). Returns the log's path.
pub fn write_session(
    data_dir: &Path,
    entries: impl Iterator<Item = LogEntry>,
) -> anyhow::Result<PathBuf> {
    let sessions = data_dir.join("sessions");
    let pods = data_dir.join("pods");
    std::fs::create_dir_all(&sessions)?;
    std::fs::create_dir_all(&pods)?;
    let session_id = Uuid::new_v4();
    let path = pod::store::LogFile::path_for(&sessions, session_id);
    let start = LogEntry::SessionStart {
        session_id,
        created_at: LogEntry::now(),
        compacted_from: None,
        forked_from: None,
        provider: None,
        model: None,
        workspace: None,
        parent: None,
        replay_of: None,
    };
    write_log(&path, start, entries)?;
    pointer::write(
        &pointer::path(&pods, "default"),
        pointer::Pointer {
            session_id,
            workspace: None,
            parent: None,
            removed: false,
        },
    )?;
    Ok(path)
}

/// The program `PodProcess` runs as `… serve`: this one unless the run
/// was told otherwise (`--serve-with`).
static SERVE_WITH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Writes a session log at `path`: `start` at seq 0, then `entries`, synced.
pub fn write_log(
    path: &Path,
    start: LogEntry,
    entries: impl Iterator<Item = LogEntry>,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for (seq, entry) in std::iter::once(start).chain(entries).enumerate() {
        serde_json::to_writer(
            &mut out,
            &LogLine {
                seq: seq as u64,
                entry,
            },
        )?;
        out.write_all(b"\n")?;
    }
    out.into_inner()?.sync_all()?;
    Ok(())
}

pub fn serve_with(program: PathBuf) {
    let _ = SERVE_WITH.set(program);
}

/// A `pod serve` child process, killed on drop.
///
/// The child is this very program re-executed with `serve …` (see `main`),
/// which runs `pod::cli::run` exactly as the `pod` binary does: examples
/// cannot depend on the binary being built, and this way the pod always has
/// the bench's build profile.
pub struct PodProcess {
    child: Child,
    pub socket: PathBuf,
}

impl PodProcess {
    /// Starts `pod serve` on `dir/data`, with `dir/ws` as its workspace.
    pub fn spawn(dir: &Path, extra: &[&str]) -> anyhow::Result<PodProcess> {
        Self::spawn_with_env(dir, extra, &[])
    }

    /// [`PodProcess::spawn`] with these variables set (an API key for a
    /// provider that needs one).
    pub fn spawn_with_env(
        dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<PodProcess> {
        let socket = dir.join("run/pod.sock");
        let workspace = dir.join("ws");
        std::fs::create_dir_all(&workspace)?;
        let program = match SERVE_WITH.get() {
            Some(program) => program.clone(),
            None => std::env::current_exe()?,
        };
        let child = Command::new(program)
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--workspace")
            .arg(&workspace)
            // The name the prepared state file has (`pods/default.json`).
            .arg("--name")
            .arg("default")
            .args(extra)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start pod serve")?;
        Ok(PodProcess { child, socket })
    }

    /// Polls until the socket accepts a connection; returns how long that
    /// took from `since`.
    pub fn wait_listening(&mut self, since: Instant) -> anyhow::Result<Duration> {
        let deadline = since + Duration::from_secs(60);
        loop {
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(since.elapsed());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("pod serve exited ({status}) before listening");
            }
            if Instant::now() > deadline {
                bail!("pod serve did not listen within 60 s");
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the pod as `pod stop` would (SIGTERM) and waits for its exit.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
        }
        self.child.wait()?;
        Ok(())
    }

    /// (VmRSS, VmHWM) in bytes, from /proc.
    pub fn rss(&self) -> anyhow::Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Ok((field("VmRSS:"), field("VmHWM:")))
    }
}

impl Drop for PodProcess {
    /// Asks the pod to stop (SIGTERM, as `pod stop` would, so that a pod run
    /// under a profiler writes its profile), then kills it if it has not
    /// stopped within 10 s.
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32);
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::Term);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One row of the results table.
pub struct Row {
    pub scenario: &'static str,
    pub baseline: String,
    pub pod: String,
    pub ratio: f64,
    /// How the ratio is judged, e.g. "≤ 1.3".
    pub bar: &'static str,
    pub pass: bool,
}

/// The bar of a row that has none: it shows what the machine itself does,
/// to read another row's figures against.
pub const CONTEXT: &str = "context, no bar";

impl Row {
    /// A row without a bar (see [`CONTEXT`]).
    pub fn context(scenario: &'static str, baseline: String, pod: String, ratio: f64) -> Row {
        Row {
            scenario,
            baseline,
            pod,
            ratio,
            bar: CONTEXT,
            pass: true,
        }
    }

    /// A row whose ratio must stay at or below `max`.
    pub fn at_most(
        scenario: &'static str,
        baseline: String,
        pod: String,
        ratio: f64,
        bar: &'static str,
        max: f64,
    ) -> Row {
        Row {
            scenario,
            baseline,
            pod,
            ratio,
            bar,
            pass: ratio <= max,
        }
    }

    /// A row whose ratio must reach at least `min`.
    pub fn at_least(
        scenario: &'static str,
        baseline: String,
        pod: String,
        ratio: f64,
        bar: &'static str,
        min: f64,
    ) -> Row {
        Row {
            scenario,
            baseline,
            pod,
            ratio,
            bar,
            pass: ratio >= min,
        }
    }
}

/// The CPU time the hypervisor gave to other guests while this one wanted
/// it (`steal` in `/proc/stat`): on a shared host it stalls every thread of
/// the machine, pod and bench alike, for milliseconds at a time, which is
/// what a p99 over a few seconds sees first.
pub struct Steal {
    steal: u64,
    total: u64,
}

impl Steal {
    pub fn now() -> Steal {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let times: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|t| t.parse().ok())
            .collect();
        Steal {
            steal: times.get(7).copied().unwrap_or(0),
            total: times.iter().take(8).sum(),
        }
    }

    /// The share of CPU time stolen since `self`.
    pub fn share_since(&self) -> f64 {
        let now = Steal::now();
        let total = now.total.saturating_sub(self.total).max(1);
        now.steal.saturating_sub(self.steal) as f64 / total as f64
    }
}

/// Sends one request over the pod's local socket (after its snapshot) and
/// returns the snapshot and the `response` (or `error`) carrying the
/// request's id.
pub fn local_request(
    socket: &Path,
    mut request: serde_json::Value,
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    use std::io::BufRead as _;
    request["request_id"] = "bench".into();
    let stream = UnixStream::connect(socket)?;
    let mut writer = stream.try_clone()?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let snapshot: serde_json::Value = serde_json::from_slice(&line)?;
    writer.write_all(format!("{request}\n").as_bytes())?;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            bail!("the pod closed the connection before answering {request}");
        }
        let frame: serde_json::Value = serde_json::from_slice(&line)?;
        if frame["request_id"] == "bench" {
            if frame["type"] == "error" {
                bail!("the pod refused {request}: {frame}");
            }
            return Ok((snapshot, frame));
        }
    }
}

/// The port of a pod started with `--listen 127.0.0.1:0`, from its
/// greeting.
pub fn listen_port(snapshot: &serde_json::Value) -> anyhow::Result<u16> {
    snapshot["greeting"]["listen"]["address"]
        .as_str()
        .and_then(|a| a.rsplit(':').next()?.parse().ok())
        .context("the greeting names no listen address")
}

/// User + system CPU time of a process so far, in clock ticks (10 ms).
pub fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is the 3rd field, utime the 14th, stime the 15th.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("an unreadable /proc/PID/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(tick(11) + tick(12))
}
