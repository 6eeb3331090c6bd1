//! `pod serve --listen`: the protocol over a WebSocket, with real sockets
//! and a real WebSocket client (tungstenite), against the built binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::net::TcpStream;
use std::time::Duration;

use harness::{succeeded, Pod};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::{
    protocol::frame::coding::{Data, OpCode},
    protocol::frame::Frame,
    Message,
};

use harness::ws::Ws;

/// A pod listening on a free loopback port, and that port.
fn listening(builder: harness::PodBuilder) -> (Pod, u16) {
    let pod = builder.args(["--listen", "127.0.0.1:0"]).start();
    let mut local = pod.client();
    let snapshot = local.until_type("snapshot");
    let address = snapshot["greeting"]["listen"]["address"]
        .as_str()
        .expect("the greeting names the listen address")
        .to_owned();
    assert_eq!(snapshot["greeting"]["listen"]["tls"], false);
    assert_eq!(snapshot["greeting"]["access"], "full");
    assert_eq!(snapshot["greeting"]["access_reason"], Value::Null);
    let port = address.rsplit(':').next().unwrap().parse().unwrap();
    (pod, port)
}

fn token(pod: &Pod, args: &[&str]) -> String {
    let out = succeeded(
        pod.command("token")
            .arg("create")
            .args(args)
            .output()
            .unwrap(),
    );
    let token = out.trim().to_owned();
    assert_eq!(out, format!("{token}\n"), "the token alone on stdout");
    token
}

