//! The client commands over the network (`--url`), TLS with a self-signed
//! certificate, and a tool that holds a valid token and connects over TCP.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use harness::{succeeded, Pod};
use serde_json::{json, Value};

const POD: &str = env!("CARGO_BIN_EXE_pod");

/// The port a pod's greeting says it listens on.
fn port_of(pod: &Pod) -> u16 {
    let mut local = pod.client();
    let snapshot = local.until_type("snapshot");
    let address = snapshot["greeting"]["listen"]["address"].as_str().unwrap();
    address.rsplit(':').next().unwrap().parse().unwrap()
}

/// A fresh device token, written to a file in the pod's directory.
fn token_file(pod: &Pod, name: &str) -> std::path::PathBuf {
    let token = succeeded(pod.command("token").arg("create").output().unwrap());
    let path = pod.dir.path().join(name);
    std::fs::write(&path, token.trim()).unwrap();
    path
}

/// A `pod` command over the network: no socket, no data dir.
fn remote(subcommand: &str, url: &str, token: &std::path::Path) -> Command {
    let mut cmd = Command::new(POD);
    cmd.arg(subcommand)
        .arg("--url")
        .arg(url)
        .arg("--token-file")
        .arg(token)
        .env_remove("POD_TOKEN")
        .env_remove("POD_SOCKET")
        .env_remove("POD_DATA_DIR");
    cmd
}

fn bash_step(calls: &[Value]) -> String {
    format!(
        "{}\n{}\n",
        json!({ "events": calls }),
        json!({"events":[{"text":"done"}]})
    )
}

