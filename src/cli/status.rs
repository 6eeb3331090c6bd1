//! `pod status`, `pod stop` and `pod list`: small clients of the protocol.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::client;
use crate::protocol::{Event, Method, Request, Snapshot};

use super::Paths;

/// Connects and returns the snapshot, or `None` when no pod listens.
async fn snapshot(socket: &Path) -> anyhow::Result<Option<Snapshot>> {
    let (mut events, _sink) = match client::connect(socket).await {
        Ok(conn) => conn,
        Err(client::ClientError::Connect { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let first = tokio::time::timeout(Duration::from_secs(10), events.next()).await;
    match first {
        Ok(Some(Ok(Event::Snapshot(snapshot)))) => Ok(Some(*snapshot)),
        Ok(Some(Ok(_))) => anyhow::bail!("the pod did not start with a snapshot"),
        Ok(Some(Err(e))) => Err(e.into()),
        Ok(None) => anyhow::bail!("the pod closed the connection without a snapshot"),
        Err(_) => anyhow::bail!("the pod at {} did not answer within 10 s", socket.display()),
    }
}

pub fn status(paths: &Paths, json: bool) -> anyhow::Result<ExitCode> {
    let Some(s) = super::runtime()?.block_on(snapshot(&paths.socket))? else {
        eprintln!("no pod is listening on {}", paths.socket.display());
        return Ok(ExitCode::FAILURE);
    };
    if json {
        let value = serde_json::json!({
            "greeting": s.greeting,
            "status": s.status,
            "session_id": s.session_id,
            "entries": s.entries.len(),
        });
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    let g = &s.greeting;
    println!(
        "pod        {} (pid {}, version {})",
        g.pod, g.pid, g.version
    );
    println!(
        "state      {} ({} queued)",
        s.status.state.as_str(),
        s.status.queued
    );
    println!("session    {} ({} entries)", s.session_id, s.entries.len());
    println!("model      {} / {}", g.provider, g.model);
    println!("workspace  {}", g.workspace);
    println!("socket     {}", paths.socket.display());
    Ok(ExitCode::SUCCESS)
}

pub fn stop(paths: &Paths) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = client::connect(&paths.socket).await?;
        sink.send(&Request::new(Method::Shutdown)).await?;
        // The pod says `shutdown` to everyone, then closes: wait for either.
        while let Some(event) = events.next().await {
            if let Ok(Event::Shutdown { .. }) = event {
                break;
            }
        }
        println!("stopped the pod at {}", paths.socket.display());
        Ok(ExitCode::SUCCESS)
    })
}

pub fn list(paths: &Paths) -> anyhow::Result<ExitCode> {
    let entries = match std::fs::read_dir(&paths.socket_dir) {
        Ok(entries) => entries,
        Err(_) => return Ok(ExitCode::SUCCESS),
    };
    let mut sockets: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    sockets.sort();
    let rt = super::runtime()?;
    for socket in sockets {
        if let Ok(Some(s)) = rt.block_on(snapshot(&socket)) {
            println!(
                "{:<16} {:<10} {:<10} {}",
                s.greeting.pod,
                s.status.state.as_str(),
                s.greeting.provider,
                socket.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