/// Opens `/v1/ws` with these extra headers; the HTTP status when refused.
fn open(port: u16, headers: &[(&str, &str)]) -> Result<Ws, (u16, Value)> {
    harness::ws::open(port, "", headers)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn connect(port: u16, token: &str) -> Ws {
    open(port, &[("authorization", &bearer(token))]).expect("the token is accepted")
}

fn next(ws: &mut Ws) -> Option<Value> {
    loop {
        match ws.read() {
            Ok(Message::Text(text)) => return Some(serde_json::from_str(text.as_str()).unwrap()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

fn until(ws: &mut Ws, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    loop {
        let frame = next(ws).unwrap_or_else(|| panic!("closed while waiting for {what}"));
        if pred(&frame) {
            return frame;
        }
    }
}

fn send(ws: &mut Ws, frame: Value) {
    ws.send(Message::text(frame.to_string())).unwrap();
}

/// `(session_id, seq, entry)` of the snapshot and every `entry` frame up to
/// and including the first `turn_end`.
fn view_until_turn_end(ws: &mut Ws, snapshot: Value) -> Vec<(String, u64, Value)> {
    let session = snapshot["session_id"].as_str().unwrap().to_owned();
    let mut view: Vec<(String, u64, Value)> = snapshot["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                session.clone(),
                l["seq"].as_u64().unwrap(),
                l["entry"].clone(),
            )
        })
        .collect();
    let mut ended = view.iter().any(|(_, _, e)| e["kind"] == "turn_end");
    while !ended {
        let frame = next(ws).expect("the connection stays open until the turn ends");
        if frame["type"] == "entry" {
            ended = frame["entry"]["kind"] == "turn_end";
            view.push((
                frame["session_id"].as_str().unwrap().to_owned(),
                frame["seq"].as_u64().unwrap(),
                frame["entry"].clone(),
            ));
        }
    }
    view
}

#[test]
fn websocket_clients_joining_mid_turn_see_exactly_the_log() {
    let (pod, port) = listening(Pod::builder().script(&harness::slow_text_reply(40, 25)));
    let token = token(&pod, &[]);
    let mut driver = connect(port, &token);
    let snapshot = until(&mut driver, "snapshot", |v| v["type"] == "snapshot");
    assert_eq!(snapshot["greeting"]["access"], "full");
    assert_eq!(snapshot["greeting"]["access_reason"], Value::Null);
    send(
        &mut driver,
        json!({"type":"run","segments":[{"type":"text","text":"hi"}]}),
    );
    // Joined at several instants of the reply, which streams for a second.
    let mut late = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        late.push(connect(port, &token));
    }
    let mut views = vec![view_until_turn_end(&mut driver, snapshot)];
    let mut mid_block = 0;
    for ws in &mut late {
        let snapshot = until(ws, "snapshot", |v| v["type"] == "snapshot");
        mid_block += usize::from(snapshot["in_flight"]["type"] == "text");
        views.push(view_until_turn_end(ws, snapshot));
    }
    assert!(
        mid_block > 0,
        "some client joined in the middle of the reply"
    );
    let log = pod.log_lines();
    for (who, view) in views.iter().enumerate() {
        let kinds: Vec<_> = view
            .iter()
            .map(|(_, s, e)| format!("{s}:{}", e["kind"]))
            .collect();
        assert_eq!(
            view.len(),
            log.len(),
            "client {who}: one frame per log line: {kinds:?} vs {:?}",
            harness::kinds(&log)
        );
        for (i, (_, seq, entry)) in view.iter().enumerate() {
            assert_eq!(
                *seq,
                log[i]["seq"].as_u64().unwrap(),
                "client {who}: at {i}"
            );
            assert_eq!(entry, &log[i]["entry"], "client {who}: entry {i}");
        }
    }
}

#[test]
fn refusals_come_before_the_upgrade_in_the_contracts_order() {
    let (pod, port) = listening(Pod::builder().args(["--max-remote-clients", "1"]));
    let token = token(&pod, &[]);
    let auth = bearer(&token);
    assert_eq!(open(port, &[]).err().map(|e| e.0), Some(401));
    assert_eq!(
        open(port, &[("authorization", "Bearer nope")])
            .err()
            .map(|e| e.0),
        Some(401)
    );
    // Host first: even a valid token is refused for a rebound name.
    let refused = open(
        port,
        &[("authorization", &auth), ("host", "evil.example:1")],
    )
    .err();
    assert_eq!(refused.as_ref().map(|e| e.0), Some(421));
    assert_eq!(refused.unwrap().1["type"], "error");
    for origin in ["http://evil.example", "null"] {
        let refused = open(port, &[("authorization", &auth), ("origin", origin)]).err();
        assert_eq!(refused.map(|e| e.0), Some(403), "{origin}");
    }
    let own = format!("http://127.0.0.1:{port}");
    let mut first = open(port, &[("authorization", &auth), ("origin", &own)]).unwrap();
    until(&mut first, "snapshot", |v| v["type"] == "snapshot");
    // The one client allowed is connected: the next gets 503.
    assert_eq!(
        open(port, &[("authorization", &auth)]).err().map(|e| e.0),
        Some(503)
    );
    drop(first);
    // The browser form of the token: the subprotocol list.
    let protocols = format!("pod.v1, pod.token.{token}");
    harness::eventually("the slot to free", Duration::from_secs(5), || {
        open(port, &[("sec-websocket-protocol", &protocols)]).is_ok()
    });
}

#[test]
fn ten_bad_tokens_lock_an_address_out_but_never_a_valid_token() {
    let (pod, port) = listening(Pod::builder());
    let token = token(&pod, &[]);
    // Responses: the 10 bad tokens are 401, then the address is locked out.
    for i in 0..10 {
        let status = open(port, &[("authorization", "Bearer wrong")])
            .err()
            .unwrap()
            .0;
        assert_eq!(status, 401, "attempt {i}");
    }
    assert_eq!(
        open(port, &[("authorization", "Bearer wrong")])
            .err()
            .map(|e| e.0),
        Some(429)
    );
    assert_eq!(open(port, &[]).err().map(|e| e.0), Some(429));
    let mut ws = connect(port, &token);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
}

#[test]
fn a_locked_out_address_still_pairs_with_a_valid_code() {
    let (pod, port) = listening(Pod::builder());
    for _ in 0..10 {
        let _ = open(port, &[("authorization", "Bearer wrong")]);
    }
    assert_eq!(open(port, &[]).err().map(|e| e.0), Some(429), "locked out");
    let pair = |code: &str| {
        let body = json!({ "code": code }).to_string();
        http(
            port,
            "POST",
            "/v1/pair",
            &[("content-type", "application/json")],
            body.as_bytes(),
        )
    };
    assert_eq!(
        pair("not-a-code").0,
        429,
        "a wrong code is still locked out"
    );
    let url = succeeded(pod.command("url").output().unwrap());
    let code = url.trim().rsplit("#pair=").next().unwrap().to_owned();
    let (status, _, body) = pair(&code);
    assert_eq!(
        status,
        200,
        "a valid code is accepted like a valid token: {}",
        String::from_utf8_lossy(&body)
    );
}

#[test]
fn read_only_tokens_cannot_take_the_places_kept_for_full_ones() {
    let (pod, port) = listening(Pod::builder().args(["--max-remote-clients", "4"]));
    let read = token(&pod, &["--read-only"]);
    let full = token(&pod, &[]);
    let mut held = Vec::new();
    let refused = loop {
        match open(port, &[("authorization", &bearer(&read))]) {
            Ok(mut ws) => {
                until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
                held.push(ws);
                assert!(held.len() <= 4, "more connections than places");
            }
            Err((status, _)) => break status,
        }
    };
    assert_eq!(refused, 503);
    assert_eq!(
        held.len(),
        3,
        "a quarter of 4 places is kept for full tokens"
    );
    let mut owner = connect(port, &full);
    let snapshot = until(&mut owner, "snapshot", |v| v["type"] == "snapshot");
    assert_eq!(snapshot["greeting"]["access"], "full");
    assert_eq!(
        open(port, &[("authorization", &bearer(&full))])
            .err()
            .map(|e| e.0),
        Some(503),
        "every place taken now"
    );
}

#[test]
fn a_read_only_token_reads_and_is_forbidden_everything_else() {
    let (pod, port) = listening(Pod::builder());
    let token = token(&pod, &["--read-only", "--label", "phone"]);
    let mut ws = connect(port, &token);
    let snapshot = until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    assert_eq!(snapshot["greeting"]["access"], "read");
    assert_eq!(snapshot["greeting"]["access_reason"], "read_token");
    send(
        &mut ws,
        json!({"type":"hello","client":"phone","request_id":"h"}),
    );
    let ok = until(&mut ws, "hello", |v| v["request_id"] == "h");
    assert_eq!(ok["type"], "response");
    for (id, frame) in [
        (
            "r",
            json!({"type":"run","segments":[{"type":"text","text":"x"}]}),
        ),
        ("s", json!({"type":"shutdown"})),
        ("t", json!({"type":"issue_token"})),
    ] {
        let mut frame = frame;
        frame["request_id"] = json!(id);
        send(&mut ws, frame);
        let refused = until(&mut ws, id, |v| v["request_id"] == id);
        assert_eq!(refused["code"], "forbidden", "{id}: {refused}");
    }
    // A full token over the network cannot mint tokens either.
    let full = token_for_pod_full(&pod);
    let mut ws = connect(port, &full);
    send(&mut ws, json!({"type":"issue_token","request_id":"t"}));
    let refused = until(&mut ws, "t", |v| v["request_id"] == "t");
    assert_eq!(refused["code"], "forbidden", "{refused}");
    let log =
        std::fs::read_to_string(pod.data_dir.join(format!("pods/{}.tokens", pod.name()))).unwrap();
    assert!(
        !log.contains(&full) && !log.contains(&token),
        "only hashes on disk"
    );
}

/// Sends `frame` with `id` as its request id; its answer.
fn ask(ws: &mut Ws, mut frame: Value, id: &str) -> Value {
    frame["request_id"] = json!(id);
    send(ws, frame);
    until(ws, id, |v| v["request_id"] == id)
}

#[test]
fn a_read_only_link_reads_only_the_files_the_conversation_showed() {
    let script = format!(
        "{}\n{}\n",
        json!({"events":[{"tool_call":{"id":"w","name":"write_file",
            "arguments":{"path":"notes.txt","content":"shown\n"}}}]}),
        json!({"events":[{"text":"done"}]})
    );
    let (pod, port) = listening(Pod::builder().script(&script).args(["--approval", "auto"]));
    std::fs::write(pod.workspace.join("secret.env"), "DB_PASSWORD=hunter2\n").unwrap();
    let mut local = pod.client();
    local.until_type("snapshot");
    local.run("write the notes");
    local.until_with("turn_end", |v| v["entry"]["kind"] == "turn_end");
    let checkpoint = pod
        .log_lines()
        .into_iter()
        .filter_map(|l| l["entry"]["checkpoint"].as_str().map(str::to_owned))
        .next_back()
        .expect("the turn took a checkpoint");
    let get_file = |path: &str| json!({"type":"get_file","checkpoint":checkpoint,"path":path});
    let read = token(&pod, &["--read-only"]);
    let mut ws = connect(port, &read);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    let listed = ask(
        &mut ws,
        json!({"type":"list_completions","kind":"file","prefix":""}),
        "l",
    );
    assert_eq!(listed["type"], "response", "{listed}");
    assert_eq!(listed["items"], json!([]), "no file listing: {listed}");
    let secret = ask(&mut ws, get_file("secret.env"), "s");
    assert_eq!(secret["code"], "forbidden", "{secret}");
    let live = ask(
        &mut ws,
        json!({"type":"get_diff","from":checkpoint,"to":null}),
        "d",
    );
    assert_eq!(live["code"], "forbidden", "{live}");
    let shown = ask(&mut ws, get_file("notes.txt"), "n");
    assert_eq!(shown["type"], "response", "{shown}");
    // A full token still reads the whole checkpoint.
    let mut owner = connect(port, &token(&pod, &[]));
    until(&mut owner, "snapshot", |v| v["type"] == "snapshot");
    let secret = ask(&mut owner, get_file("secret.env"), "s");
    assert_eq!(secret["type"], "response", "{secret}");
}

fn token_for_pod_full(pod: &Pod) -> String {
    token(pod, &[])
}

#[test]
fn revoking_a_token_closes_its_connections_with_unauthorized() {
    let (pod, port) = listening(Pod::builder());
    let token = token(&pod, &["--label", "laptop"]);
    let mut ws = connect(port, &token);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    let list: Value = serde_json::from_str(&succeeded(
        pod.command("token")
            .args(["list", "--json"])
            .output()
            .unwrap(),
    ))
    .unwrap();
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["label"], "laptop");
    assert!(!list.to_string().contains(&token));
    let started = std::time::Instant::now();
    succeeded(pod.command("token").args(["revoke", &id]).output().unwrap());
    let said = until(&mut ws, "unauthorized", |v| v["type"] == "error");
    assert_eq!(said["code"], "unauthorized");
    assert!(next(&mut ws).is_none(), "then closed");
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        open(port, &[("authorization", &bearer(&token))])
            .err()
            .map(|e| e.0),
        Some(401)
    );
}

