//! Scenario 3, fan-out: 256 clients while the model streams 1,000 deltas a
//! second, beside the machine itself doing the least that pattern asks (one
//! `write` per delta per client, at the same pace); the same with one client
//! that never reads; and the highest delta rate against one `write` per
//! message per client.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::clients::{client, Seen};
use crate::sse::{Plan, SseServer};
use crate::util::{median, now_us, percentile, PodProcess, Row, Steal};
use crate::Config;

pub const CLIENTS: usize = 256;
pub const RATE: u32 = 1000;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let secs = if config.quick { 3 } else { 10 };
    let reps = if config.quick { 1 } else { 3 };
    let burst = if config.quick { 2000 } else { 5000 };
    let paced = Plan {
        think: Duration::ZERO,
        tokens: RATE as usize * secs,
        interval: Some(Duration::from_secs(1) / RATE),
    };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let sse = SseServer::start(paced)?;
    let args = sse.pod_args();
    let mut pod = PodProcess::spawn(dir.path(), &args)?;
    pod.wait_listening(Instant::now())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    let mut calm = Vec::new();
    let mut with_stalled = Vec::new();
    let mut floor = Vec::new();
    let steal_before = Steal::now();
    for i in 0..reps {
        calm.push(p99_ms(&rt.block_on(turn(&pod.socket, false))?));
        with_stalled.push(p99_ms(&rt.block_on(turn(&pod.socket, true))?));
        let socket = dir.path().join(format!("paced{i}.sock"));
        let paced = Some(Duration::from_secs(1) / RATE);
        floor.push(p99_ms(&rt.block_on(raw_fan_out(
            &socket,
            RATE as usize * secs,
            paced,
        ))?));
    }
    let steal = steal_before.share_since();

    sse.set_plan(Plan {
        think: Duration::ZERO,
        tokens: burst,
        interval: None,
    });
    let mut pod_rates = Vec::new();
    let mut raw_rates = Vec::new();
    for i in 0..reps {
        let seen = rt.block_on(turn(&pod.socket, false))?;
        pod_rates.push(rate(&seen, burst)?);
        let socket = dir.path().join(format!("raw{i}.sock"));
        let seen = rt.block_on(raw_fan_out(&socket, burst, None))?;
        raw_rates.push(rate(&seen, burst)?);
    }
    let calm = median(&calm);
    let floor = median(&floor);
    let with_stalled = median(&with_stalled);
    let (pod_rate, raw_rate) = (median(&pod_rates), median(&raw_rates));
    let change = (with_stalled - calm).abs() / calm;
    Ok(vec![
        Row::at_most(
            "3. fan-out 256 clients × 1,000 deltas/s, p99 latency",
            format!(
                "{floor:.2} ms p99, the bench's bare writer (one write per delta per client; \
                 {:.1}% of CPU time stolen by the hypervisor meanwhile)",
                steal * 100.0
            ),
            format!("{calm:.2} ms p99"),
            calm / floor,
            "≤ 1.3×",
            1.3,
        ),
        Row::at_most(
            "3. fan-out with one client not reading, p99 change",
            format!("{calm:.2} ms p99 without it"),
            format!("{with_stalled:.2} ms p99 with it"),
            change,
            "< 0.2",
            0.2,
        ),
        Row::at_least(
            "3. fan-out ceiling, deltas/s to 256 clients",
            format!("{raw_rate:.0}/s one write per message per client"),
            format!("{pod_rate:.0}/s"),
            pod_rate / raw_rate,
            "≥ 15×",
            15.0,
        ),
    ])
}

/// One turn watched by `CLIENTS` clients (and, with `stalled`, one more that
/// never reads): every client must see every entry, in order.
pub async fn turn(socket: &Path, stalled: bool) -> anyhow::Result<Vec<Seen>> {
    let ready = Arc::new(AtomicUsize::new(0));
    let tasks = spawn_clients(socket.to_owned(), Arc::clone(&ready));
    let _stalled = if stalled {
        Some(std::os::unix::net::UnixStream::connect(socket)?)
    } else {
        None
    };
    wait_ready(&ready).await;
    let mut driver = tokio::net::UnixStream::connect(socket).await?;
    driver
        .write_all(b"{\"type\":\"run\",\"segments\":[{\"type\":\"text\",\"text\":\"go\"}]}\n")
        .await?;
    let drain = tokio::spawn(async move {
        let mut sink = vec![0u8; 64 << 10];
        while matches!(driver.read(&mut sink).await, Ok(n) if n > 0) {}
    });
    let seen = join(tasks).await;
    drain.abort();
    seen
}