#[test]
fn send_status_approve_and_log_work_over_the_network() {
    let script = bash_step(&[json!({"tool_call":{"id":"b1","name":"bash",
        "arguments":{"command":"touch marker"}}})]);
    let pod = Pod::builder()
        .script(&script)
        .args(["--approval", "ask", "--listen", "127.0.0.1:0"])
        .start();
    let port = port_of(&pod);
    let url = format!("http://127.0.0.1:{port}");
    let token = token_file(&pod, "token");
    let status = succeeded(remote("status", &url, &token).output().unwrap());
    assert!(status.contains("state      idle"), "{status}");
    let send = remote("send", &url, &token)
        .args(["--text", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watcher = pod.client();
    watcher.until_with("waiting", |v| {
        v["type"] == "status" && v["state"] == "waiting"
    });
    let approved = succeeded(remote("approve", &url, &token).output().unwrap());
    assert!(approved.starts_with("approved"), "{approved}");
    let sent = send.wait_with_output().unwrap();
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(String::from_utf8_lossy(&sent.stdout).contains("done"));
    assert!(pod.workspace.join("marker").exists());
    let decision = pod
        .log_lines()
        .into_iter()
        .find(|l| l["entry"]["kind"] == "approval_decision")
        .unwrap();
    assert_eq!(decision["entry"]["remote"], "127.0.0.1");
    assert_eq!(decision["entry"]["client"], "pod approve");
    let log = succeeded(remote("log", &url, &token).output().unwrap());
    assert!(log.contains("from 127.0.0.1"), "{log}");
    let raw = succeeded(remote("log", &url, &token).arg("--json").output().unwrap());
    assert_eq!(raw.lines().count(), pod.log_lines().len());
    // A refused token: exit 3, with the reason.
    let bad = pod.dir.path().join("bad");
    std::fs::write(&bad, "not-a-token").unwrap();
    let refused = remote("status", &url, &bad).output().unwrap();
    assert_eq!(refused.status.code(), Some(3));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("401") && said.contains("token"), "{said}");
    // No token at all: bad usage (2), saying how to give one.
    let none = Command::new(POD)
        .args(["status", "--url", &url])
        .env_remove("POD_TOKEN")
        .env_remove("POD_TOKEN_FILE")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--token-file FILE"));
    // A read-only token cannot stop the pod: refused at once (it waited
    // forever for a shutdown that never came).
    let read_only = succeeded(
        pod.command("token")
            .args(["create", "--read-only"])
            .output()
            .unwrap(),
    );
    let read_only_file = pod.dir.path().join("read-only");
    std::fs::write(&read_only_file, read_only.trim()).unwrap();
    let mut stop = remote("stop", &url, &read_only_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let code = loop {
        if let Some(status) = stop.try_wait().unwrap() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = stop.kill();
            panic!("pod stop with a read-only token did not return");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let said = String::from_utf8_lossy(&stop.wait_with_output().unwrap().stderr).into_owned();
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("refused to stop"), "{said}");
    succeeded(remote("status", &url, &token).output().unwrap());
}

#[test]
fn a_tool_holding_a_valid_token_can_neither_approve_nor_mint_one() {
    // The port is chosen first, so the script can name it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("planted-token");
    let socket = dir.path().join("run/pod.sock");
    let data = dir.path().join("data");
    let command = format!(
        "echo \"env:[$POD_TOKEN][$POD_URL]\"; \
         {POD} approve w1 --url ws://127.0.0.1:{port} --token-file {t}; echo approve=$?; \
         {POD} status --json --url ws://127.0.0.1:{port} --token-file {t}; \
         {POD} token create --socket {s} --data-dir {d}; echo create=$?",
        t = planted.display(),
        s = socket.display(),
        d = data.display(),
    );
    let script = bash_step(&[
        json!({"tool_call":{"id":"b1","name":"bash","arguments":{"command":command}}}),
        json!({"tool_call":{"id":"w1","name":"write_file",
            "arguments":{"path":"x.txt","content":"x"}}}),
    ]);
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .env("POD_TOKEN", "inherited-secret")
        .env("POD_URL", "ws://inherited")
        .args(["--approval", "ask", "--allow", "bash:*"])
        .arg(format!("--listen=127.0.0.1:{port}"))
        .start();
    let token = succeeded(pod.command("token").arg("create").output().unwrap());
    std::fs::write(&planted, token.trim()).unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    let result = c.until_with("b1's result", |v| {
        v["type"] == "entry" && v["entry"]["kind"] == "tool_results"
    });
    let output = result["entry"].to_string();
    assert!(
        output.contains("env:[][]"),
        "tools never see POD_TOKEN/POD_URL: {output}"
    );
    assert!(output.contains("approve=1"), "{output}");
    assert!(
        output.contains("forbidden") || output.contains("only read"),
        "{output}"
    );
    assert!(output.contains(r#"\"access\":\"read\""#), "{output}");
    assert!(
        output.contains(r#"\"access_reason\":\"descendant\""#),
        "{output}"
    );
    assert!(output.contains("create=1"), "{output}");
    // w1 still waits: nobody but a person has answered it.
    assert!(!pod
        .log_lines()
        .iter()
        .any(|l| l["entry"]["kind"] == "approval_decision" && l["entry"]["call_id"] == "w1"));
    let tokens: Value = serde_json::from_str(&succeeded(
        pod.command("token")
            .args(["list", "--json"])
            .output()
            .unwrap(),
    ))
    .unwrap();
    assert_eq!(tokens.as_array().unwrap().len(), 1, "no token was minted");
}

#[test]
fn tls_with_a_self_signed_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .args(["--listen", "127.0.0.1:0"])
        .arg(format!("--tls-cert={}", cert_path.display()))
        .arg(format!("--tls-key={}", key_path.display()))
        .start();
    let mut local = pod.client();
    let snapshot = local.until_type("snapshot");
    assert_eq!(snapshot["greeting"]["listen"]["tls"], true);
    let port = port_of(&pod);
    let token = token_file(&pod, "token");
    let url = format!("https://localhost:{port}");
    let status = remote("status", &url, &token)
        .arg("--ca-cert")
        .arg(&cert_path)
        .output()
        .unwrap();
    let out = succeeded(status);
    assert!(
        out.contains(&format!("wss://localhost:{port}/v1/ws")),
        "{out}"
    );
    // Without trusting the certificate, the client refuses the server.
    let untrusted = remote("status", &url, &token).output().unwrap();
    assert_eq!(untrusted.status.code(), Some(3));
    let said = String::from_utf8_lossy(&untrusted.stderr);
    assert!(
        said.contains("not signed by an authority this machine trusts")
            && said.contains("--ca-cert FILE"),
        "the refusal says what to do: {said}"
    );
    // The link names the certificate's host.
    let link = succeeded(pod.command("url").output().unwrap());
    assert!(
        link.starts_with(&format!("https://localhost:{port}/#pair=")),
        "{link}"
    );
}

/// This machine's IPv6 link-local address and its interface's index, from
/// `/proc/net/if_inet6`.
fn link_local_address() -> Option<(std::net::Ipv6Addr, u32)> {
    let text = std::fs::read_to_string("/proc/net/if_inet6").ok()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ip = std::net::Ipv6Addr::from(u128::from_str_radix(fields.first()?, 16).ok()?);
        let index = u32::from_str_radix(fields.get(1)?, 16).ok()?;
        ((ip.segments()[0] & 0xffc0) == 0xfe80).then_some((ip, index))
    })
}

/// Not a test: the client a tool runs in
/// `a_tool_on_an_ipv6_link_local_address_may_only_read_even_over_http`, from the pod's
/// `bash`. Connects to `LINK_LOCAL_PORT` on this machine's link-local
/// address with the token in `LINK_LOCAL_TOKEN` and prints what the
/// greeting grants.
#[test]
#[ignore = "run by a tool inside another test"]
fn link_local_client() {
    use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};
    let port: u16 = std::env::var("LINK_LOCAL_PORT").unwrap().parse().unwrap();
    let token = std::fs::read_to_string(std::env::var("LINK_LOCAL_TOKEN").unwrap()).unwrap();
    let (ip, index) = link_local_address().unwrap();
    let to = std::net::SocketAddrV6::new(ip, port, 0, index);
    let stream = std::net::TcpStream::connect(to).unwrap();
    println!("client={}", stream.local_addr().unwrap());
    let mut request = format!("ws://localhost:{port}/v1/ws")
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", token.trim()).parse().unwrap(),
    );
    let (mut ws, _) = tungstenite::client(request, stream).unwrap();
    let snapshot: Value = loop {
        if let tungstenite::Message::Text(text) = ws.read().unwrap() {
            break serde_json::from_str(text.as_str()).unwrap();
        }
    };
    println!("access={}", snapshot["greeting"]["access"]);
    // An image upload over HTTP from the same place.
    use std::io::{Read as _, Write as _};
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x06\0\0\0\0\0\0\0";
    let mut stream = std::net::TcpStream::connect(to).unwrap();
    let head = format!(
        "POST /v1/blobs HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\nContent-Type: image/png\r\nContent-Length: {}\r\n\r\n",
        token.trim(),
        png.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(png).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    println!("blob={}", &response[9..12]);
}

#[test]
fn a_tool_on_an_ipv6_link_local_address_may_only_read_even_over_http() {
    let Some((ip, _)) = link_local_address() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "this machine has no IPv6 link-local address to test with"
        );
        eprintln!("skipped: no IPv6 link-local address");
        return;
    };
    let port = std::net::TcpListener::bind("[::]:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("planted-token");
    let command = format!(
        "LINK_LOCAL_PORT={port} LINK_LOCAL_TOKEN={t} {exe} --exact link_local_client \
         --ignored --nocapture 2>&1",
        t = planted.display(),
        exe = std::env::current_exe().unwrap().display(),
    );
    let script = bash_step(&[json!({"tool_call":{"id":"b1","name":"bash",
        "arguments":{"command":command}}})]);
    let pod = Pod::builder()
        .in_dir(dir)
        .script(&script)
        .args(["--allow", "bash:*", "--allow-plaintext"])
        .arg(format!("--listen=[::]:{port}"))
        .start();
    let token = succeeded(pod.command("token").arg("create").output().unwrap());
    std::fs::write(&planted, token.trim()).unwrap();
    let mut c = pod.client();
    c.until_type("snapshot");
    c.run("go");
    let result = c.until_with("b1's result", |v| {
        v["type"] == "entry" && v["entry"]["kind"] == "tool_results"
    });
    let output = result["entry"].to_string();
    assert!(output.contains(&format!("client=[{ip}")), "{output}");
    assert!(
        output.contains(r#"access=\"read\""#),
        "a tool's connection over {ip} may only read: {output}"
    );
    assert!(
        output.contains("blob=403"),
        "nor store an image over HTTP: {output}"
    );
}

/// `openssl req -x509 …` as docs would have a user type it, in `dir`:
/// (certificate, key); `None` without openssl.
fn openssl_self_signed(dir: &std::path::Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", "/CN=localhost"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    made.success().then_some((cert, key))
}

#[test]
fn the_exact_certificate_given_with_ca_cert_is_trusted_even_as_an_authority() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, key)) = openssl_self_signed(dir.path(), "pod") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "this test needs openssl to make a certificate"
        );
        eprintln!("skipped: no openssl");
        return;
    };
    let (other, _) = openssl_self_signed(dir.path(), "other").unwrap();
    let pod = Pod::builder()
        .in_dir(dir)
        .args(["--listen", "127.0.0.1:0"])
        .arg(format!("--tls-cert={}", cert.display()))
        .arg(format!("--tls-key={}", key.display()))
        .start();
    let port = port_of(&pod);
    let token = token_file(&pod, "token");
    let url = format!("wss://localhost:{port}");
    // OpenSSL 3 marks this certificate CA:TRUE, with no subjectAltName:
    // given as --ca-cert, it is the one the server presents, and trusted.
    let status = remote("status", &url, &token)
        .arg("--ca-cert")
        .arg(&cert)
        .output()
        .unwrap();
    succeeded(status);
    // Any other certificate, made the same way, still is not.
    let refused = remote("status", &url, &token)
        .arg("--ca-cert")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