#[test]
fn a_pairing_code_is_exchanged_once() {
    let (pod, port) = listening(Pod::builder());
    let url = succeeded(pod.command("url").output().unwrap());
    let url = url.trim();
    let prefix = format!("http://127.0.0.1:{port}/#pair=");
    assert!(url.starts_with(&prefix), "{url}");
    let code = &url[prefix.len()..];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pair = |code: &str| {
        rt.block_on(async {
            let response = reqwest::Client::new()
                .post(format!("http://127.0.0.1:{port}/v1/pair"))
                .header("content-type", "application/json")
                .header(
                    "user-agent",
                    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 \
                     (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
                )
                .body(json!({ "code": code }).to_string())
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body = response.bytes().await.unwrap();
            (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
        })
    };
    let (status, body) = pair(code);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "full");
    let mut ws = connect(port, body["token"].as_str().unwrap());
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    assert_eq!(pair(code).0, 401, "a code is good for one use");
    // The device is named in `pod token list`, not only the date (issue 36).
    let listed = succeeded(pod.command("token").arg("list").output().unwrap());
    assert!(listed.contains("· iPhone · Safari"), "{listed}");
    // The page itself needs no token and carries the security headers.
    rt.block_on(async {
        let page = reqwest::get(format!("http://127.0.0.1:{port}/"))
            .await
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        let headers = page.headers();
        assert!(headers["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'; script-src 'self'"));
        assert_eq!(headers["referrer-policy"], "no-referrer");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    });
}

#[test]
fn plaintext_on_a_network_address_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pod"))
        .args(["serve", "--listen", "0.0.0.0:0", "--socket"])
        .arg(dir.path().join("s.sock"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--allow-plaintext") && said.contains("--tls-cert"),
        "{said}"
    );
}

#[test]
fn binary_and_oversized_messages_are_refused_and_the_connection_kept() {
    let (pod, port) = listening(Pod::builder().args(["--max-frame-bytes", "1000"]));
    let token = token(&pod, &[]);
    let mut ws = connect(port, &token);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    ws.send(Message::binary(vec![1, 2, 3])).unwrap();
    let refused = until(&mut ws, "bad_frame", |v| v["type"] == "error");
    assert_eq!(refused["code"], "bad_frame");
    // 3 fragments of 600 bytes: only their sum passes the limit.
    let part = vec![b' '; 600];
    for (opcode, last) in [
        (Data::Text, false),
        (Data::Continue, false),
        (Data::Continue, true),
    ] {
        let frame = Frame::message(part.clone(), OpCode::Data(opcode), last);
        ws.write(Message::Frame(frame)).unwrap();
    }
    ws.flush().unwrap();
    let refused = until(&mut ws, "frame_too_large", |v| v["type"] == "error");
    assert_eq!(refused["code"], "frame_too_large");
    send(
        &mut ws,
        json!({"type":"hello","client":"x","request_id":"still"}),
    );
    let ok = until(&mut ws, "hello", |v| v["request_id"] == "still");
    assert_eq!(ok["type"], "response");
    // Two objects in one message are one bad frame.
    ws.send(Message::text(
        "{\"type\":\"hello\",\"client\":\"a\"}\n{\"type\":\"shutdown\"}",
    ))
    .unwrap();
    let refused = until(&mut ws, "bad_frame", |v| v["type"] == "error");
    assert_eq!(refused["code"], "bad_frame");
}

#[test]
fn an_oversized_message_in_one_frame_is_refused_and_the_connection_kept() {
    let (pod, port) = listening(Pod::builder().args(["--max-frame-bytes", "1000"]));
    let token = token(&pod, &[]);
    let mut ws = connect(port, &token);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    // As a browser sends a long paste: one message, one frame, here 4 MB
    // against a 1000-byte limit.
    let long = json!({"type":"hello","client":"x".repeat(4 << 20),"request_id":"long"});
    send(&mut ws, long);
    let refused = until(&mut ws, "frame_too_large", |v| v["type"] == "error");
    assert_eq!(refused["code"], "frame_too_large", "{refused}");
    send(
        &mut ws,
        json!({"type":"hello","client":"x","request_id":"after"}),
    );
    let ok = until(&mut ws, "hello", |v| v["request_id"] == "after");
    assert_eq!(ok["type"], "response", "the connection is kept: {ok}");
}

#[test]
fn a_client_that_sends_binary_messages_and_never_reads_is_cut_off() {
    use std::io::Write as _;
    let (pod, port) = listening(Pod::builder());
    let token = token(&pod, &[]);
    let mut ws = connect(port, &token);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    // Each empty binary message costs the client 6 bytes and asks for a
    // `bad_frame` answer of some 150; 200 000 of them are answers worth
    // far more than the TCP buffers hold, so the answers must queue in
    // the pod unless it stops taking them.
    let one = {
        let mut frame = Frame::message(Vec::new(), OpCode::Data(Data::Binary), true);
        frame.header_mut().mask = Some([9, 8, 7, 6]);
        let mut out = Vec::new();
        frame.format(&mut out).unwrap();
        out
    };
    let many: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 200_000)
        .collect();
    // Written on the raw socket, not read meanwhile; the pod may close
    // while this writes.
    let _ = ws.get_mut().write_all(&many);
    let mut refused = 0;
    let mut last = Value::Null;
    while let Some(frame) = next(&mut ws) {
        if frame["code"] == "bad_frame" {
            refused += 1;
        } else {
            last = frame;
        }
    }
    assert_eq!(
        last["code"], "lagged",
        "cut off as a client that lags: {last}"
    );
    assert!(
        refused < 10_000,
        "{refused} answers queued for a client that did not read"
    );
}

