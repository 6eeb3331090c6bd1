//! Issue #23, the web client: the page's first paint of a 10,000-entry
//! session in headless Chromium (its own marks: the WebSocket's creation →
//! the snapshot's last entry in the DOM) against the attach row's client
//! reading the same session's snapshot over the Unix socket; and the bytes
//! a first visit transfers for the page (HTML, JS, CSS).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

use crate::attach::{read_snapshot, session, ENTRIES};
use crate::util::{filler, listen_port, local_request, median, ms, PodProcess, Row};
use crate::Config;

const WAIT: Duration = Duration::from_secs(60);

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 3 } else { 9 };
    let (chromium, driver) = match (on_path("chromium"), on_path("chromedriver")) {
        (Some(c), Some(d)) => (c, d),
        _ => bail!("chromium and chromedriver are not both on PATH (apt-get install chromium chromium-driver)"),
    };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    session(&dir.path().join("data"))?;
    let mut pod = PodProcess::spawn(
        dir.path(),
        &["--provider", "offline", "--listen", "127.0.0.1:0"],
    )?;
    pod.wait_listening(Instant::now())?;
    let (snapshot, pairing) = local_request(&pod.socket, json!({"type": "issue_pairing"}))?;
    let port = listen_port(&snapshot)?;
    let url = pairing["url"]
        .as_str()
        .context("issue_pairing answered without a url")?
        .to_owned();

    let driver_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let driver = Driver(
        Command::new(driver)
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start chromedriver")?,
    );
    let profile = tempfile::tempdir_in(&config.tmp)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", driver_port)).is_err() {
            if Instant::now() > deadline {
                bail!("chromedriver did not listen within {WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let client = browser(
            driver_port,
            &chromium,
            &profile.path().display().to_string(),
        )
        .await?;
        let measured = measure(&client, &pod, &url, port, reps).await;
        let _ = client.close().await;
        measured
    });
    drop(driver);
    let (paints, attaches, transferred) = result?;
    let (paint, attach) = (median(&paints), median(&attaches));
    Ok(vec![
        Row::at_most(
            "11. web page first paint, 10,000 entries (connect → last entry in the DOM)",
            format!("{attach:.2} ms the attach row's client over the Unix socket"),
            format!("{paint:.1} ms headless Chromium"),
            paint / attach,
            "≤ 3×",
            3.0,
        ),
        Row::at_most(
            "11. web page transferred on a first visit (HTML + JS + CSS)",
            "300 KB".to_owned(),
            format!("{:.0} KB", transferred as f64 / 1024.0),
            transferred as f64 / (300.0 * 1024.0),
            "≤ 1× (300 KB)",
            1.0,
        ),
    ])
}

/// Pairs through `url`, then reloads the page `reps` times; each time the
/// page's own marks give connect → snapshot drawn, and the attach row's
/// client reads the snapshot over the Unix socket beside it.
async fn measure(
    client: &Client,
    pod: &PodProcess,
    url: &str,
    port: u16,
    reps: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, u64)> {
    client.goto(url).await?;
    wait_drawn(client).await?;
    // Resources of this first visit: the page's own files, not the pairing
    // request or the WebSocket.
    let transferred = client
        .execute(
            "const own = (e) => !new URL(e.name).pathname.startsWith('/v1/');\
             const nav = performance.getEntriesByType('navigation')[0];\
             return nav.transferSize + performance.getEntriesByType('resource')\
               .filter(own).reduce((n, e) => n + e.transferSize, 0);",
            vec![],
        )
        .await?
        .as_u64()
        .context("no transfer sizes")?;
    let (mut paints, mut attaches) = (Vec::new(), Vec::new());
    let page = format!("http://127.0.0.1:{port}/");
    for _ in 0..reps {
        client.goto(&page).await?;
        paints.push(wait_drawn(client).await?);
        let t = Instant::now();
        read_snapshot(&pod.socket)?;
        attaches.push(ms(t.elapsed()));
    }
    Ok((paints, attaches, transferred))
}

/// Waits for the page's `pod:snapshot-drawn` mark, checks that the
/// session's last entry with text is in the DOM, and returns the time from
/// the page's `pod:connect` mark to it, in ms.
async fn wait_drawn(client: &Client) -> anyhow::Result<f64> {
    // The last entry with text (the very last is a turn_end).
    let last = filler(40, ENTRIES - 2);
    let deadline = Instant::now() + WAIT;
    loop {
        let v = client
            .execute(
                "const c = performance.getEntriesByName('pod:connect')[0];\
                 const d = performance.getEntriesByName('pod:snapshot-drawn')[0];\
                 if (!c || !d) return null;\
                 const log = document.getElementById('log');\
                 return { ms: d.startTime - c.startTime, entries: d.detail,\
                          last: !!log && log.textContent.includes(arguments[0]) };",
                vec![Value::String(last.clone())],
            )
            .await?;
        if let Some(took) = v["ms"].as_f64() {
            if v["entries"].as_u64() != Some(ENTRIES as u64 + 1) || v["last"] != true {
                bail!("the page drew the snapshot without the whole session: {v}");
            }
            return Ok(took);
        }
        if Instant::now() > deadline {
            bail!("the page drew no snapshot within {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Headless Chromium at a desktop size with a fresh profile, as tests/web.rs
/// starts it.
async fn browser(port: u16, chromium: &std::path::Path, profile: &str) -> anyhow::Result<Client> {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([format!("--user-data-dir={profile}")])
    .collect::<Vec<_>>();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": chromium, "args": args }),
    );
    Ok(
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await?,
    )
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// chromedriver, killed on drop.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
