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
    let (timings, attaches, transferred) = result?;
    let column = |f: fn(&Timing) -> f64| median(&timings.iter().map(f).collect::<Vec<_>>());
    let (paint, attach) = (column(|t| t.drawn), median(&attaches));
    // Where the time goes, for docs/performance.md: the first two phases
    // are the floor no drawing can remove.
    eprintln!(
        "bench: page phases (medians, ms from pod:connect): first frame {:.1}, snapshot parsed {:.1}, \
         newest entries drawn {:.1}, whole history drawn {:.1}",
        column(|t| t.first_frame),
        column(|t| t.parsed),
        paint,
        column(|t| t.history),
    );
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
) -> anyhow::Result<(Vec<Timing>, Vec<f64>, u64)> {
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
    let (mut timings, mut attaches) = (Vec::new(), Vec::new());
    let page = format!("http://127.0.0.1:{port}/");
    for _ in 0..reps {
        client.goto(&page).await?;
        timings.push(wait_drawn(client).await?);
        let t = Instant::now();
        read_snapshot(&pod.socket)?;
        attaches.push(ms(t.elapsed()));
    }
    Ok((timings, attaches, transferred))
}

/// One load of the page, in ms from its `pod:connect` mark.
struct Timing {
    /// The first WebSocket message (the snapshot) arrived.
    first_frame: f64,
    /// The snapshot parsed (`JSON.parse`), nothing drawn yet.
    parsed: f64,
    /// `pod:snapshot-drawn`: the newest entries in the DOM (the bar's figure).
    drawn: f64,
    /// `pod:history-drawn`: every entry in the DOM.
    history: f64,
}

/// Waits for the page's `pod:snapshot-drawn` mark and checks that the
/// session's last entry with text is in the DOM then; waits for its
/// `pod:history-drawn` mark and checks that every entry is in the DOM once
/// (the oldest too); returns the marks' times from `pod:connect`.
async fn wait_drawn(client: &Client) -> anyhow::Result<Timing> {
    // The last entry with text (the very last is a turn_end), the first.
    let last = filler(40, ENTRIES - 2);
    let first = filler(40, 0);
    let deadline = Instant::now() + WAIT;
    let mut drawn = None;
    loop {
        let v = client
            .execute(
                "const at = (n) => performance.getEntriesByName(n)[0];\
                 const c = at('pod:connect'), d = at('pod:snapshot-drawn');\
                 if (!c || !d) return null;\
                 const since = (n) => at(n) ? at(n).startTime - c.startTime : null;\
                 const log = document.getElementById('log'), kids = log ? log.children : [];\
                 const holds = (from, to, text) => { for (let i = Math.max(0, from); i < Math.min(to, kids.length); i++)\
                   if (kids[i].textContent.includes(text)) return true; return false; };\
                 const h = at('pod:history-drawn');\
                 return { first_frame: since('pod:first-frame'), parsed: since('pod:snapshot-received'),\
                          drawn: since('pod:snapshot-drawn'), entries: d.detail,\
                          last: holds(kids.length - 5, kids.length, arguments[0]),\
                          history: since('pod:history-drawn'),\
                          first: !!h && holds(0, 5, arguments[1]),\
                          blocks: h ? log.querySelectorAll('.user, .assistant').length : null };",
                vec![Value::String(last.clone()), Value::String(first.clone())],
            )
            .await?;
        if let Some(took) = v["drawn"].as_f64() {
            if drawn.is_none() {
                // The first look at it: the newest entries must be there now.
                if v["entries"].as_u64() != Some(ENTRIES as u64 + 1) || v["last"] != true {
                    bail!("the page drew the snapshot without its newest entries: {v}");
                }
                drawn = Some(took);
            }
            if let Some(history) = v["history"].as_f64() {
                // Every user and assistant entry (all but the closing
                // turn_end) once, the oldest among them.
                if v["blocks"].as_u64() != Some(ENTRIES as u64 - 1) || v["first"] != true {
                    bail!("the page drew its history wrong: {v}");
                }
                return Ok(Timing {
                    first_frame: v["first_frame"].as_f64().unwrap_or(f64::NAN),
                    parsed: v["parsed"].as_f64().unwrap_or(f64::NAN),
                    drawn: took,
                    history,
                });
            }
        }
        if Instant::now() > deadline {
            bail!("the page drew no snapshot, or not all its history, within {WAIT:?}");
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
