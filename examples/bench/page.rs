//! Issues #23 and #38, the web client: the page's first paint of a
//! 10,000-entry session in headless Chromium (its own marks: the
//! WebSocket's creation → the newest entries in the DOM) against the same
//! page's first paint of a 40-entry session — with tail snapshots it must
//! not grow with the history — and the bytes the page receives before its
//! first paint on a reload (its files, revalidated, and the snapshot).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

use crate::attach::{session_of, ENTRIES};
use crate::util::{filler, listen_port, local_request, median, PodProcess, Row};
use crate::Config;

const WAIT: Duration = Duration::from_secs(60);

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 3 } else { 9 };
    let (chromium, driver) = match (on_path("chromium"), on_path("chromedriver")) {
        (Some(c), Some(d)) => (c, d),
        _ => bail!("chromium and chromedriver are not both on PATH (apt-get install chromium chromium-driver)"),
    };
    let long = PagePod::start(config, ENTRIES)?;
    let short = PagePod::start(config, SHORT_ENTRIES)?;

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
        let measured = async {
            let long = measure(&client, &long, reps).await?;
            let short = measure(&client, &short, reps).await?;
            Ok::<_, anyhow::Error>((long, short))
        }
        .await;
        let _ = client.close().await;
        measured
    });
    drop(driver);
    let ((long, received), (short, _)) = result?;
    let column = |timings: &[Timing], f: fn(&Timing) -> f64| {
        median(&timings.iter().map(f).collect::<Vec<_>>())
    };
    let (paint, floor) = (column(&long, |t| t.drawn), column(&short, |t| t.drawn));
    // Where the time goes, for docs/performance.md.
    eprintln!(
        "bench: page phases, 10,000 entries (medians, ms from pod:connect): first frame {:.1}, \
         snapshot parsed {:.1}, newest entries drawn {:.1}; 40 entries: drawn {:.1}",
        column(&long, |t| t.first_frame),
        column(&long, |t| t.parsed),
        paint,
        floor,
    );
    Ok(vec![
        Row::at_most(
            "11. web first paint, 10,000 entries vs 40 (connect → newest entries in the DOM)",
            format!("{floor:.1} ms the same page, a 40-entry session"),
            format!("{paint:.1} ms"),
            paint / floor,
            "≤ 1.5×",
            1.5,
        ),
        Row::at_most(
            "11. web bytes received before first paint, 10,000 entries (reload)",
            "256 KB".to_owned(),
            format!("{:.0} KB", received as f64 / 1024.0),
            received as f64 / (256.0 * 1024.0),
            "≤ 1× (256 KB)",
            1.0,
        ),
    ])
}

/// Entries of the short session whose first paint is the floor.
const SHORT_ENTRIES: usize = 40;

/// A pod serving a session of some length over `--listen`, and a pairing
/// link to it.
struct PagePod {
    _dir: tempfile::TempDir,
    _pod: PodProcess,
    url: String,
    port: u16,
    entries: usize,
}

impl PagePod {
    fn start(config: &Config, entries: usize) -> anyhow::Result<PagePod> {
        let dir = tempfile::tempdir_in(&config.tmp)?;
        session_of(&dir.path().join("data"), entries)?;
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
        Ok(PagePod {
            _dir: dir,
            _pod: pod,
            url,
            port,
            entries,
        })
    }
}

/// Pairs through the pod's link, then reloads the page `reps` times; each
/// time the page's own marks give connect → newest entries drawn. Also
/// answers the bytes the last reload received before its first paint: its
/// files (revalidated: the server sends an `ETag`) and the snapshot.
async fn measure(
    client: &Client,
    pod: &PagePod,
    reps: usize,
) -> anyhow::Result<(Vec<Timing>, u64)> {
    client.goto(&pod.url).await?;
    wait_drawn(client, pod.entries).await?;
    let page = format!("http://127.0.0.1:{}/", pod.port);
    let mut timings = Vec::new();
    for _ in 0..reps {
        client.goto(&page).await?;
        timings.push(wait_drawn(client, pod.entries).await?);
    }
    let received = client
        .execute(
            "const own = (e) => !new URL(e.name).pathname.startsWith('/v1/');\
             const nav = performance.getEntriesByType('navigation')[0];\
             const frame = performance.getEntriesByName('pod:first-frame')[0];\
             return nav.transferSize + performance.getEntriesByType('resource')\
               .filter(own).reduce((n, e) => n + e.transferSize, 0) + (frame ? frame.detail : 0);",
            vec![],
        )
        .await?
        .as_u64()
        .context("no transfer sizes")?;
    Ok((timings, received))
}

/// One load of the page, in ms from its `pod:connect` mark.
struct Timing {
    /// The first WebSocket message (the snapshot) arrived.
    first_frame: f64,
    /// The snapshot parsed (`JSON.parse`), nothing drawn yet.
    parsed: f64,
    /// `pod:snapshot-drawn`: the newest entries in the DOM (the bar's figure).
    drawn: f64,
}

/// Waits for the page's `pod:snapshot-drawn` mark and checks that the
/// session's last entry with text is in the DOM then; returns the marks'
/// times from `pod:connect`.
async fn wait_drawn(client: &Client, entries: usize) -> anyhow::Result<Timing> {
    // The last entry with text (the very last is a turn_end).
    let last = filler(40, entries - 2);
    let deadline = Instant::now() + WAIT;
    loop {
        let v = client
            .execute(
                "const at = (n) => performance.getEntriesByName(n)[0];\
                 const c = at('pod:connect'), d = at('pod:snapshot-drawn');\
                 if (!c || !d) return null;\
                 const since = (n) => at(n) ? at(n).startTime - c.startTime : null;\
                 const log = document.getElementById('log'), kids = log ? log.children : [];\
                 let last = false;\
                 for (let i = Math.max(0, kids.length - 5); i < kids.length; i++)\
                   if (kids[i].textContent.includes(arguments[0])) last = true;\
                 return { first_frame: since('pod:first-frame'), parsed: since('pod:snapshot-received'),\
                          drawn: since('pod:snapshot-drawn'), last };",
                vec![Value::String(last.clone())],
            )
            .await?;
        if let Some(drawn) = v["drawn"].as_f64() {
            if v["last"] != true {
                bail!("the page drew the snapshot without its newest entries: {v}");
            }
            return Ok(Timing {
                first_frame: v["first_frame"].as_f64().unwrap_or(f64::NAN),
                parsed: v["parsed"].as_f64().unwrap_or(f64::NAN),
                drawn,
            });
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
