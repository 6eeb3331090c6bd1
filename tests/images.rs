//! Images end to end: `put_blob` / `get_blob` over the socket, the `image`
//! segment, and what real HTTP servers on 127.0.0.1 receive in each wire
//! format, with every refusal the contract names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;
mod support;

use base64::Engine as _;
use harness::{Client, Pod};
use serde_json::{json, Value};
use support::{data_frames, model_server, typed_frames, Reply};

/// A PNG's signature and header: `width`×`height` is all the pod reads.
fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend_from_slice(&width.to_be_bytes());
    bytes.extend_from_slice(&height.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    bytes
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The answer to the request `id`: its `response` or `error`.
fn answer(c: &mut Client, id: &str) -> Value {
    c.until_with(id, |v| {
        (v["type"] == "response" || v["type"] == "error") && v["request_id"] == id
    })
}

fn put(c: &mut Client, id: &str, media_type: &str, data: &str) -> Value {
    c.send(json!({"type":"put_blob","request_id":id,"media_type":media_type,"data":data}));
    answer(c, id)
}

fn image(blob: &Value, name: &str) -> Value {
    json!({"type":"image","blob":blob,"media_type":"image/png","name":name})
}

const OPENAI_OK: [&str; 3] = [
    r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"A red square."},"finish_reason":null}]}"#,
    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    "[DONE]",
];

fn openai_pod(server: &support::Server, args: &[&str]) -> Pod {
    let mut builder = Pod::builder().args([
        "--provider",
        "openai",
        "--base-url",
        &format!("{}/v1", server.url),
    ]);
    for arg in args {
        builder = builder.arg(*arg);
    }
    builder.start()
}

/// The user message of the request (the last one).
fn last_user(request: &Value) -> Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone()
}

