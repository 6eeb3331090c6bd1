//! Issue #27, the agent's craft: what a background job printing 100 MB
//! costs the pod, against `cat` writing the same bytes to a file; and
//! `web_fetch` of a 1 MB page from a local server, against `curl` fetching
//! it plus the HTML-to-Markdown conversion alone. Both in the same run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

use crate::util::{cpu_ticks, median, ms, PodProcess, Row};
use crate::Config;

/// What the job prints.
const JOB_BYTES: usize = 100_000_000;
/// The fetched page.
const PAGE_BYTES: usize = 1_000_000;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 2 } else { 5 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let source = dir.path().join("source.bin");
    std::fs::write(&source, vec![b'x'; JOB_BYTES])?;
    let page = dir.path().join("site/page.html");
    std::fs::create_dir_all(page.parent().context("a page path has a parent")?)?;
    std::fs::write(&page, html(PAGE_BYTES))?;
    let server = Server::start(&dir.path().join("site"))?;
    let url = format!("http://127.0.0.1:{}/page.html", server.port);

    let source_arg = source.to_string_lossy().into_owned();
    let mut pod = start(dir.path(), &source_arg, &url)?;
    pod.wait_listening(Instant::now())?;

    let (mut cat, mut job) = (Vec::new(), Vec::new());
    let (mut curl, mut fetch) = (Vec::new(), Vec::new());
    let html_text = std::fs::read_to_string(&page)?;
    for _ in 0..reps {
        cat.push(cat_cpu_ms(&source, &dir.path().join("copy.bin"))?);
        let before = cpu_ticks(pod.pid())?;
        turn(&pod.socket, "job")?;
        job.push((cpu_ticks(pod.pid())? - before) as f64 * 10.0);

        let t = Instant::now();
        curl_fetch(&url)?;
        let converted = pod::tools::fetch::convert::html_to_markdown(&html_text);
        ensure!(!converted.is_empty(), "the page converted to nothing");
        curl.push(ms(t.elapsed()));
        fetch.push(ms(turn(&pod.socket, "fetch")?));
    }
    let (cat, job) = (median(&cat), median(&job));
    let (curl, fetch) = (median(&curl), median(&fetch));
    Ok(vec![
        Row::at_most(
            "13. a background job printing 100 MB, the pod's CPU",
            format!("{cat:.0} ms CPU of cat writing it to a file"),
            format!("{job:.0} ms CPU of the pod while the job ran (clock ticks of 10 ms)"),
            job / cat.max(1.0),
            "≤ 1.2×",
            1.2,
        ),
        Row::at_most(
            "13. web_fetch of a 1 MB page from a local server",
            format!("{curl:.1} ms curl + the HTML-to-Markdown conversion alone"),
            format!("{fetch:.1} ms run → turn_end (one web_fetch call, then a text)"),
            fetch / curl,
            "≤ 2×",
            2.0,
        ),
    ])
}

/// A page of `size` bytes of paragraphs and links, as documentation is.
fn html(size: usize) -> String {
    let mut out = String::from("<!doctype html><html><head><title>Docs</title></head><body>");
    let mut i = 0;
    while out.len() < size {
        out.push_str(&format!(
            "<h2>Section {i}</h2><p>Some <b>text</b> about item {i}, with \
             <a href=\"/item/{i}\">a link</a> and <code>code_{i}()</code>.</p>"
        ));
        i += 1;
    }
    out.push_str("</body></html>");
    out
}

/// A pod whose script answers the run `job` with a background `cat` of
/// `source` and the run `fetch` with a `web_fetch` of `url`, each then a
/// text. The script's replies are used in order: job, text, fetch, text.
fn start(dir: &Path, source: &str, url: &str) -> anyhow::Result<PodProcess> {
    let job = serde_json::json!({"events":[{"tool_call":{"id":"j","name":"bash",
        "arguments":{"command":format!("cat {source}"),"background":true}}}]});
    let fetch = serde_json::json!({"events":[{"tool_call":{"id":"f","name":"web_fetch",
        "arguments":{"url":url}}}]});
    let text = serde_json::json!({"events":[{"text":"done"}]});
    let script: String = (0..10)
        .map(|_| format!("{job}\n{text}\n{fetch}\n{text}\n"))
        .collect();
    let script_path = dir.join("script.jsonl");
    std::fs::write(&script_path, script)?;
    let script_arg = script_path.to_string_lossy().into_owned();
    PodProcess::spawn(
        dir,
        &[
            "--provider",
            "script",
            "--script",
            &script_arg,
            "--approval",
            "auto",
            "--fetch-private",
        ],
    )
}

/// One turn; for `job`, until the job's end note is committed too.
fn turn(socket: &Path, what: &str) -> anyhow::Result<Duration> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(1 << 20, stream);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    let t = Instant::now();
    writeln!(
        writer,
        "{}",
        serde_json::json!({"type":"run","segments":[{"type":"text","text":what}]})
    )?;
    let (mut ended, mut job_done) = (false, false);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            bail!("the pod closed the connection mid-turn");
        }
        if !line.starts_with(b"{\"type\":\"entry\"") {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if text.contains("\"kind\":\"tool_results\"") {
            ensure!(
                !text.contains("\"is_error\":true"),
                "the tool call failed: {text}"
            );
        }
        ended |= text.contains("\"kind\":\"turn_end\"");
        job_done |= text.contains("\"source\":\"job\"");
        if ended && (what == "fetch" || job_done) {
            return Ok(t.elapsed());
        }
    }
}

/// The CPU time (user + system) of `cat source > dest`, as bash's `times`
/// reports its children's.
fn cat_cpu_ms(source: &Path, dest: &Path) -> anyhow::Result<f64> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"cat "$1" > "$2"; times"#)
        .arg("bash")
        .arg(source)
        .arg(dest)
        .stderr(Stdio::null())
        .output()?;
    ensure!(out.status.success(), "cat failed");
    // `times`: the shell's own user and system time, then its children's.
    let text = String::from_utf8_lossy(&out.stdout);
    let children = text
        .lines()
        .nth(1)
        .context("no children's line from times")?;
    children
        .split_whitespace()
        .map(seconds)
        .sum::<anyhow::Result<f64>>()
        .map(|s| s * 1000.0)
}

/// `0m0.045s` → 0.045.
fn seconds(text: &str) -> anyhow::Result<f64> {
    let (minutes, rest) = text.split_once('m').context("no minutes")?;
    let secs = rest.trim_end_matches('s');
    Ok(minutes.parse::<f64>()? * 60.0 + secs.parse::<f64>()?)
}

/// `curl` fetching `url` to nowhere, waited for.
fn curl_fetch(url: &str) -> anyhow::Result<()> {
    let status = Command::new("curl")
        .args(["-fsS", "-o", "/dev/null", url])
        .status()
        .context("cannot run curl")?;
    ensure!(status.success(), "curl failed");
    Ok(())
}

/// `python3 -m http.server` on a free loopback port, serving `root`.
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Server {
    fn start(root: &Path) -> anyhow::Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .current_dir(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start python3 -m http.server")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(Instant::now() < deadline, "the page server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server { child, port })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