/// One HTTP/1.1 request on a fresh connection: the status, the headers
/// (lowercased) and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A refusal may come before the body is read; the write may then fail.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    (status, head, response[split + 4..].to_vec())
}

/// The icon every browser asks for unbidden is "none" (204), not an
/// error (issue 36); other unknown paths are still 404.
#[test]
fn the_favicon_is_no_content_not_a_404() {
    let (_pod, port) = listening(Pod::builder());
    let (status, _, body) = http(port, "GET", "/favicon.ico", &[], b"");
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    assert!(body.is_empty());
    let (status, _, _) = http(port, "GET", "/nothing-here", &[], b"");
    assert_eq!(status, 404);
}

/// A PNG's signature and header, 2×3.
const PNG_HEAD: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x06\0\0\0\0\0\0\0";

#[test]
fn blobs_over_http_store_and_serve_images_with_every_refusal() {
    let (pod, port) = listening(Pod::builder().args(["--max-blob-bytes", "1000"]));
    let full = token(&pod, &[]);
    let read = token(&pod, &["--read-only"]);
    let auth = |t: &str| format!("Bearer {t}");
    let (status, _, body) = http(
        port,
        "POST",
        "/v1/blobs",
        &[
            ("Authorization", &auth(&full)),
            ("Content-Type", "image/png"),
        ],
        PNG_HEAD,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let stored: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(stored["type"], "response");
    assert_eq!(stored["size"], PNG_HEAD.len());
    assert_eq!(stored["media_type"], "image/png");
    let id = stored["blob"].as_str().unwrap().to_owned();
    assert!(id.starts_with("sha256:") && id.len() == 71, "{id}");

    // Any token reads it back, as bytes with their type.
    let (status, head, bytes) = http(
        port,
        "GET",
        &format!("/v1/blobs/{id}"),
        &[("Authorization", &auth(&read))],
        b"",
    );
    assert_eq!(status, 200);
    assert!(head.contains("content-type: image/png"), "{head}");
    assert!(head.contains("content-security-policy"), "{head}");
    assert_eq!(bytes, PNG_HEAD);

    let refused = |status: u16, body: &[u8], code: &str| {
        let body: Value = serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
        assert_eq!(body["type"], "error", "{status}: {body}");
        assert_eq!(body["code"], code, "{status}: {body}");
        status
    };
    let post = |token: &str, content_type: &str, body: &[u8]| {
        http(
            port,
            "POST",
            "/v1/blobs",
            &[
                ("Authorization", &auth(token)),
                ("Content-Type", content_type),
            ],
            body,
        )
    };
    let (s, _, b) = post(&read, "image/png", PNG_HEAD);
    assert_eq!(
        refused(s, &b, "forbidden"),
        403,
        "a read-only token cannot store"
    );
    let (s, _, b) = post("wrong", "image/png", PNG_HEAD);
    assert_eq!(refused(s, &b, "unauthorized"), 401);
    let (s, _, b) = post(&full, "image/bmp", b"BM\0\0");
    assert_eq!(refused(s, &b, "invalid_params"), 415, "a type not taken");
    let (s, _, b) = post(&full, "image/jpeg", PNG_HEAD);
    assert_eq!(
        refused(s, &b, "invalid_params"),
        400,
        "bytes not of the type claimed"
    );
    let (s, _, b) = post(&full, "image/png", &[PNG_HEAD, &[0; 2000]].concat());
    assert_eq!(refused(s, &b, "blob_too_large"), 413);
    // Over the limit by its Content-Length alone: refused before the body.
    let (s, _, b) = http(
        port,
        "POST",
        "/v1/blobs",
        &[
            ("Authorization", &auth(&full)),
            ("Content-Type", "image/png"),
            ("Content-Length", "99999999"),
        ],
        b"",
    );
    assert_eq!(refused(s, &b, "blob_too_large"), 413);
    let unknown = format!("/v1/blobs/sha256:{}", "0".repeat(64));
    let (s, _, b) = http(
        port,
        "GET",
        &unknown,
        &[("Authorization", &auth(&full))],
        b"",
    );
    assert_eq!(refused(s, &b, "blob_not_found"), 404);
    let (s, _, b) = http(port, "GET", &format!("/v1/blobs/{id}"), &[], b"");
    assert_eq!(refused(s, &b, "unauthorized"), 401);

    // get_blob is a read method on the WebSocket too; put_blob is not.
    let mut ws = connect(port, &read);
    until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    send(
        &mut ws,
        json!({"type":"get_blob","request_id":"g","blob":id}),
    );
    let got = until(&mut ws, "g", |v| v["request_id"] == "g");
    assert_eq!(got["type"], "response", "{got}");
    assert_eq!(got["media_type"], "image/png");
    send(
        &mut ws,
        json!({"type":"put_blob","request_id":"p","media_type":"image/png","data":"AA=="}),
    );
    let refused = until(&mut ws, "p", |v| v["request_id"] == "p");
    assert_eq!(refused["code"], "forbidden", "{refused}");
}

#[test]
fn a_snapshot_longer_than_the_bridges_chunk_arrives_as_one_message() {
    // The bridge sends a line over its 64 KiB chunk as fragments of one
    // message; multi-byte characters make some fragment boundaries fall
    // inside one, which the message as a whole must not show.
    let (pod, port) = listening(
        Pod::builder()
            .args(["--max-frame-bytes", "4000000"])
            .script(
                &json!({"events": [{"text": format!("{}ü", "é".repeat(300_000))}]}).to_string(),
            ),
    );
    let mut local = pod.client();
    local.until_type("snapshot");
    local.run("hi");
    local.until_entry("turn_end");
    let expected = pod.client().until_type("snapshot");
    let token = token(&pod, &[]);
    let mut ws = connect(port, &token);
    let snapshot = until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
    let len = snapshot.to_string().len();
    assert!(
        len > 600_000,
        "{len}: {}",
        &snapshot.to_string()[..len.min(2000)]
    );
    assert_eq!(snapshot["entries"], expected["entries"]);
    // Whole messages go on after it.
    send(
        &mut ws,
        json!({"type":"hello","client":"x","request_id":"after"}),
    );
    let ok = until(&mut ws, "hello", |v| v["request_id"] == "after");
    assert_eq!(ok["type"], "response");
}

#[test]
fn a_websocket_client_that_stops_reading_is_cut_off_with_lagged() {
    // The same rule as for a local client: a frame larger than the limit is
    // not lag while the client reads it, but what piles up behind it is.
    let (pod, port) = listening(Pod::builder().args([
        "--max-client-lag-bytes",
        "1048576",
        "--context-window",
        "100000000",
    ]));
    let token = token(&pod, &[]);
    let mut stuck = connect(port, &token);
    until(&mut stuck, "snapshot", |v| v["type"] == "snapshot");
    let mut local = pod.client();
    local.until_type("snapshot");
    for _ in 0..6 {
        local.send(
            json!({"type":"run","segments":[{"type":"paste","id":1,"text":"p".repeat(2_000_000)}]}),
        );
        local.until_entry("turn_end");
    }
    // It reads what the network and its feed held, then `lagged`, then the
    // close; far less than the 12 MB the runs made.
    stuck
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut bytes, mut lagged) = (0, false);
    while let Ok(message) = stuck.read() {
        match message {
            Message::Text(text) => {
                bytes += text.len();
                lagged |= text.contains("\"lagged\"");
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    assert!(lagged, "no lagged error after {bytes} bytes");
    assert!(bytes < 12_000_000, "the stuck client got everything");
}

/// What a tool that reaches the Unix-socket door sees: it connects with
/// the full token planted for it and prints the access its greeting gives.
const TOOL_AT_THE_DOOR: &str = r#"
import base64, os, re, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
token = open(sys.argv[2]).read().strip()
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Authorization: Bearer %s\r\n\r\n" % (key, token)).encode())
data = b""
while b'"access":' not in data:
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
print("status:", data.split(b"\r\n")[0].decode())
for field in ("access", "access_reason"):
    m = re.search(rb'"%s":"(\w+)"' % field.encode(), data)
    print(field + ":", m.group(1).decode() if m else None)
"#;

/// `--listen unix:PATH`: the same protocol, for a reverse proxy on this
/// machine, on a Unix socket only this user may open (0600). A real
/// WebSocket client over it — the proxy's place — passes the same `Host`
/// and token checks and gets full access with a full token; a process a
/// pod started (here with Unix sockets opened to it) gets read-only access
/// whatever token it holds, as on the pod's own socket; the pairing link
/// names the proxy's origin.
#[test]
fn the_unix_socket_door_serves_a_proxy_and_keeps_tools_read_only() {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    // Not under /tmp or $TMPDIR, where the sandbox lets tools write
    // (refused, below) — nor under the target directory, which is there when
    // the checkout is: the runtime directory, else the home directory.
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|dir| dir.is_dir())
        .or_else(|| std::env::var_os("HOME").map(std::path::PathBuf::from))
        .expect("XDG_RUNTIME_DIR or HOME is set");
    let dir = tempfile::Builder::new()
        .prefix("pod-door-test")
        .tempdir_in(base)
        .unwrap();
    let door = dir.path().join("web.sock");
    let planted = dir.path().join("planted-token");
    let command = format!(
        "python3 - '{}' '{}' <<'EOF'\n{TOOL_AT_THE_DOOR}\nEOF",
        door.display(),
        planted.display()
    );
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&harness::bash_step(&[("b1", &command)]))
        .arg(format!("--listen=unix:{}", door.display()))
        .args(["--allow-host", "pod.example.org"])
        .args(["--allow-origin", "https://pod.example.org"])
        .args(["--sandbox-unix-sockets", "on"])
        .start();
    let mut local = pod.client();
    let snapshot = local.until_type("snapshot");
    let meta = std::fs::symlink_metadata(&door).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        snapshot["greeting"]["listen"]["address"],
        format!("unix:{}", door.display())
    );

    let token = token(&pod, &[]);
    let url = "ws://pod.example.org/v1/ws";
    let auth = bearer(&token);
    let mut ws = harness::ws::open_unix(&door, url, &[("authorization", &auth)])
        .expect("the proxy's request is accepted");
    let Message::Text(first) = ws.read().unwrap() else {
        panic!("the first message is not text");
    };
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first["type"], "snapshot");
    assert_eq!(first["greeting"]["access"], "full", "{first}");

    let (status, body) = harness::ws::open_unix(&door, url, &[]).unwrap_err();
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")));
    let (status, _) = harness::ws::open_unix(
        &door,
        "ws://evil.example/v1/ws",
        &[("authorization", &auth)],
    )
    .unwrap_err();
    assert_eq!(status, 421, "a Host nobody allowed is refused");

    let link = succeeded(pod.command("url").output().unwrap());
    assert!(
        link.trim().starts_with("https://pod.example.org/#pair="),
        "{link}"
    );

    std::fs::write(&planted, &token).unwrap();
    local.run("go");
    let results = local.until_entry("tool_results").to_string();
    assert!(results.contains("status: HTTP/1.1 101"), "{results}");
    assert!(results.contains("access: read"), "{results}");
    assert!(results.contains("access_reason: descendant"), "{results}");
}

