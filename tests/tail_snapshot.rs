//! Tail snapshots (`GET /v1/ws?tail=N`) and `get_entries`: a client that
//! shows only the latest screen gets the last N entries and `first_seq`,
//! pages older ones on demand, and what it has seen — paged history, tail,
//! suffix — is the log, no gap, no duplicate. Real pods, real WebSockets
//! (tungstenite) and real Unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use harness::{succeeded, Pod};
use proptest::prelude::*;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use harness::ws::Ws;

/// A pod listening on a free loopback port, that port, and a full token.
fn listening(builder: harness::PodBuilder) -> (Pod, u16, String) {
    let pod = builder.args(["--listen", "127.0.0.1:0"]).start();
    let snapshot = pod.client().until_type("snapshot");
    let address = snapshot["greeting"]["listen"]["address"]
        .as_str()
        .expect("the greeting names the listen address")
        .to_owned();
    let port = address.rsplit(':').next().unwrap().parse().unwrap();
    let token = create_token(&pod, &[]);
    (pod, port, token)
}

fn create_token(pod: &Pod, args: &[&str]) -> String {
    let out = pod
        .command("token")
        .arg("create")
        .args(args)
        .output()
        .unwrap();
    succeeded(out).trim().to_owned()
}

/// Opens `/v1/ws` with this query; the HTTP status and body when refused.
fn open(port: u16, token: &str, query: &str) -> Result<Ws, (u16, Value)> {
    harness::ws::open(
        port,
        query,
        &[("authorization", &format!("Bearer {token}"))],
    )
}

fn tail(port: u16, token: &str, n: usize) -> Ws {
    open(port, token, &format!("?tail={n}")).expect("a valid tail is accepted")
}

fn next(ws: &mut Ws) -> Value {
    loop {
        match ws.read() {
            Ok(Message::Text(text)) => {
                let frame: Value = serde_json::from_str(text.as_str()).unwrap();
                harness::schema::check_received(&frame);
                return frame;
            }
            Ok(Message::Close(_)) | Err(_) => panic!("the connection closed"),
            Ok(_) => continue,
        }
    }
}

fn until(ws: &mut Ws, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let frame = next(ws);
        if pred(&frame) {
            return frame;
        }
    }
}

fn send(ws: &mut Ws, frame: Value) {
    let text = frame.to_string();
    harness::schema::check_sent(format!("{text}\n").as_bytes());
    ws.send(Message::text(text)).unwrap();
}

fn get_entries(session: &str, before_seq: u64, limit: u64) -> Value {
    json!({"type":"get_entries","request_id":format!("page-{before_seq}"),
           "session_id":session,"before_seq":before_seq,"limit":limit})
}

/// `(seq, entry)` of a snapshot's or a response's `entries`.
fn lines(entries: &Value) -> Vec<(u64, Value)> {
    entries
        .as_array()
        .expect("an entries array")
        .iter()
        .map(|l| (l["seq"].as_u64().unwrap(), l["entry"].clone()))
        .collect()
}

fn log_pairs(log: &[Value]) -> Vec<(u64, Value)> {
    log.iter()
        .map(|l| (l["seq"].as_u64().unwrap(), l["entry"].clone()))
        .collect()
}

