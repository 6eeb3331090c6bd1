//! Issue #29, the pod over a WebSocket (`pod serve --listen`): attach to
//! 10,000 entries over it against attach over the Unix socket; the fan-out
//! load (256 clients × 1,000 deltas/s) over it against the same load over
//! Unix sockets, beside the two transports alone (bare writers, no pod);
//! and what listening costs a pod no remote client uses.

use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use futures::StreamExt as _;
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, Message};

use crate::attach::{read_snapshot, session, ENTRIES};
use crate::clients::{Seen, Watch};
use crate::fanout::{
    bare_writes, join, p99_ms, raw_fan_out, turn, wait_ready, BARE_SNAPSHOT, CLIENTS, RATE,
};
use crate::sse::{Plan, SseServer};
use crate::util::{cpu_ticks, listen_port, local_request, median, ms, now_us, PodProcess, Row};
use crate::Config;

const MIB: f64 = 1024.0 * 1024.0;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let mut rows = attach(config)?;
    rows.extend(fan_out(config)?);
    rows.extend(idle(config)?);
    Ok(rows)
}

/// A pod listening on a free loopback port, with a full token for it.
struct Remote {
    pod: PodProcess,
    port: u16,
    token: String,
}

fn listening(dir: &Path, extra: &[&str]) -> anyhow::Result<Remote> {
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut pod = PodProcess::spawn(dir, &args)?;
    pod.wait_listening(Instant::now())?;
    let (snapshot, response) = local_request(
        &pod.socket,
        serde_json::json!({"type": "issue_token", "label": "bench"}),
    )?;
    let port = listen_port(&snapshot)?;
    let token = response["token"]
        .as_str()
        .context("issue_token answered without a token")?
        .to_owned();
    Ok(Remote { pod, port, token })
}

fn ws_request(port: u16, token: &str) -> anyhow::Result<tungstenite::handshake::client::Request> {
    let mut request = format!("ws://127.0.0.1:{port}/v1/ws").into_client_request()?;
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

/// Connect (TCP + upgrade) → the snapshot message, read whole.
fn ws_snapshot(port: u16, token: &str) -> anyhow::Result<usize> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_nodelay(true)?;
    let (mut ws, _) = tungstenite::client(ws_request(port, token)?, stream)
        .map_err(|e| anyhow::anyhow!("WebSocket handshake: {e}"))?;
    loop {
        match ws.read()? {
            Message::Text(text) => return Ok(text.len()),
            Message::Close(_) => bail!("the pod closed the WebSocket before its snapshot"),
            _ => {}
        }
    }
}

fn attach(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    session(&dir.path().join("data"))?;
    let remote = listening(dir.path(), &["--provider", "offline"])?;
    let local = read_snapshot(&remote.pod.socket)?;
    let parsed: serde_json::Value = serde_json::from_slice(&local)?;
    ensure!(
        parsed["entries"].as_array().map(Vec::len) == Some(ENTRIES + 1),
        "the snapshot does not hold the whole session"
    );
    let (mut unix, mut ws) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        read_snapshot(&remote.pod.socket)?;
        unix.push(ms(t.elapsed()));
        let t = Instant::now();
        let len = ws_snapshot(remote.port, &remote.token)?;
        ws.push(ms(t.elapsed()));
        ensure!(
            len + 1 >= local.len(),
            "the WebSocket snapshot is {len} bytes, the socket's {}",
            local.len()
        );
    }
    let (unix, ws) = (median(&unix), median(&ws));
    Ok(vec![Row::at_most(
        "10. attach 10,000 entries over the WebSocket, connect → snapshot",
        format!("{unix:.2} ms over the Unix socket"),
        format!("{ws:.2} ms over ws://127.0.0.1"),
        ws / unix,
        "≤ 1.5×",
        1.5,
    )])
}