/// A door where the pod's tools may write would let one put its own socket
/// there and take what the proxy forwards: refused at start, as TLS on it
/// is (the proxy terminates TLS).
#[test]
fn a_unix_socket_door_where_tools_write_or_with_tls_is_refused_at_start() {
    for (listen, extra, says) in [
        (
            "unix:/tmp/pod-door.sock",
            &[][..],
            "where the pod's tools may write",
        ),
        (
            "unix:WORKSPACE/door.sock",
            &[][..],
            "where the pod's tools may write",
        ),
        (
            "unix:TARGET/door.sock",
            &["--tls-cert", "c.pem", "--tls-key", "k.pem"][..],
            "leave out --tls-cert",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        let script = dir.path().join("script.jsonl");
        std::fs::write(&script, "").unwrap();
        let listen = listen
            .replace("WORKSPACE", &workspace.display().to_string())
            .replace("TARGET", env!("CARGO_TARGET_TMPDIR"));
        let out = std::process::Command::new(harness::POD)
            .args(["serve", "--provider", "script", "--script"])
            .arg(&script)
            .arg("--workspace")
            .arg(&workspace)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--socket")
            .arg(dir.path().join("pod.sock"))
            .arg(format!("--listen={listen}"))
            .args(extra)
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{listen}: {err}");
        assert!(err.contains(says), "{listen}: {err}");
    }
}

/// The greeting says whether the pod takes `always` from the network, so a
/// remote client can leave out what would be refused (issue 36): absent by
/// default, `true` with `--allow-remote-always`, on the WebSocket as on the
/// Unix socket.
#[test]
fn the_greeting_says_whether_always_is_taken_from_the_network() {
    for allowed in [false, true] {
        let mut builder = Pod::builder();
        if allowed {
            builder = builder.arg("--allow-remote-always");
        }
        let (pod, port) = listening(builder);
        let full = token_for_pod_full(&pod);
        let mut ws = connect(port, &full);
        let snapshot = until(&mut ws, "snapshot", |v| v["type"] == "snapshot");
        let said = &snapshot["greeting"]["allow_remote_always"];
        match allowed {
            true => assert_eq!(said, true, "{snapshot}"),
            false => assert_eq!(said, &Value::Null, "absent: {snapshot}"),
        }
    }
}
