//! The web client in a real browser: a real `pod serve --listen` on
//! 127.0.0.1, Debian's headless Chromium driven over WebDriver
//! (chromedriver, started here on a free port), the script provider for
//! deterministic answers. Each test checks what a person would see in the
//! page and what the session log says.
//!
//! Without Chromium these tests skip with a message, unless `CI` is set:
//! there they fail, since `.ci/run` installs it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use harness::{succeeded, Pod};
use serde_json::{json, Value};

/// One browser at a time: the machine's cores are shared, and a test's
/// timings should not depend on another test's rendering.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const CHROMIUM: &str = "chromium";
const CHROMEDRIVER: &str = "chromedriver";
const WAIT: Duration = Duration::from_secs(20);

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts TCP connections on `port`.
fn wait_port(port: u16, what: &str) {
    harness::eventually(what, WAIT, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// Chromium and chromedriver, or `None` (the test then skips) when they
/// are not installed and this is not CI.
fn browser_programs() -> Option<(PathBuf, PathBuf)> {
    match (on_path(CHROMIUM), on_path(CHROMEDRIVER)) {
        (Some(chromium), Some(driver)) => Some((chromium, driver)),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but chromium and chromedriver are not both installed (.ci/run installs them)")
        }
        _ => {
            eprintln!(
                "skipping: chromium and chromedriver are not installed \
                 (apt-get install chromium chromium-driver); CI runs this test"
            );
            None
        }
    }
}

/// A headless Chromium under its own chromedriver, with a fresh profile.
struct Browser {
    client: Option<Client>,
    driver: Child,
    _profile: tempfile::TempDir,
}

/// The viewport a test looks through.
#[derive(Clone, Copy)]
enum Screen {
    Desktop,
    /// 390×844 CSS pixels, touch, as a phone.
    Phone,
}

impl Browser {
    async fn start(screen: Screen) -> Option<Browser> {
        let (chromium, driver_path) = browser_programs()?;
        let port = free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut options = json!({ "binary": chromium, "args": [] });
        match screen {
            Screen::Desktop => args.push("--window-size=1280,900".to_owned()),
            Screen::Phone => {
                options["mobileEmulation"] = json!({
                    "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 2.0, "touch": true}
                })
            }
        }
        options["args"] = json!(args);
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), options);
        let mut browser = Browser {
            client: None,
            driver,
            _profile: profile,
        };
        wait_port(port, "chromedriver to listen");
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        browser.client = Some(client);
        Some(browser)
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    /// Evaluates `expr` (a JavaScript expression) in the page.
    async fn js(&self, expr: &str) -> Value {
        self.c()
            .execute(&format!("return ({expr});"), vec![])
            .await
            .unwrap_or_else(|e| panic!("evaluating {expr}: {e}"))
    }

    /// Waits until `expr` is truthy in the page; returns its value.
    async fn until(&self, what: &str, expr: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let v = self.js(expr).await;
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!(0) && v != json!("");
            if truthy {
                return v;
            }
            if Instant::now() > deadline {
                let body = self.js("document.body.innerText").await;
                panic!("timed out waiting for {what} ({expr}); the page shows:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn button(&self, name: &str) -> fantoccini::elements::Element {
        self.c()
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(&format!(
                "//button[normalize-space(.)='{name}' or @aria-label='{name}']"
            )))
            .await
            .unwrap_or_else(|e| panic!("no button {name}: {e}"))
    }

    /// Types into the box named `Message` and presses Enter.
    async fn send_message(&self, text: &str) {
        let message = self.message_box().await;
        message.send_keys(text).await.unwrap();
        message
            .send_keys(&char::from(fantoccini::key::Key::Enter).to_string())
            .await
            .unwrap();
    }

    /// The textarea whose accessible name is `Message`.
    async fn message_box(&self) -> fantoccini::elements::Element {
        self.until(
            "the message box",
            "(() => { const l = [...document.querySelectorAll('label')].find(l => l.textContent.trim() === 'Message'); \
             const t = l && document.getElementById(l.htmlFor); return !!t && t.tagName === 'TEXTAREA' && t.offsetParent !== null; })()",
        )
        .await;
        self.c().find(Locator::Id("message")).await.unwrap()
    }

    async fn screenshot(&self, name: &str) {
        let png = self.c().screenshot().await.unwrap();
        let dir = match std::env::var_os("POD_WEB_SCREENSHOTS") {
            Some(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("docs"),
            None => std::env::temp_dir(),
        };
        std::fs::write(dir.join(name), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // Closing ends the Chromium session; the driver goes with it.
            // A close that fails leaves nothing to do: the driver is killed next.
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(async {
                    let _ = client.close().await;
                })
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A pod listening on 127.0.0.1 at a free port.
fn web_pod(script: &str, args: &[&str]) -> (Pod, u16) {
    let port = free_port();
    let mut builder = Pod::builder()
        .script(script)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"));
    for a in args {
        builder = builder.arg(*a);
    }
    let pod = builder.start();
    wait_port(port, "the pod's HTTP server");
    (pod, port)
}

fn restart_pod(dir: tempfile::TempDir, script: &str, port: u16) -> Pod {
    let pod = Pod::builder()
        .in_dir(dir)
        .script(script)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .start();
    wait_port(port, "the restarted pod's HTTP server");
    pod
}

/// A pairing link from `pod url` (with `--read-only` when asked).
fn pairing_url(pod: &Pod, read_only: bool) -> String {
    let mut cmd = pod.command("url");
    if read_only {
        cmd.arg("--read-only");
    }
    let out = succeeded(cmd.output().unwrap());
    let url = out.trim().to_owned();
    assert!(url.contains("#pair="), "pod url printed {url}");
    url
}

/// Opens the page through a pairing link and waits for the first snapshot.
async fn open_page(browser: &Browser, pod: &Pod, read_only: bool) {
    let url = pairing_url(pod, read_only);
    browser.c().goto(&url).await.unwrap();
    browser
        .until(
            "the first snapshot",
            "document.querySelector('#log .divider') !== null",
        )
        .await;
    let address = browser.js("location.href").await;
    assert!(
        !address.as_str().unwrap().contains("pair="),
        "the pairing code stays in the address bar: {address}"
    );
}

fn entries_of_kind(pod: &Pod, kind: &str) -> Vec<Value> {
    pod.log_lines()
        .into_iter()
        .filter(|l| l["entry"]["kind"] == kind)
        .map(|l| l["entry"].clone())
        .collect()
}

/// A script reply of text chunks, `delay_ms` apart.
fn chunks(parts: &[&str], delay_ms: u64) -> String {
    let mut events = Vec::new();
    for part in parts {
        events.push(json!({ "delay_ms": delay_ms }));
        events.push(json!({ "text": part }));
    }
    json!({ "events": events }).to_string()
}

macro_rules! browser_or_skip {
    ($screen:expr) => {
        match Browser::start($screen).await {
            Some(b) => b,
            None => return,
        }
    };
}

async fn lock() -> tokio::sync::MutexGuard<'static, ()> {
    ONE_BROWSER.lock().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_message_streams_its_answer_as_markdown() {
    let _one = lock().await;
    let answer = [
        "Here is ",
        "**bold** text, ",
        "a [link](https://example.com/x) and ",
        "<b>raw html</b>.\n\n",
        "```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n",
        "![a picture](https://example.com/p.png) ",
        "and [bad](javascript:alert(1)).",
    ];
    let (pod, _port) = web_pod(&chunks(&answer, 250), &[]);
    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, false).await;
    browser.send_message("Explain **this**").await;

    // While it streams, the partial answer is on the page.
    let partial = browser
        .until(
            "a partial answer",
            "document.querySelector('#live .assistant')?.innerText",
        )
        .await;
    assert!(
        !partial.as_str().unwrap().contains("javascript"),
        "{partial}"
    );
    browser
        .until(
            "the confirmed answer",
            "document.querySelector('#log .assistant pre code') !== null",
        )
        .await;
    let html = browser
        .js("document.querySelector('#log .assistant').innerHTML")
        .await;
    let text = browser
        .js("document.querySelector('#log .assistant').innerText")
        .await;
    let (html, text) = (html.as_str().unwrap(), text.as_str().unwrap());
    assert!(html.contains("<strong>bold</strong>"), "{html}");
    assert!(!text.contains("**"), "raw Markdown shown: {text}");
    assert!(
        text.contains("<b>raw html</b>"),
        "raw HTML not shown as text: {text}"
    );
    assert!(!html.contains("<img"), "a remote image would load: {html}");
    assert!(!html.contains("javascript:"), "{html}");
    let link = browser
        .js("(() => { const a = document.querySelector('#log .assistant a[href=\"https://example.com/x\"]'); return a && a.rel; })()")
        .await;
    assert_eq!(link, json!("noopener noreferrer"));
    assert_eq!(
        browser
            .js("document.querySelectorAll('#log .user').length")
            .await,
        json!(1)
    );
    assert_eq!(
        browser
            .js("document.querySelector('#live').innerText")
            .await,
        json!(""),
        "the streamed block stays after its entry"
    );
    let inputs = entries_of_kind(&pod, "user_input");
    assert_eq!(
        inputs[0]["segments"],
        json!([{"type":"text","text":"Explain **this**"}])
    );
    browser.screenshot("web-desktop.png").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_answered_from_the_page() {
    let _one = lock().await;
    let script = [
        json!({"events":[{"text":"I will run it."},{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"echo approved-and-ran"}}}]}).to_string(),
        json!({"events":[{"text":"It ran."}]}).to_string(),
    ]
    .join("\n");
    let (pod, _port) = web_pod(&script, &["--approval", "ask"]);
    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, false).await;
    browser.send_message("run the command").await;

    browser
        .until(
            "the approval panel",
            "document.querySelector('#approvals .approval .summary')?.innerText",
        )
        .await;
    let panel = browser
        .js("document.querySelector('#approvals').innerText")
        .await;
    assert!(
        panel.as_str().unwrap().contains("echo approved-and-ran"),
        "{panel}"
    );
    browser.button("Allow for session").await;
    browser.button("Deny").await;
    browser.button("Allow").await.click().await.unwrap();

    browser
        .until(
            "the tool's output",
            "document.querySelector('#log .tool .output')?.innerText.includes('approved-and-ran')",
        )
        .await;
    browser
        .until("the turn's end", "[...document.querySelectorAll('#log .assistant')].some(e => e.innerText.includes('It ran.'))")
        .await;
    let decisions = entries_of_kind(&pod, "approval_decision");
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["decision"], "allow");
    assert_eq!(decisions[0]["by"], "user");
    assert_eq!(decisions[0]["remote"], "127.0.0.1", "{:?}", decisions[0]);
    let decision_line = browser
        .js("document.querySelector('#log .decision')?.innerText")
        .await;
    assert!(
        decision_line.as_str().unwrap().contains("127.0.0.1"),
        "{decision_line}"
    );
    assert_eq!(
        browser
            .js("document.querySelector('#approvals').hidden")
            .await,
        json!(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_link_shows_the_view_without_controls() {
    let _one = lock().await;
    let script = json!({"events":[{"text":"Let me check."},{"tool_call":{"id":"c1","name":"bash","arguments":{"command":"echo waiting-for-you"}}}]}).to_string();
    let (pod, _port) = web_pod(&script, &["--approval", "ask"]);
    let mut local = pod.client();
    local.until_type("snapshot");
    local.run("check something");
    local.until_entry("approval_request");

    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, true).await;
    browser
        .until(
            "the pending request",
            "document.querySelector('#approvals .summary')?.innerText.includes('waiting-for-you')",
        )
        .await;
    let body = browser.js("document.body.innerText").await;
    assert!(body.as_str().unwrap().contains("read-only"), "{body}");
    let controls = browser
        .js("[...document.querySelectorAll('button, textarea, input, select')].filter(e => e.offsetParent !== null || e.type === 'file' && !e.closest('[hidden]')).map(e => e.innerText || e.id)")
        .await;
    let controls: Vec<String> = serde_json::from_value(controls).unwrap();
    for forbidden in [
        "Allow",
        "Allow for session",
        "Deny",
        "Send",
        "Stop",
        "message",
        "file",
        "mode",
    ] {
        assert!(
            !controls.iter().any(|c| c == forbidden),
            "a read-only page offers {forbidden}: {controls:?}"
        );
    }
    assert!(entries_of_kind(&pod, "approval_decision").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_mid_answer_shows_the_partial_block_at_once() {
    let _one = lock().await;
    let words: Vec<String> = (0..80).map(|i| format!("word{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (pod, _port) = web_pod(&chunks(&words, 100), &[]);
    let browser = browser_or_skip!(Screen::Desktop);
    let mut local = pod.client();
    local.until_type("snapshot");
    local.run("talk slowly");
    local.until_with("some text", |f| {
        f["type"] == "text_delta" && f["text"].as_str().unwrap_or("").contains("word3")
    });

    let url = pairing_url(&pod, false);
    browser.c().goto(&url).await.unwrap();
    let partial = browser
        .until(
            "the partial block",
            "document.querySelector('#live .assistant')?.innerText",
        )
        .await;
    assert!(partial.as_str().unwrap().contains("word0"), "{partial}");
    assert!(
        entries_of_kind(&pod, "assistant_items").is_empty(),
        "the answer finished before the page showed it: the test proves nothing"
    );
    browser
        .until(
            "the whole answer",
            "document.querySelector('#log .assistant')?.innerText.includes('word79')",
        )
        .await;
    let shown = browser
        .js("document.querySelector('#log .assistant').innerText")
        .await;
    assert_eq!(
        shown.as_str().unwrap().matches("word0 ").count()
            + shown.as_str().unwrap().matches("word0\n").count(),
        1
    );
    assert_eq!(
        browser
            .js("document.querySelector('#live').innerText")
            .await,
        json!("")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_reconnects_to_a_restarted_pod_without_duplicates() {
    let _one = lock().await;
    let script = chunks(&["The first ", "answer."], 50);
    let (pod, port) = web_pod(&script, &[]);
    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, false).await;
    browser.send_message("one").await;
    browser
        .until(
            "the first answer",
            "document.querySelector('#log .assistant')?.innerText.includes('answer.')",
        )
        .await;

    let mut pod = pod;
    pod.kill9();
    browser
        .until(
            "the disconnected banner",
            "document.querySelector('#conn')?.innerText.includes('disconnected')",
        )
        .await;
    let dir = pod.into_dir();
    let pod = restart_pod(dir, &script, port);
    browser
        .until("the reconnect", "document.querySelector('#conn').hidden")
        .await;
    let counts = "[document.querySelectorAll('#log .user').length, document.querySelectorAll('#log .assistant').length, document.querySelectorAll('#log .divider').length]";
    assert_eq!(browser.js(counts).await, json!([1, 1, 1]));

    browser.send_message("two").await;
    browser
        .until(
            "the second answer",
            "document.querySelectorAll('#log .assistant').length === 2",
        )
        .await;
    assert_eq!(browser.js(counts).await, json!([2, 2, 1]));
    assert_eq!(entries_of_kind(&pod, "user_input").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_needs_no_sideways_scrolling() {
    let _one = lock().await;
    let long_word = "x".repeat(300);
    let answer = format!(
        "A long word: {long_word}\n\n```\n{}\n```\n\n| a | table |\n|---|---|\n| {long_word} | b |\n",
        "code ".repeat(80)
    );
    let script = [
        json!({"events":[{"text":answer},{"tool_call":{"id":"c1","name":"bash","arguments":{"command":format!("echo {long_word}")}}}]}).to_string(),
        json!({"events":[{"text":"Done."},{"tool_call":{"id":"c2","name":"update_plan","arguments":{"items":[{"text":"look at it","status":"done"},{"text":"answer","status":"in_progress"}]}}}]}).to_string(),
        json!({"events":[{"text":"Planned."}]}).to_string(),
    ]
    .join("\n");
    let (pod, _port) = web_pod(&script, &[]);
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    assert_eq!(browser.js("window.innerWidth").await, json!(390));
    browser
        .send_message(&format!("a message with {long_word}"))
        .await;
    browser
        .until("the turn's end", "[...document.querySelectorAll('#log .assistant')].some(e => e.innerText.includes('Planned.'))")
        .await;
    browser
        .until(
            "the plan",
            "document.querySelector('#plan')?.innerText.includes('look at it')",
        )
        .await;
    let overflow = browser
        .js("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        .await;
    assert_eq!(overflow, json!(0), "the page scrolls sideways");
    let wide = browser
        .js("[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.md pre, .md table')).map(e => e.tagName + '.' + e.className).slice(0, 5)")
        .await;
    assert_eq!(wide, json!([]), "elements wider than the phone");
    let small = browser
        .js("[...document.querySelectorAll('button, select, summary')].filter(e => e.offsetParent !== null).filter(e => { const r = e.getBoundingClientRect(); return r.height < 44 || r.width < 44; }).map(e => e.outerHTML.slice(0, 80))")
        .await;
    assert_eq!(small, json!([]), "touch targets under 44 px");
    browser.screenshot("web-phone.png").await;
}

/// A session of `turns` turns (three entries each: hundreds of entries)
/// whose answers have long lines and code blocks, then `later` more
/// replies streamed a word every `word_ms`; and the client that made it.
fn long_session(turns: usize, later: &[&str], word_ms: u64) -> (Pod, harness::Client) {
    let mut script: Vec<String> = (0..turns)
        .map(|i| {
            let text = format!(
                "answer number {i}: {}\n\n```rust\nfn answer_{i}() -> usize {{\n    {i} // {}\n}}\n```\n\nand a last line.",
                "a long line that wraps on a phone ".repeat(8),
                "x".repeat(150),
            );
            json!({"events":[{"text": text}]}).to_string()
        })
        .collect();
    for reply in later {
        let words: Vec<String> = reply.split(' ').map(|w| format!("{w} ")).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        script.push(chunks(&words, word_ms));
    }
    let (pod, _port) = web_pod(&script.join("\n"), &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    for i in 0..turns {
        c.run(&format!("question number {i}"));
    }
    for _ in 0..turns {
        c.until_entry("turn_end");
    }
    (pod, c)
}

/// How far the view is from the end of the page, in CSS pixels.
const FROM_END: &str = "(() => { const e = document.scrollingElement; return e.scrollHeight - e.scrollTop - e.clientHeight; })()";

/// Whether the last block of the conversation (`selector`'s last match) is
/// on screen above the dock.
fn last_in_view(selector: &str) -> String {
    format!(
        "(() => {{ const all = document.querySelectorAll('{selector}'); const el = all[all.length - 1]; if (!el) return false; \
         const r = el.getBoundingClientRect(); const dock = document.getElementById('dock').getBoundingClientRect(); \
         return r.bottom > 0 && r.bottom <= dock.top + 2; }})()"
    )
}

/// Opens the page on a long session: waits until its newest entries and
/// then its snapshot's older ones are drawn.
async fn open_long(browser: &Browser, pod: &Pod, last_question: usize) {
    browser.c().goto(&pairing_url(pod, false)).await.unwrap();
    browser
        .until(
            "the newest entries",
            &format!("[...document.querySelectorAll('#log .user')].some(e => e.textContent.includes('question number {last_question}'))"),
        )
        .await;
    browser
        .until(
            "the snapshot's history drawn",
            "performance.getEntriesByName('pod:history-drawn').length > 0",
        )
        .await;
}

async fn opens_at_its_end_and_follows_a_run_from_elsewhere(screen: Screen) {
    let _one = lock().await;
    let (pod, mut terminal) =
        long_session(100, &["the streamed reply to the terminal ends here"], 120);
    assert!(pod.log_lines().len() > 300, "hundreds of entries");
    let browser = browser_or_skip!(screen);
    open_long(&browser, &pod, 99).await;
    // Blocks laid out late must not leave the view short of the end.
    browser
        .until(
            "the view at the end",
            &format!("document.fonts.status === 'loaded' && {FROM_END} <= 4"),
        )
        .await;
    let from_end = browser.js(FROM_END).await.as_f64().unwrap();
    assert!(from_end <= 4.0, "opened {from_end} px short of the end");
    assert_eq!(
        browser.js(&last_in_view("#log .assistant")).await,
        json!(true),
        "the last answer is on screen"
    );
    assert_eq!(
        browser.js("document.getElementById('newer').hidden").await,
        json!(true)
    );

    // A run sent by another client: its input, its streaming answer and
    // the answer's entry come into view as they arrive.
    terminal.run("from the terminal");
    browser
        .until(
            "the streaming answer in view",
            &format!(
                "!!document.querySelector('#live .assistant') && {}",
                last_in_view("#live .assistant")
            ),
        )
        .await;
    browser
        .until(
            "the answer's entry in view",
            &format!(
                "[...document.querySelectorAll('#log .assistant')].some(e => e.textContent.includes('ends here')) && {} && {FROM_END} <= 4",
                last_in_view("#log .assistant")
            ),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_opens_at_its_end_on_a_phone_and_follows() {
    opens_at_its_end_and_follows_a_run_from_elsewhere(Screen::Phone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_opens_at_its_end_on_a_desktop_and_follows() {
    opens_at_its_end_and_follows_a_run_from_elsewhere(Screen::Desktop).await;
}

async fn scrolled_up_stays_put_with_newer_below(screen: Screen) {
    let _one = lock().await;
    // A word every 20 ms: the page changes every frame or two while the
    // reader scrolls, so only their input can tell their scroll from one
    // the growing answer caused.
    let reply = format!(
        "{} a reply the reader does not watch arrive",
        "word ".repeat(200)
    );
    let (pod, mut terminal) = long_session(100, &[&reply], 20);
    let browser = browser_or_skip!(screen);
    open_long(&browser, &pod, 99).await;
    browser
        .until("the view at the end", &format!("{FROM_END} <= 4"))
        .await;
    terminal.run("while the reader reads");
    browser
        .until(
            "the answer streaming",
            "!!document.querySelector('#live .assistant')",
        )
        .await;
    // The reader scrolls up: with the mouse wheel on a desktop, and on a
    // phone with a finger that drags the page down, three times.
    match screen {
        Screen::Desktop => {
            let mut wheel = fantoccini::actions::WheelActions::new("wheel".into());
            wheel.push(fantoccini::actions::WheelAction::Scroll {
                duration: None,
                x: 100,
                y: 300,
                delta_x: 0,
                delta_y: -1500,
            });
            browser.c().perform_actions(wheel).await.unwrap();
        }
        Screen::Phone => {
            use fantoccini::actions::{
                InputSource, PointerAction, TouchActions, MOUSE_BUTTON_LEFT,
            };
            let mut finger = TouchActions::new("finger".into());
            for _ in 0..3 {
                finger = finger
                    .then(PointerAction::MoveTo {
                        duration: None,
                        x: 200.0,
                        y: 200.0,
                    })
                    .then(PointerAction::Down {
                        button: MOUSE_BUTTON_LEFT,
                    })
                    .then(PointerAction::MoveTo {
                        duration: Some(Duration::from_millis(300)),
                        x: 200.0,
                        y: 700.0,
                    })
                    .then(PointerAction::Up {
                        button: MOUSE_BUTTON_LEFT,
                    });
            }
            browser.c().perform_actions(finger).await.unwrap();
        }
    }
    browser
        .until("the view to leave the end", &format!("{FROM_END} > 1000"))
        .await;
    browser
        .until(
            "the Newer below control",
            "(() => { const b = document.getElementById('newer'); return !!b && !b.hidden && b.getBoundingClientRect().height > 0; })()",
        )
        .await;
    let place = "(() => { const users = [...document.querySelectorAll('#log .user')]; \
                 const seen = users.find(u => u.getBoundingClientRect().top >= 0); \
                 return [document.scrollingElement.scrollTop, seen.textContent, seen.getBoundingClientRect().top]; })()";
    // A wheel scroll glides on for a few frames after it began: take the
    // place once two reads 100 ms apart agree.
    let mut before = browser.js(place).await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let again = browser.js(place).await;
        if again == before {
            break;
        }
        before = again;
    }

    terminal.until_entry("turn_end");
    browser
        .until(
            "the reply drawn",
            "[...document.querySelectorAll('#log .assistant')].some(e => e.textContent.includes('does not watch'))",
        )
        .await;
    let after = browser.js(place).await;
    assert_eq!(
        after[1], before[1],
        "the same message at the top of the view"
    );
    // Where that message is on the screen is what the reader sees; the
    // scroll offset may change with it when something above the view
    // changes height (the browser keeps the view anchored), so it is not
    // what is compared.
    let (b, a) = (before[2].as_f64().unwrap(), after[2].as_f64().unwrap());
    assert!((a - b).abs() <= 2.0, "the view moved: {before} → {after}");
    assert_eq!(
        browser.js("document.getElementById('newer').hidden").await,
        json!(false)
    );

    browser.button("Newer below ↓").await.click().await.unwrap();
    browser
        .until(
            "the end, with the new reply in view",
            &format!("{FROM_END} <= 4 && {}", last_in_view("#log .assistant")),
        )
        .await;
    assert_eq!(
        browser.js("document.getElementById('newer').hidden").await,
        json!(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolled_up_on_a_phone_new_content_does_not_move_the_view() {
    scrolled_up_stays_put_with_newer_below(Screen::Phone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolled_up_on_a_desktop_new_content_does_not_move_the_view() {
    scrolled_up_stays_put_with_newer_below(Screen::Desktop).await;
}

async fn scrolling_to_the_top_pages_earlier_entries(screen: Screen) {
    let _one = lock().await;
    const TURNS: usize = 100;
    let (pod, _terminal) = long_session(TURNS, &[], 120);
    let browser = browser_or_skip!(screen);
    open_long(&browser, &pod, TURNS - 1).await;
    let users = "document.querySelectorAll('#log .user').length";
    let shown = browser.js(users).await.as_u64().unwrap() as usize;
    assert!(
        shown < TURNS,
        "the page opens with the latest entries, not all {TURNS} messages ({shown} shown)"
    );
    let mut pages = 0;
    while browser.js(users).await.as_u64().unwrap() < TURNS as u64 {
        // From the frame after the reader reaches the top, every painted
        // frame notes where the block at the middle of the screen is, and
        // where the block noted in the frame before now is (measured in a
        // task queued by the frame's callback: just after it is painted).
        let count = browser
            .js("(() => { window.scrollTo(0, 0); window.podFrames = []; \
                 const block = () => { let el = document.elementFromPoint(innerWidth / 2, innerHeight / 2); \
                   while (el && el.parentElement && el.parentElement.id !== 'log' && !el.parentElement.classList.contains('history')) el = el.parentElement; return el; }; \
                 const painted = new MessageChannel(); painted.port1.onmessage = () => measure(); \
                 const tick = () => painted.port2.postMessage(0); \
                 const measure = () => { const el = block(); const last = podFrames[podFrames.length - 1]; \
                   podFrames.push({ count: document.querySelectorAll('#log .user').length, el, top: el?.getBoundingClientRect().top, \
                     lastNow: last?.el?.getBoundingClientRect().top, lastTop: last?.top }); \
                   if (podFrames.length < 5000) requestAnimationFrame(tick); }; \
                 requestAnimationFrame(tick); return document.querySelectorAll('#log .user').length; })()")
            .await
            .as_u64()
            .unwrap();
        browser
            .until(
                "an earlier page, and three frames after it",
                &format!("(() => {{ const i = podFrames.findIndex(f => f.count > {count}); return i >= 0 && podFrames.length > i + 3; }})()"),
            )
            .await;
        // The first two frames may still lay out what scrolling reached.
        let jumps = browser
            .js("podFrames.map((f, i) => [i, f.count, f.lastNow - f.lastTop, f.el?.textContent.slice(0, 30)]).filter(([i, , d]) => i >= 3 && Math.abs(d) > 2)")
            .await;
        assert_eq!(jumps, json!([]), "the view jumped while a page came");
        pages += 1;
        assert!(pages < 10, "paging does not end");
    }
    let texts: Vec<String> = serde_json::from_value(
        browser
            .js("[...document.querySelectorAll('#log .user')].map(e => e.textContent)")
            .await,
    )
    .unwrap();
    assert_eq!(texts.len(), TURNS);
    for (i, text) in texts.iter().enumerate() {
        assert!(
            text.contains(&format!("question number {i}")),
            "message {i} in its place: {text}"
        );
    }
    assert_eq!(
        browser
            .js("document.querySelectorAll('#log .divider').length")
            .await,
        json!(1),
        "the session's start, once"
    );
    assert_eq!(
        browser
            .js("document.querySelectorAll('#log .assistant').length")
            .await,
        json!(TURNS),
        "every answer once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_to_the_top_on_a_phone_pages_earlier_entries_in_order() {
    scrolling_to_the_top_pages_earlier_entries(Screen::Phone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrolling_to_the_top_on_a_desktop_pages_earlier_entries_in_order() {
    scrolling_to_the_top_pages_earlier_entries(Screen::Desktop).await;
}

/// #36.1 / #36.5: answering an approval with "Deny with a message" on a
/// phone leaves the page following the end. The panel closing makes the
/// page shorter, so the browser moves the view up (it clamps the offset)
/// and reports that scroll a frame later; when the model's reply has made the page
/// longer meanwhile, that scroll looks like the reader moving up short of
/// the end, and the page used to stop there with "Newer below" shown
/// though the reader never scrolled. The reply comes 0 to 44 ms after the
/// denial, round by round, so some round lands in that frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_with_a_message_on_a_phone_keeps_following_the_end() {
    let _one = lock().await;
    const HISTORY: usize = 30;
    const ROUNDS: usize = 12;
    let paragraph = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(4);
    let mut script: Vec<String> = (0..HISTORY)
        .map(|i| {
            json!({"events":[{"text": format!("Reply {i}.\n\n{paragraph}\n\n{paragraph}")}]})
                .to_string()
        })
        .collect();
    for round in 0..ROUNDS {
        script.push(
            json!({"events":[{"tool_call":{"id": format!("c{round}"),"name":"bash","arguments":{"command": format!("rm -rf build{round}")}}}]})
                .to_string(),
        );
        // The reply comes 0 to 44 ms after the denial: before, with and
        // after the frame that lays out the closed panel.
        let mut events = vec![json!({"delay_ms": 4 * round as u64})];
        events.push(json!({"text": format!("removed build {round}")}));
        script.push(json!({ "events": events }).to_string());
    }
    let (pod, _port) = web_pod(&script.join("\n"), &["--approval", "ask"]);
    let mut terminal = pod.client();
    terminal.until_type("snapshot");
    for i in 0..HISTORY {
        terminal.run(&format!("question number {i}"));
    }
    for _ in 0..HISTORY {
        terminal.until_entry("turn_end");
    }
    let browser = browser_or_skip!(Screen::Phone);
    open_long(&browser, &pod, HISTORY - 1).await;
    browser
        .until(
            "the view at the end",
            &format!("document.fonts.status === 'loaded' && {FROM_END} <= 2"),
        )
        .await;
    // The last scrolls the page saw, for the failure message.
    browser
        .js("(window.scrolls = [], addEventListener('scroll', () => { const e = document.scrollingElement; \
             scrolls.push([Math.round(performance.now()), e.scrollTop, e.scrollHeight, e.clientHeight, document.getElementById('newer').hidden]); }), true)")
        .await;
    let at_end = format!("{FROM_END} <= 2 && document.getElementById('newer').hidden");
    for round in 0..ROUNDS {
        browser
            .send_message(&format!("from the phone: clean build {round}, then tell me what it removed and how long the next build takes"))
            .await;
        browser
            .until(
                "the approval panel",
                "document.querySelector('#approvals .approval summary')",
            )
            .await;
        browser
            .c()
            .find(Locator::XPath("//section[contains(@class,'approval')]//summary[normalize-space(.)='Deny with a message']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let box_ = browser
            .c()
            .find(Locator::Css("#approvals .approval textarea"))
            .await
            .unwrap();
        box_.click().await.unwrap();
        box_.send_keys("use cargo clean instead").await.unwrap();
        browser
            .c()
            .find(Locator::XPath("//section[contains(@class,'approval')]//button[normalize-space(.)='Deny with this message']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        browser
            .until(
                "the reply after the denial",
                &format!("document.querySelector('#approvals').hidden && [...document.querySelectorAll('#log .assistant')].some(e => e.textContent.includes('removed build {round}'))"),
            )
            .await;
        // Two frames: whatever the reply's arrival set in motion is laid out.
        let settled = browser
            .c()
            .execute_async(
                &format!("const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done({at_end})));"),
                vec![],
            )
            .await
            .unwrap();
        if settled != json!(true) {
            browser.screenshot("web-after-deny-failed-390.png").await;
            let from_end = browser.js(FROM_END).await;
            let scrolls = browser.js("scrolls.slice(-8)").await;
            panic!(
                "round {round}: after the denial the page is {from_end} px short of the end \
                 with Newer below {}; scrolls (ms, top, height, client, newer hidden): {scrolls}",
                browser
                    .js("document.getElementById('newer').hidden ? 'hidden' : 'shown'")
                    .await
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_from_the_picker_reaches_the_log() {
    let _one = lock().await;
    let (pod, port) = web_pod(&chunks(&["I see it."], 10), &[]);
    assert!(
        serves_blobs(&pod, port).await,
        "POST /v1/blobs stores an image"
    );
    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, false).await;
    let png = pod.dir.path().join("red.png");
    std::fs::write(&png, PNG_1X1).unwrap();
    let picker = browser
        .c()
        .find(Locator::Css("input[type=file]"))
        .await
        .unwrap();
    picker.send_keys(png.to_str().unwrap()).await.unwrap();
    browser
        .until(
            "the uploaded image",
            "document.querySelector('#attachments .image img') !== null",
        )
        .await;
    browser.send_message("what is this?").await;
    browser
        .until(
            "the image in the conversation",
            "document.querySelector('#log .user figure img')?.src.startsWith('blob:')",
        )
        .await;
    let input = &entries_of_kind(&pod, "user_input")[0];
    let segments = input["segments"].as_array().unwrap();
    let image = segments
        .iter()
        .find(|s| s["type"] == "image")
        .unwrap_or_else(|| panic!("no image segment: {segments:?}"));
    assert_eq!(image["media_type"], "image/png");
    assert_eq!(image["name"], "red.png");
    assert!(image["blob"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(segments[0], json!({"type":"text","text":"what is this?"}));
}

/// Whether `POST /v1/blobs` stores an image.
async fn serves_blobs(pod: &Pod, port: u16) -> bool {
    let token = succeeded(pod.command("token").arg("create").output().unwrap());
    let response = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/v1/blobs"))
        .bearer_auth(token.trim())
        .header("Content-Type", "image/png")
        .body(PNG_1X1)
        .send()
        .await
        .unwrap();
    response.status().is_success()
}

/// A 1×1 red PNG.
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A session longer than the page draws at once (it draws the newest
/// entries first, the older history after): every entry ends up in the
/// page exactly once, oldest included, and the view goes on live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_is_drawn_whole_and_once() {
    let _one = lock().await;
    const TURNS: usize = 30;
    let script: Vec<String> = (0..=TURNS)
        .map(|i| json!({"events":[{"text": format!("answer number {i}")}]}).to_string())
        .collect();
    let (pod, _port) = web_pod(&script.join("\n"), &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    for i in 0..TURNS {
        c.run(&format!("question number {i}"));
        c.until_entry("turn_end");
    }
    let browser = browser_or_skip!(Screen::Desktop);
    open_page(&browser, &pod, false).await;
    let counts = "[document.querySelectorAll('#log .user').length, document.querySelectorAll('#log .assistant').length, document.querySelectorAll('#log .divider').length]";
    browser
        .until(
            "the whole history",
            &format!("document.querySelectorAll('#log .user').length === {TURNS}"),
        )
        .await;
    assert_eq!(browser.js(counts).await, json!([TURNS, TURNS, 1]));
    let users = browser
        .js("Array.from(document.querySelectorAll('#log .user')).map(e => e.textContent)")
        .await;
    let users: Vec<String> = serde_json::from_value(users).unwrap();
    for (i, user) in users.iter().enumerate() {
        assert!(
            user.contains(&format!("question number {i}")),
            "message {i} in its place: {users:?}"
        );
    }
    browser.send_message("one more").await;
    browser
        .until(
            "the live answer",
            &format!(
                "document.querySelectorAll('#log .assistant').length === {}",
                TURNS + 1
            ),
        )
        .await;
    assert_eq!(browser.js(counts).await, json!([TURNS + 1, TURNS + 1, 1]));
}

/// The recorded log of a turn waiting for two calls, shared with
/// `tui_approval::the_panel_shows_the_recorded_session_rule`.
const RECORDED: &str = include_str!("fixtures/waiting_for_approval.jsonl");

/// A pod started on the recorded log (it resumes the waiting turn), the
/// call ids of its requests and the `session_rule` each carries.
fn recorded_pod() -> (Pod, Vec<(String, String)>) {
    let lines: Vec<Value> = RECORDED
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let session_id = lines[0]["entry"]["session_id"].as_str().unwrap().to_owned();
    let requests = lines
        .iter()
        .filter(|l| l["entry"]["kind"] == "approval_request")
        .map(|l| {
            let e = &l["entry"];
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["session_rule"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("data/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join(format!("{session_id}.jsonl")), RECORDED).unwrap();
    let port = free_port();
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&json!({"events":[{"text":"Done."}]}).to_string())
        .args(["--approval", "ask", "--session", &session_id])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .start();
    wait_port(port, "the pod's HTTP server");
    (pod, requests)
}

/// #36.5 / #37.3: the panel shows, beside "Allow for session", the rule
/// the pod put on each request — the same text the TUI shows for the same
/// recorded entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_panels_show_the_recorded_session_rule() {
    let _one = lock().await;
    let (pod, requests) = recorded_pod();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser
        .until(
            "both requests",
            "document.querySelectorAll('#approvals .approval').length === 2",
        )
        .await;
    let rules = browser
        .js("[...document.querySelectorAll('#approvals .approval')].map(a => a.querySelector('.rule')?.innerText ?? null)")
        .await;
    let expected: Vec<String> = requests
        .iter()
        .map(|(_, rule)| format!("Allow for session adds the rule {rule}"))
        .collect();
    assert_eq!(rules, json!(expected));
    // Beside the button: the button names the rule as its description.
    let described = browser
        .js("[...document.querySelectorAll('#approvals .approval')].map(a => { const b = [...a.querySelectorAll('button')].find(b => b.innerText.trim() === 'Allow for session'); return document.getElementById(b.getAttribute('aria-describedby'))?.querySelector('code')?.innerText ?? null; })")
        .await;
    let rules_only: Vec<&str> = requests.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(described, json!(rules_only));
}

/// #36.5: "Deny with a message" sends the typed message with the denial,
/// and the model's result carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_can_carry_a_message_for_the_model() {
    let _one = lock().await;
    let (pod, requests) = recorded_pod();
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser
        .until(
            "both requests",
            "document.querySelectorAll('#approvals .approval').length === 2",
        )
        .await;
    let first = "document.querySelector('#approvals .approval')";
    browser
        .c()
        .find(Locator::XPath(
            "(//section[contains(@class,'approval')])[1]//summary[normalize-space(.)='Deny with a message']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let box_ = browser
        .c()
        .find(Locator::Css(
            "#approvals .approval textarea[aria-label='Message for the model']",
        ))
        .await
        .unwrap();
    box_.send_keys("run cargo nextest instead").await.unwrap();
    // A status frame meanwhile must not wipe what is being typed.
    let mut local = pod.client();
    local.until_type("snapshot");
    local.send(json!({"type":"set_approval","mode":"edits"}));
    browser
        .until(
            "the new mode in the status line",
            "document.querySelector('#status').innerText.includes('mode edits')",
        )
        .await;
    assert_eq!(
        browser
            .js(&format!("{first}.querySelector('textarea').value"))
            .await,
        json!("run cargo nextest instead")
    );
    browser
        .c()
        .find(Locator::XPath(
            "(//section[contains(@class,'approval')])[1]//button[normalize-space(.)='Deny with this message']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    harness::eventually("the denial in the log", WAIT, || {
        !entries_of_kind(&pod, "approval_decision").is_empty()
    });
    let decisions = entries_of_kind(&pod, "approval_decision");
    assert_eq!(decisions[0]["call_id"], json!(requests[0].0));
    assert_eq!(decisions[0]["decision"], "deny");
    assert_eq!(decisions[0]["message"], "run cargo nextest instead");
    browser
        .until(
            "the panel to close the answered request",
            "document.querySelectorAll('#approvals .approval').length === 1",
        )
        .await;
}

/// #36.2: at 390×844 every control of the open Menu is on screen, where a
/// finger can reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_menu_control_is_on_a_phone_screen() {
    let _one = lock().await;
    let (pod, _port) = web_pod(&json!({"events":[{"text":"hi"}]}).to_string(), &[]);
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser
        .c()
        .find(Locator::Css("#menu > summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .until("the menu open", "document.getElementById('menu').open")
        .await;
    let controls = browser
        .js("[...document.querySelectorAll('#menu .menu-body button, #menu .menu-body select, #menu .menu-body summary')].filter(e => e.offsetParent !== null).map(e => { const r = e.getBoundingClientRect(); return [e.id || e.innerText.trim(), r.left, r.top, r.right, r.bottom]; })")
        .await;
    let controls: Vec<(String, f64, f64, f64, f64)> = serde_json::from_value(controls).unwrap();
    let names: Vec<&str> = controls.iter().map(|c| c.0.as_str()).collect();
    for wanted in ["mode", "new-session", "fork", "forget", "Sessions"] {
        assert!(names.contains(&wanted), "{wanted} missing: {names:?}");
    }
    let off: Vec<_> = controls
        .iter()
        .filter(|(_, l, t, r, b)| *l < 0.0 || *t < 0.0 || *r > 390.0 || *b > 844.0)
        .collect();
    assert!(off.is_empty(), "controls off the 390×844 screen: {off:?}");
    // On screen and on top: a tap at each control's centre reaches it.
    let hit = browser
        .js("[...document.querySelectorAll('#menu .menu-body button, #menu .menu-body select, #menu .menu-body summary')].filter(e => e.offsetParent !== null).filter(e => { const r = e.getBoundingClientRect(); const at = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2); return !(at === e || e.contains(at)); }).map(e => e.id || e.innerText.trim())")
        .await;
    assert_eq!(hit, json!([]), "controls covered by something else");
    browser.screenshot("web-phone-menu.png").await;
}

/// #36: a `web_fetch` call is shown by the URL its approval shows (the
/// fetch's own parse, here `new URL`), as the TUI and `pod send` show it,
/// not as the model wrote it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_is_shown_by_the_url_its_approval_shows() {
    let _one = lock().await;
    let script = [
        json!({"events":[{"tool_call":{"id":"f1","name":"web_fetch","arguments":{"url":" HTTP://LocalHost:80/a/../b c"}}}]}).to_string(),
        json!({"events":[{"text":"Fetched."}]}).to_string(),
    ]
    .join("\n");
    let (pod, _port) = web_pod(&script, &[]);
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser.send_message("fetch it").await;
    browser
        .until("the turn's end", "[...document.querySelectorAll('#log .assistant')].some(e => e.innerText.includes('Fetched.'))")
        .await;
    let shown = browser
        .js("[...document.querySelectorAll('#log .tool .tool-arg')].map(e => e.innerText)")
        .await;
    assert_eq!(shown, json!(["http://localhost/b%20c"]));
}

/// #36.7: a `bash` call that started a background job says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_is_marked_as_one() {
    let _one = lock().await;
    let script = [
        json!({"events":[{"tool_call":{"id":"b1","name":"bash","arguments":{"command":"exec sleep 60","background":true}}},
                         {"tool_call":{"id":"c2","name":"bash","arguments":{"command":"echo foreground"}}}]}).to_string(),
        json!({"events":[{"text":"Started."}]}).to_string(),
    ]
    .join("\n");
    let (pod, _port) = web_pod(&script, &[]);
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser.send_message("start it").await;
    browser
        .until("the turn's end", "[...document.querySelectorAll('#log .assistant')].some(e => e.innerText.includes('Started.'))")
        .await;
    let marks = browser
        .js("[...document.querySelectorAll('#log .tool')].map(t => [t.querySelector('.tool-arg')?.innerText, t.querySelector('.job-mark')?.innerText ?? null])")
        .await;
    assert_eq!(
        marks,
        json!([
            ["exec sleep 60", "background job"],
            ["echo foreground", null]
        ])
    );
}

/// A parent whose turn started a child that waits for approval, on a
/// phone: the page lists the child with its state, waiting approval and
/// usage under the tree's usage, shows its start in the conversation, and
/// nothing needs sideways scrolling; the child's row opens the child's own
/// view (`?agent=`), whose approval panel answers it, and a link leads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_lists_the_child_pods_opens_a_waiting_one_and_answers_it() {
    let _one = lock().await;
    let script = [
        json!({"events":[{"tool_call":{"id":"s1","name":"spawn_agent",
            "arguments":{"task":"check the tests","name":"tests","wait":false}}}]}),
        json!({"events":[{"text":"Delegated."}]}),
        json!({"agent":"tests","events":[{"tool_call":{"id":"c1","name":"bash",
            "arguments":{"command":"echo child-ran"}}},{"usage":{"input_tokens":1200,"output_tokens":300}}]}),
        json!({"agent":"tests","events":[{"text":"Checked."}]}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let (pod, _port) = web_pod(&script, &["--approval", "ask"]);
    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser.send_message("delegate").await;
    let child = format!("{}.tests", pod.name());
    browser
        .until(
            "the child waiting in the list",
            &format!(
                "document.querySelector('#agents')?.innerText.includes('{child} waiting for 1 approval')"
            ),
        )
        .await;
    let listed = browser
        .js("document.querySelector('#agents').innerText")
        .await;
    let listed = listed.as_str().unwrap();
    assert!(listed.contains("agents · 1 · tree"), "{listed}");
    assert!(listed.contains("1.2k in · 300 out"), "{listed}");
    assert!(listed.contains("open it to answer"), "{listed}");
    browser
        .until(
            "the child's start in the conversation",
            &format!(
                "[...document.querySelectorAll('#log .agent-entry')].some(e => e.innerText.includes('⎇ agent {child} started') && e.innerText.includes('check the tests'))"
            ),
        )
        .await;
    // The entry names the child with a link to its view, as the panel does.
    assert_eq!(
        browser
            .js("document.querySelector('#log .agent-entry a')?.getAttribute('href')")
            .await,
        json!(format!("/?agent={child}"))
    );
    let overflow = browser
        .js("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        .await;
    assert_eq!(overflow, json!(0), "the page scrolls sideways");

    // The child's row opens its own view: its log, its approval panel.
    browser
        .c()
        .find(Locator::LinkText(&child))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .until(
            "the child's view",
            &format!("document.querySelector('#pod-name').innerText === 'pod {child}'"),
        )
        .await;
    assert_eq!(
        browser
            .js("new URLSearchParams(location.search).get('agent')")
            .await,
        json!(child)
    );
    browser
        .until(
            "the child's approval panel",
            "document.querySelector('#approvals .approval')?.innerText.includes('echo child-ran')",
        )
        .await;
    browser
        .until(
            "the child's task as its first input",
            "[...document.querySelectorAll('#log .user')].some(e => e.innerText.includes('check the tests'))",
        )
        .await;
    let overflow = browser
        .js("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        .await;
    assert_eq!(overflow, json!(0), "the child's view scrolls sideways");
    browser.button("Allow").await.click().await.unwrap();
    browser
        .until(
            "the child's tool output",
            "document.querySelector('#log .tool .output')?.innerText.includes('child-ran')",
        )
        .await;
    browser
        .until(
            "the child's answer",
            "[...document.querySelectorAll('#log .assistant')].some(e => e.innerText.includes('Checked.'))",
        )
        .await;
    // Committed in the child's log, with the phone's address.
    let pointer: Value = serde_json::from_slice(
        &std::fs::read(pod.data_dir.join(format!("pods/{child}.json"))).unwrap(),
    )
    .unwrap();
    let decision = pod
        .session_lines(pointer["session_id"].as_str().unwrap())
        .into_iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .expect("the child's log holds the decision");
    assert_eq!(decision["entry"]["call_id"], "c1", "{decision}");
    assert_eq!(decision["entry"]["decision"], "allow", "{decision}");
    assert_eq!(decision["entry"]["remote"], "127.0.0.1", "{decision}");
    assert!(entries_of_kind(&pod, "approval_decision").is_empty());

    // Removed while its view is open: the page cannot see the door's 404
    // for its next upgrade, so it asks over HTTP, says so, and stops.
    let mut person = harness::Client::connect(&pod.socket);
    person.until_type("snapshot");
    person.send(json!({"type": "hello", "client": "person"}));
    harness::eventually("the child removed", Duration::from_secs(20), || {
        person.send(json!({"type": "remove_agent", "request_id": "r", "name": child}));
        person.until_with("the answer", |v| v["request_id"] == "r")["ok"] == true
    });
    browser
        .until(
            "the removed child's banner",
            "document.querySelector('#conn')?.className === 'banner gone' && document.querySelector('#conn').innerText.includes('was removed')",
        )
        .await;

    // And back to the parent, which sees the child's turn end.
    browser
        .c()
        .find(Locator::Id("back"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .until(
            "the parent's view again",
            &format!(
                "document.querySelector('#pod-name').innerText === 'pod {}' && location.search === ''",
                pod.name()
            ),
        )
        .await;
    browser
        .until(
            "the child's turn end at the parent",
            &format!(
                "[...document.querySelectorAll('#log .agent-entry')].some(e => e.innerText.includes('⎇ agent {child}: turn'))"
            ),
        )
        .await;
}

/// #36.9: every undo makes a session; the menu's session list shows each
/// rewind under the session it came from, marked, not as another copy of
/// its title.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_list_shows_a_rewind_under_its_session() {
    let _one = lock().await;
    let script = [
        json!({"events":[{"text":"first answer"}]}).to_string(),
        json!({"events":[{"text":"second answer"}]}).to_string(),
    ];
    let (pod, _port) = web_pod(&script.join("\n"), &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("fix the parser");
    c.until_entry("turn_end");
    let first = pod.log_lines()[0]["entry"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    c.run("and the lexer");
    c.until_entry("turn_end");
    succeeded(pod.command("undo").output().unwrap());
    let rewound = c.until_type("session_switched")["new_session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let browser = browser_or_skip!(Screen::Phone);
    open_page(&browser, &pod, false).await;
    browser
        .js("(document.getElementById('menu').open = true, document.getElementById('sessions-open').open = true, null)")
        .await;
    browser
        .until(
            "the session list",
            "document.querySelectorAll('#sessions li .title').length === 2",
        )
        .await;
    let rows = browser
        .js("[...document.querySelectorAll('#sessions li')].map(li => li.textContent)")
        .await;
    let rows: Vec<String> = serde_json::from_value(rows).unwrap();
    assert!(
        rows[0].starts_with("fix the parser") && rows[0].contains(&first[..8]),
        "{rows:?}"
    );
    assert!(rows[1].starts_with("└ "), "{rows:?}");
    assert!(
        rows[1].contains(&rewound[..8]) && rows[1].contains("rewound"),
        "{rows:?}"
    );
    assert!(!rows[1].contains("fix the parser"), "{rows:?}");
}