/// One WebSocket client of the fan-out turn: the same checks as the Unix
/// socket's (`clients::Watch`), one frame per text message.
async fn ws_client(
    request: tungstenite::handshake::client::Request,
    ready: Arc<AtomicUsize>,
) -> anyhow::Result<Seen> {
    // tungstenite zeroes its whole read buffer before every read, even one
    // that finds nothing (128 KiB by default): with 256 clients reading a
    // delta each per millisecond, that memset was the client's largest
    // cost, which the Unix client (reading into a reused buffer) does not
    // pay. A delta is under 100 bytes.
    let config = tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096);
    let (mut ws, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config), false).await?;
    let mut watch = Watch::new(ready);
    while let Some(message) = ws.next().await {
        match message? {
            Message::Text(text) if watch.frame(text.as_bytes(), now_us())? => {
                return Ok(watch.seen);
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    bail!("the pod closed the WebSocket mid-turn")
}

/// A turn watched by `CLIENTS` WebSocket clients; the run is sent over the
/// Unix socket, as in the Unix-socket turn.
async fn ws_turn(remote: &Remote) -> anyhow::Result<Vec<Seen>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let ready = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let request = ws_request(remote.port, &remote.token)?;
        tasks.push(tokio::spawn(ws_client(request, Arc::clone(&ready))));
    }
    wait_ready(&ready).await;
    let mut driver = tokio::net::UnixStream::connect(&remote.pod.socket).await?;
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

fn fan_out(config: &Config) -> anyhow::Result<Vec<Row>> {
    let secs = if config.quick { 3 } else { 10 };
    let reps = if config.quick { 1 } else { 3 };
    let sse = SseServer::start(Plan {
        think: Duration::ZERO,
        tokens: RATE as usize * secs,
        interval: Some(Duration::from_secs(1) / RATE),
    })?;
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let mut args = sse.pod_args();
    let max_clients = (CLIENTS + 8).to_string();
    args.extend(["--max-remote-clients", &max_clients]);
    let remote = listening(dir.path(), &args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut unix, mut ws) = (Vec::new(), Vec::new());
    let (mut bare_unix, mut bare_ws) = (Vec::new(), Vec::new());
    let pace = Some(Duration::from_secs(1) / RATE);
    for i in 0..reps {
        unix.push(p99_ms(&rt.block_on(turn(&remote.pod.socket, false))?));
        ws.push(p99_ms(&rt.block_on(ws_turn(&remote))?));
        let socket = dir.path().join(format!("bare{i}.sock"));
        let messages = RATE as usize * secs;
        bare_unix.push(p99_ms(&rt.block_on(raw_fan_out(&socket, messages, pace))?));
        bare_ws.push(p99_ms(&rt.block_on(raw_ws_fan_out(messages, pace))?));
    }
    let (unix, ws) = (median(&unix), median(&ws));
    let (bare_unix, bare_ws) = (median(&bare_unix), median(&bare_ws));
    Ok(vec![
        Row::at_most(
            "10. fan-out 256 clients × 1,000 deltas/s over WebSockets, p99 latency",
            format!("{unix:.2} ms p99 over Unix sockets (same pod)"),
            format!("{ws:.2} ms p99"),
            ws / unix,
            "≤ 1.5×",
            1.5,
        ),
        Row::context(
            "10. the same load from the bench's bare writers, WebSockets against Unix sockets",
            format!("{bare_unix:.2} ms p99, one write per delta per Unix client"),
            format!("{bare_ws:.2} ms p99, one write per delta per WebSocket client"),
            bare_ws / bare_unix,
        ),
    ])
}

/// Two idle pods on empty sessions, one with `--listen`: their resident
/// memory once settled, and the CPU time each uses over a quiet stretch.
fn idle(config: &Config) -> anyhow::Result<Vec<Row>> {
    let quiet = Duration::from_secs(if config.quick { 3 } else { 10 });
    let plain_dir = tempfile::tempdir_in(&config.tmp)?;
    let listen_dir = tempfile::tempdir_in(&config.tmp)?;
    let mut plain = PodProcess::spawn(plain_dir.path(), &["--provider", "offline"])?;
    plain.wait_listening(Instant::now())?;
    let listening = listening(listen_dir.path(), &["--provider", "offline"])?;
    // Settle: the connections of the start are gone.
    std::thread::sleep(Duration::from_secs(1));
    let before = (cpu_ticks(plain.pid())?, cpu_ticks(listening.pod.pid())?);
    std::thread::sleep(quiet);
    let after = (cpu_ticks(plain.pid())?, cpu_ticks(listening.pod.pid())?);
    let (plain_rss, _) = plain.rss()?;
    let (listen_rss, _) = listening.pod.rss()?;
    // /proc counts in USER_HZ, 100 a second on every Linux.
    let tick_ms = 10.0;
    let cpu_ms = |b: u64, a: u64| a.saturating_sub(b) as f64 * tick_ms;
    let (plain_cpu, listen_cpu) = (cpu_ms(before.0, after.0), cpu_ms(before.1, after.1));
    let grown = (listen_rss as f64 - plain_rss as f64) / MIB;
    Ok(vec![
        Row::at_most(
            "10. idle pod with --listen, no remote client: RSS growth",
            format!("{:.1} MiB without --listen", plain_rss as f64 / MIB),
            format!("{:.1} MiB: {grown:+.2} MiB", listen_rss as f64 / MIB),
            grown / 2.0,
            "≤ 1× (+2 MiB)",
            1.0,
        ),
        Row::at_most(
            "10. idle pod with --listen, no remote client: CPU time",
            format!(
                "{plain_cpu:.0} ms without --listen over {} s (one clock tick: {tick_ms:.0} ms)",
                quiet.as_secs()
            ),
            format!("{listen_cpu:.0} ms"),
            listen_cpu / tick_ms,
            "≤ 1 tick",
            1.0,
        ),
    ])
}

/// The WebSocket transport alone, as `fanout::raw_fan_out` is for Unix
/// sockets: a thread that accepts `CLIENTS` WebSocket clients (the
/// handshake by tungstenite), then writes each delta to each client as one
/// unmasked text message with its own `write`, to the same client code as
/// the pod's.
async fn raw_ws_fan_out(messages: usize, pace: Option<Duration>) -> anyhow::Result<Vec<Seen>> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let (go, start) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut clients = Vec::with_capacity(CLIENTS);
        for _ in 0..CLIENTS {
            let (conn, _) = listener.accept()?;
            conn.set_nodelay(true)?;
            let mut ws = tungstenite::accept(conn).map_err(|e| anyhow::anyhow!("{e}"))?;
            ws.send(Message::text(BARE_SNAPSHOT))?;
            clients.push(ws);
        }
        let _ = start.recv();
        let mut streams: Vec<&mut TcpStream> = clients.iter_mut().map(|ws| ws.get_mut()).collect();
        bare_writes(&mut streams, messages, pace, |line| {
            text_message(line.as_bytes())
        })?;
        // The clients close their ends once they have read the last entry.
        for mut ws in clients {
            let _ = ws.read();
        }
        Ok(())
    });
    let ready = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let request = ws_request(port, "x")?;
        tasks.push(tokio::spawn(ws_client(request, Arc::clone(&ready))));
    }
    wait_ready(&ready).await;
    let _ = go.send(());
    let seen = join(tasks).await?;
    server
        .join()
        .map_err(|_| anyhow::anyhow!("the bare WebSocket writer panicked"))??;
    Ok(seen)
}

/// One unfragmented, unmasked text message, as a server sends it
/// (tungstenite's own framing).
fn text_message(payload: &[u8]) -> Vec<u8> {
    use tungstenite::protocol::frame::{coding, Frame};
    let mut message = Vec::with_capacity(payload.len() + 4);
    // Writing into a `Vec` cannot fail.
    Frame::message(
        payload.to_vec(),
        coding::OpCode::Data(coding::Data::Text),
        true,
    )
    .format(&mut message)
    .unwrap_or_default();
    message
}