#[test]
fn a_tail_snapshot_holds_the_last_entries_and_get_entries_pages_the_rest() {
    let (pod, port, token) = listening(Pod::builder());
    let mut driver = pod.client();
    driver.until_type("snapshot");
    for i in 0..4 {
        driver.run(&format!("message {i}"));
    }
    for _ in 0..4 {
        driver.until_entry("turn_end");
    }
    let log = log_pairs(&pod.log_lines());
    let total = log.len() as u64;
    assert_eq!(total, 14, "session_start, environment, 4 × 3 entries");

    let mut ws = tail(port, &token, 5);
    let snapshot = until(&mut ws, |v| v["type"] == "snapshot");
    assert_eq!(snapshot["first_seq"], total - 5, "{snapshot}");
    assert_eq!(lines(&snapshot["entries"]), log[9..]);
    let session = snapshot["session_id"].as_str().unwrap().to_owned();

    send(&mut ws, get_entries(&session, 9, 4));
    let page = until(&mut ws, |v| v["type"] == "response");
    assert_eq!(page["request_id"], "page-9");
    assert_eq!(page["session_id"], session.as_str());
    assert_eq!(lines(&page["entries"]), log[5..9]);
    // The start of the session: fewer than asked, then none.
    send(&mut ws, get_entries(&session, 3, 10));
    let page = until(&mut ws, |v| v["type"] == "response");
    assert_eq!(lines(&page["entries"]), log[..3]);
    send(&mut ws, get_entries(&session, 0, 10));
    let page = until(&mut ws, |v| v["type"] == "response");
    assert_eq!(page["entries"], json!([]));

    // A tail longer than the session is the whole session, from 0.
    let mut ws = tail(port, &token, 10_000);
    let snapshot = until(&mut ws, |v| v["type"] == "snapshot");
    assert_eq!(snapshot["first_seq"], 0);
    assert_eq!(lines(&snapshot["entries"]), log);

    // Without `tail` nothing changes: every entry, and no `first_seq`.
    let mut ws = open(port, &token, "").unwrap();
    let snapshot = until(&mut ws, |v| v["type"] == "snapshot");
    assert!(snapshot.get("first_seq").is_none(), "{snapshot}");
    assert_eq!(lines(&snapshot["entries"]), log);
}

#[test]
fn a_bad_tail_is_refused_with_400_before_the_upgrade() {
    let (pod, port, token) = listening(Pod::builder());
    for query in [
        "?tail=0",
        "?tail=10001",
        "?tail=-1",
        "?tail=ten",
        "?tail=",
        "?tail=1.5",
        "?tail=3&tail=4",
    ] {
        let (status, body) = open(port, &token, query)
            .err()
            .unwrap_or_else(|| panic!("{query} was accepted"));
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["type"], "error", "{query}: {body}");
        assert_eq!(body["code"], "invalid_params", "{query}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("tail"),
            "{query}: the message says what was wrong: {message}"
        );
    }
    // The token is still checked first: no token is 401, whatever the tail.
    let refused = open(port, "nope", "?tail=0").err().map(|e| e.0);
    assert_eq!(refused, Some(401));
    // The edges of the range are accepted.
    for n in [1, 10_000] {
        let mut ws = tail(port, &token, n);
        until(&mut ws, |v| v["type"] == "snapshot");
    }
    drop(pod);
}

#[test]
fn get_entries_is_a_read_method_on_both_transports_and_bounds_its_limit() {
    let (pod, port, _token) = listening(Pod::builder());
    let mut local = pod.client();
    let snapshot = local.until_type("snapshot");
    let session = snapshot["session_id"].as_str().unwrap().to_owned();
    local.run("hello");
    local.until_entry("turn_end");
    let log = log_pairs(&pod.log_lines());

    // Over the Unix socket, by a unique prefix of the session id.
    local.send(get_entries(&session[..8], 100, 2));
    let page = local.until_type("response");
    assert_eq!(page["session_id"], session.as_str());
    assert_eq!(lines(&page["entries"]), log[log.len() - 2..]);
    local.send_unchecked(format!("{}\n", get_entries(&session, 2, 1001)).as_bytes());
    let refused = local.until_type("error");
    assert_eq!(refused["code"], "invalid_params", "{refused}");
    assert_eq!(refused["request_id"], "page-2");
    assert!(
        refused["message"].as_str().unwrap().contains("1000"),
        "{refused}"
    );
    local.send(get_entries("ffffffff-0000", 2, 10));
    assert_eq!(local.until_type("error")["code"], "session_not_found");

    // A read-only token may page too.
    let read = create_token(&pod, &["--read-only"]);
    let mut ws = tail(port, &read, 1);
    let snapshot = until(&mut ws, |v| v["type"] == "snapshot");
    assert_eq!(snapshot["greeting"]["access"], "read");
    let first = snapshot["first_seq"].as_u64().unwrap();
    send(&mut ws, get_entries(&session, first, 1000));
    let page = until(&mut ws, |v| v["type"] == "response" || v["type"] == "error");
    assert_eq!(page["type"], "response", "{page}");
    assert_eq!(lines(&page["entries"]), log[..first as usize]);
}