fn spawn_clients(
    socket: PathBuf,
    ready: Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<Seen>>> {
    (0..CLIENTS)
        .map(|_| {
            let socket = socket.clone();
            let ready = Arc::clone(&ready);
            tokio::spawn(async move { client(&socket, ready).await })
        })
        .collect()
}

pub async fn wait_ready(ready: &AtomicUsize) {
    while ready.load(Ordering::Acquire) < CLIENTS {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Lets the pod register the last connections (and a stalled one).
    tokio::time::sleep(Duration::from_millis(50)).await;
}

pub async fn join(
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<Seen>>>,
) -> anyhow::Result<Vec<Seen>> {
    let mut seen = Vec::with_capacity(tasks.len());
    for task in tasks {
        seen.push(task.await.context("a client task panicked")??);
    }
    Ok(seen)
}

/// What the bare writers send first and last: the smallest snapshot, and
/// the entry that ends the turn.
pub const BARE_SNAPSHOT: &str = "{\"type\":\"snapshot\",\"session_id\":\"raw\",\"entries\":\
                                 [{\"seq\":0,\"entry\":{\"kind\":\"session_start\"}}],\
                                 \"in_flight\":null}";
pub const BARE_TURN_END: &str =
    "{\"type\":\"entry\",\"session_id\":\"raw\",\"seq\":1,\"entry\":{\"kind\":\"turn_end\"}}";

/// What a bare writer sends after the snapshot: `messages` deltas, each
/// stamped as it goes, one `write` per delta per client — as fast as it
/// can, or one per `pace` — then the turn's end. `encode` makes a line one
/// frame of the transport.
pub fn bare_writes<W: Write>(
    conns: &mut [W],
    messages: usize,
    pace: Option<Duration>,
    encode: impl Fn(&str) -> Vec<u8>,
) -> std::io::Result<()> {
    let started = Instant::now();
    for i in 0..messages {
        if let Some(pace) = pace {
            let due = started + pace * i as u32;
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        let delta = format!("{{\"type\":\"text_delta\",\"text\":\"T{} \"}}", now_us());
        let frame = encode(&delta);
        for conn in conns.iter_mut() {
            conn.write_all(&frame)?;
        }
    }
    let end = encode(BARE_TURN_END);
    for conn in conns.iter_mut() {
        conn.write_all(&end)?;
    }
    Ok(())
}

/// The baseline: a server thread that writes each delta frame to each
/// client with its own `write`, in turn, to the same client code — as fast
/// as it can, or one delta per `pace`.
pub async fn raw_fan_out(
    socket: &Path,
    messages: usize,
    pace: Option<Duration>,
) -> anyhow::Result<Vec<Seen>> {
    let listener = UnixListener::bind(socket)?;
    let (go, start) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let mut conns = Vec::with_capacity(CLIENTS);
        for _ in 0..CLIENTS {
            let (mut conn, _) = listener.accept()?;
            conn.write_all(format!("{BARE_SNAPSHOT}\n").as_bytes())?;
            conns.push(conn);
        }
        let _ = start.recv();
        bare_writes(&mut conns, messages, pace, |line| {
            format!("{line}\n").into_bytes()
        })
    });
    let ready = Arc::new(AtomicUsize::new(0));
    let tasks = spawn_clients(socket.to_owned(), Arc::clone(&ready));
    wait_ready(&ready).await;
    let _ = go.send(());
    let seen = join(tasks).await?;
    server
        .join()
        .map_err(|_| anyhow::anyhow!("the raw fan-out server panicked"))??;
    Ok(seen)
}

/// Deltas per second that reached every client: `messages` over the time
/// from the first send to the last arrival at the slowest client.
fn rate(seen: &[Seen], messages: usize) -> anyhow::Result<f64> {
    for s in seen {
        ensure!(
            s.latencies_us.len() == messages,
            "a client got {} of {messages} deltas",
            s.latencies_us.len()
        );
    }
    let first = seen.iter().map(|s| s.first_stamp_us).min().unwrap_or(0);
    let last = seen.iter().map(|s| s.last_delta_us).max().unwrap_or(0);
    Ok(messages as f64 / ((last.saturating_sub(first)).max(1) as f64 / 1e6))
}

/// p99 of every delta's latency over every client, in ms.
pub fn p99_ms(seen: &[Seen]) -> f64 {
    let all: Vec<f64> = seen
        .iter()
        .flat_map(|s| s.latencies_us.iter().map(|&us| f64::from(us) / 1e3))
        .collect();
    percentile(&all, 99.0)
}