#[test]
fn openai_gets_an_image_url_part_in_its_place_among_the_text() {
    let (_rt, server) = model_server(vec![Reply::sse(&data_frames(&OPENAI_OK))]);
    let pod = openai_pod(&server, &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    let bytes = png(1280, 720);
    let stored = put(&mut c, "p1", "image/png", &b64(&bytes));
    assert_eq!(stored["type"], "response", "{stored}");
    let digest = format!("sha256:{}", sha256_hex(&bytes));
    assert_eq!(stored["blob"], digest.as_str());
    assert_eq!(stored["size"], bytes.len());
    assert_eq!(stored["media_type"], "image/png");
    c.send(json!({"type":"run","segments":[
        {"type":"text","text":"what is"},
        image(&stored["blob"], "shot.png"),
        {"type":"text","text":"this?"},
    ]}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "completed", "{end}");
    let body = server.requests()[0].json();
    // The pod's own note on the environment may follow, as a text part.
    let mut user = last_user(&body);
    user["content"].as_array_mut().unwrap().truncate(3);
    assert_eq!(
        user,
        json!({"role":"user","content":[
            {"type":"text","text":"what is\n"},
            {"type":"image_url","image_url":{"url":format!("data:image/png;base64,{}", b64(&bytes))}},
            {"type":"text","text":"this?"},
        ]})
    );
    // The log holds the reference only, exactly as sent.
    let input = &pod.log_lines()[1]["entry"];
    assert_eq!(input["segments"][1], image(&stored["blob"], "shot.png"));
    assert!(!input.to_string().contains(&b64(&bytes)));
}

#[test]
fn anthropic_gets_an_image_block() {
    let answer_frames = typed_frames(&[
        r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"claude","usage":{"input_tokens":5,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Red."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    let (_rt, server) = model_server(vec![Reply::sse(&answer_frames)]);
    let pod = Pod::builder()
        .env("ANTHROPIC_API_KEY", "k")
        .args(["--base-url", &format!("{}/anthropic", server.url)])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let bytes = png(3, 2);
    let stored = put(&mut c, "p1", "image/png", &b64(&bytes));
    c.send(json!({"type":"run","segments":[
        image(&stored["blob"], "a.png"),
        {"type":"text","text":"colour?"},
    ]}));
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let body = server.requests()[0].json();
    let content = &body["messages"][0]["content"];
    assert_eq!(
        content[0],
        json!({"type":"image","source":{"type":"base64","media_type":"image/png","data":b64(&bytes)}})
    );
    assert_eq!(content[1]["type"], "text");
    assert_eq!(content[1]["text"], "colour?");
}

#[test]
fn only_the_last_max_context_images_are_sent_and_a_gone_blob_is_a_placeholder() {
    let (_rt, server) = model_server(vec![
        Reply::sse(&data_frames(&OPENAI_OK)),
        Reply::sse(&data_frames(&OPENAI_OK)),
        Reply::sse(&data_frames(&OPENAI_OK)),
    ]);
    let pod = openai_pod(&server, &["--max-context-images", "1"]);
    let mut c = pod.client();
    c.until_type("snapshot");
    let first = put(&mut c, "p1", "image/png", &b64(&png(10, 20)))["blob"].clone();
    c.send(json!({"type":"run","segments":[image(&first, "one.png")]}));
    c.until_entry("turn_end");
    let second = put(&mut c, "p2", "image/png", &b64(&png(30, 40)))["blob"].clone();
    c.send(json!({"type":"run","segments":[image(&second, "two.png")]}));
    c.until_entry("turn_end");
    let body = server.requests()[1].json();
    let users: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    let first_id = first.as_str().unwrap();
    assert_eq!(
        users[0]["content"][0],
        json!({"type":"text","text":format!("[image: one.png 10×20 {first_id}]")})
    );
    assert_eq!(users[1]["content"][0]["type"], "image_url");

    // The second image's file is deleted behind the pod's back: the next
    // call still goes out, saying the image is unavailable.
    let hex = second.as_str().unwrap().trim_start_matches("sha256:");
    std::fs::remove_file(pod.data_dir.join("blobs").join(&hex[..2]).join(&hex[2..])).unwrap();
    c.run("and now?");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
    let body = server.requests()[2].json();
    let text = body["messages"].to_string();
    assert!(
        text.contains(&format!(
            "[image unavailable: {}]",
            second.as_str().unwrap()
        )),
        "{text}"
    );
    assert!(!text.contains("image_url"), "{text}");
}

#[test]
fn a_model_that_refuses_images_is_quoted_with_a_hint() {
    let refusal = r#"{"error":{"message":"image input is not supported by this model","type":"invalid_request_error"}}"#;
    let (_rt, server) = model_server(vec![Reply::status(400, refusal)]);
    let pod = openai_pod(&server, &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    let blob = put(&mut c, "p1", "image/png", &b64(&png(1, 1)))["blob"].clone();
    c.send(json!({"type":"run","segments":[image(&blob, "a.png")]}));
    let end = c.until_entry("turn_end");
    assert_eq!(end["entry"]["reason"], "error");
    let message = end["entry"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("image input is not supported by this model"),
        "{message}"
    );
    assert!(message.contains("may not support images"), "{message}");
    // The log still loads: a restart projects it without complaint.
    let dir = pod.into_dir();
    let pod = Pod::builder().in_dir(dir).start();
    let mut c = pod.client();
    assert_eq!(c.until_type("snapshot")["type"], "snapshot");
}

#[test]
fn every_bad_blob_is_refused_with_its_code() {
    let pod = Pod::builder()
        .args(["--max-blob-bytes", "100", "--max-blob-store-bytes", "120"])
        .start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let cases = [
        (
            "bad base64",
            "image/png",
            "not base64!!".to_owned(),
            "invalid_params",
        ),
        (
            "type disagrees",
            "image/jpeg",
            b64(&png(1, 1)),
            "invalid_params",
        ),
        (
            "type not taken",
            "image/bmp",
            b64(b"BM\0\0"),
            "invalid_params",
        ),
        (
            "too large",
            "image/png",
            b64(&[png(1, 1), vec![0; 80]].concat()),
            "blob_too_large",
        ),
    ];
    for (i, (why, media_type, data, code)) in cases.iter().enumerate() {
        let id = format!("bad{i}");
        let refused = put(&mut c, &id, media_type, data);
        assert_eq!(refused["type"], "error", "{why}: {refused}");
        assert_eq!(refused["code"], *code, "{why}: {refused}");
    }
    let ok = put(
        &mut c,
        "ok",
        "image/png",
        &b64(&[png(1, 1), vec![0; 60]].concat()),
    );
    assert_eq!(ok["type"], "response", "{ok}");
    let full = put(
        &mut c,
        "full",
        "image/png",
        &b64(&[png(2, 2), vec![0; 60]].concat()),
    );
    assert_eq!(full["code"], "blob_store_full", "{full}");

    let unknown = format!("sha256:{}", "0".repeat(64));
    c.send(json!({"type":"get_blob","request_id":"g1","blob":unknown}));
    assert_eq!(answer(&mut c, "g1")["code"], "blob_not_found");
    c.send(json!({"type":"get_blob","request_id":"g2","blob":"../../etc/passwd"}));
    assert_eq!(answer(&mut c, "g2")["code"], "blob_not_found");

    // A run naming an unknown blob, or the right blob with the wrong type,
    // is refused and nothing is committed.
    c.send(json!({"type":"run","request_id":"r1","segments":[
        {"type":"text","text":"look"},
        {"type":"image","blob":unknown,"media_type":"image/png"}]}));
    assert_eq!(answer(&mut c, "r1")["code"], "blob_not_found");
    c.send(json!({"type":"run","request_id":"r2","segments":[
        {"type":"image","blob":ok["blob"],"media_type":"image/gif"}]}));
    assert_eq!(answer(&mut c, "r2")["code"], "invalid_params");
    // A blob deleted from disk is unknown to the next run.
    let hex = ok["blob"].as_str().unwrap().trim_start_matches("sha256:");
    std::fs::remove_file(pod.data_dir.join("blobs").join(&hex[..2]).join(&hex[2..])).unwrap();
    c.send(json!({"type":"run","request_id":"r3","segments":[image(&ok["blob"], "x.png")]}));
    assert_eq!(answer(&mut c, "r3")["code"], "blob_not_found");
    assert_eq!(
        harness::kinds(&pod.log_lines()),
        ["session_start"],
        "nothing was committed"
    );
    // The connection and the pod carry on.
    c.run("still here?");
    assert_eq!(c.until_entry("turn_end")["entry"]["reason"], "completed");
}

#[test]
fn a_stored_blob_survives_kill_9_and_is_served_back() {
    let mut pod = Pod::start();
    let mut c = pod.client();
    c.until_type("snapshot");
    let bytes = png(7, 9);
    let stored = put(&mut c, "p1", "image/png", &b64(&bytes));
    pod.kill9();
    let pod = Pod::builder().in_dir(pod.into_dir()).start();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"get_blob","request_id":"g","blob":stored["blob"]}));
    let got = answer(&mut c, "g");
    assert_eq!(got["type"], "response", "{got}");
    assert_eq!(got["data"], b64(&bytes));
    assert_eq!(got["media_type"], "image/png");
    // Nothing half-written is left in the store.
    let leftovers: Vec<_> = walk(&pod.data_dir.join("blobs"))
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn pod_send_image_on_the_offline_model_reports_what_it_received() {
    let pod = Pod::start();
    std::fs::write(pod.workspace.join("shot.png"), png(1280, 720)).unwrap();
    let out = pod
        .command("send")
        .current_dir(&pod.workspace)
        .args(["--text", "what is this?", "--image", "shot.png"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 image(s): image/png 33 bytes 1280×720"),
        "{stdout}"
    );
    std::fs::write(pod.workspace.join("fake.png"), b"not an image").unwrap();
    let out = pod
        .command("send")
        .current_dir(&pod.workspace)
        .args(["--text", "x", "--image", "fake.png"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a PNG, JPEG, GIF or WebP"), "{stderr}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_file_ref_to_an_image_is_stored_when_accepted_and_those_bytes_are_sent() {
    let (_rt, server) = model_server(vec![
        Reply::sse(&data_frames(&OPENAI_OK)),
        Reply::sse(&data_frames(&OPENAI_OK)),
    ]);
    let pod = openai_pod(&server, &[]);
    let before = png(5, 6);
    std::fs::write(pod.workspace.join("shot.png"), &before).unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.send(json!({"type":"run","segments":[
        {"type":"text","text":"see"},
        {"type":"file_ref","path":"shot.png"},
    ]}));
    c.until_entry("turn_end");
    let input = &pod.log_lines()[1]["entry"];
    let id = format!("sha256:{}", sha256_hex(&before));
    assert_eq!(input["resolved"], json!({"1": id}), "{input}");
    assert_eq!(
        input["segments"][1],
        json!({"type":"file_ref","path":"shot.png"})
    );
    // The file changes afterwards: the model is still sent what it saw.
    std::fs::write(pod.workspace.join("shot.png"), png(50, 60)).unwrap();
    c.run("and?");
    c.until_entry("turn_end");
    for request in server.requests() {
        let body = request.json();
        let url = &body["messages"][1]["content"][1]["image_url"]["url"];
        assert_eq!(
            url,
            &json!(format!("data:image/png;base64,{}", b64(&before))),
            "{body}"
        );
    }
}

#[test]
fn the_summariser_gets_placeholders_never_the_images() {
    let summary = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"The user showed a square."},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ];
    let (_rt, server) = model_server(vec![
        Reply::sse(&data_frames(&OPENAI_OK)),
        Reply::sse(&data_frames(&summary)),
    ]);
    let pod = openai_pod(&server, &[]);
    let mut c = pod.client();
    c.until_type("snapshot");
    let blob = put(&mut c, "p1", "image/png", &b64(&png(64, 32)))["blob"].clone();
    c.send(json!({"type":"run","segments":[image(&blob, "sq.png")]}));
    c.until_entry("turn_end");
    c.send(json!({"type":"compact"}));
    c.until_type("compact_done");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].body.clone();
    assert!(
        !body.contains("image_url") && !body.contains("base64"),
        "{body}"
    );
    assert!(
        body.contains(&format!("[image: sq.png 64×32 {}]", blob.as_str().unwrap())),
        "{body}"
    );
}