/// What one tail client saw: it joined, paged the history before its
/// snapshot back to seq 0 while the suffix arrived, and read on to the
/// last entry of the session.
fn tail_client_view(mut ws: Ws, limit: u64, last_seq: u64) -> (Vec<(u64, Value)>, u64) {
    let snapshot = until(&mut ws, |v| v["type"] == "snapshot");
    let session = snapshot["session_id"].as_str().unwrap().to_owned();
    let first = snapshot["first_seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("a tail snapshot says first_seq: {snapshot}"));
    let tail = lines(&snapshot["entries"]);
    assert_eq!(tail.first().map(|l| l.0), Some(first), "{snapshot}");
    let mut history: Vec<(u64, Value)> = Vec::new();
    let mut suffix: Vec<(u64, Value)> = Vec::new();
    let mut before = first;
    if before > 0 {
        send(&mut ws, get_entries(&session, before, limit));
    }
    let mut last = tail.last().map_or(0, |l| l.0);
    while before > 0 || last < last_seq {
        let frame = next(&mut ws);
        match frame["type"].as_str() {
            Some("entry") => {
                assert_eq!(frame["session_id"], session.as_str());
                last = frame["seq"].as_u64().unwrap();
                suffix.push((last, frame["entry"].clone()));
            }
            Some("response") => {
                assert_eq!(frame["request_id"], format!("page-{before}"));
                let page = lines(&frame["entries"]);
                assert_eq!(page.len() as u64, limit.min(before), "page before {before}");
                before -= page.len() as u64;
                history.splice(0..0, page);
                if before > 0 {
                    send(&mut ws, get_entries(&session, before, limit));
                }
            }
            Some("error") => panic!("unexpected error: {frame}"),
            _ => {}
        }
    }
    history.extend(tail);
    history.extend(suffix);
    (history, first)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// The invariant for tail snapshots: clients join at random moments of
    /// back-to-back turns with random tails and page sizes; each one's
    /// paged history + tail + suffix is exactly the log.
    #[test]
    fn tail_clients_joining_at_any_moment_see_exactly_the_log(
        turns in 2usize..5,
        joins in proptest::collection::vec((0usize..20, 1usize..12, 1u64..6), 1..5),
    ) {
        let (pod, port, token) = listening(Pod::builder());
        let mut driver = pod.client();
        let at_start = driver.until_type("snapshot")["entries"].as_array().unwrap().len();
        for i in 0..turns {
            driver.run(&format!("message {i}"));
        }
        let total = 2 + 3 * turns;
        // The entries the driver sees committed after its snapshot.
        let to_come = total - at_start;
        let last_seq = total as u64 - 1;
        let mut joins = joins;
        joins.sort();
        let mut seen = 0;
        let mut clients = Vec::new();
        for (at, tail_len, limit) in joins {
            // Join once the driver has seen `at` entries committed (while
            // the turns go on, or after the last one).
            while seen < at.min(to_come) {
                driver.until_with("an entry", |v| v["type"] == "entry");
                seen += 1;
            }
            let ws = tail(port, &token, tail_len);
            clients.push((
                tail_len,
                std::thread::spawn(move || tail_client_view(ws, limit, last_seq)),
            ));
        }
        while seen < to_come {
            driver.until_with("an entry", |v| v["type"] == "entry");
            seen += 1;
        }
        let log = log_pairs(&pod.log_lines());
        prop_assert_eq!(log.len(), total);
        for (tail_len, client) in clients {
            let (view, _first) = client.join().unwrap();
            let seqs: Vec<u64> = view.iter().map(|l| l.0).collect();
            prop_assert_eq!(seqs, (0..total as u64).collect::<Vec<_>>(), "tail {}", tail_len);
            prop_assert_eq!(&view, &log);
        }
    }
}
