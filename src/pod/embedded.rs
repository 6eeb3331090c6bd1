//! A pod embedded in the process that needs it: `pod exec`'s and `pod replay`'s private pod.
//!
//! The pod is the one `pod serve` runs — [`super::server::serve`] on a
//! thread of its own, with its own actix system, socket, session log and
//! lock — so nothing about it differs from a served pod: `pod attach
//! --name …` and `pod log --name …` reach it as any other. Only its host
//! talks to it differently: through one end of a socket pair handed to the
//! pod ([`EmbeddedPod::connect`]), because over the socket the host's pid is
//! the pod's own, and a pod's own pid may only read (a tool must never
//! approve itself). The frames are the socket's, byte for byte.

use std::io::Write as _;
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

use anyhow::Context as _;
use tokio::sync::mpsc;

use super::server::{serve, ServeConfig};
use crate::protocol::{Method, Request};

/// A running pod of this process, and the way to stop it.
pub struct EmbeddedPod {
    name: String,
    clients: mpsc::UnboundedSender<UnixStream>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

/// Starts the pod `config` describes on a thread of its own and returns at
/// once: whether it started shows on the first connection, which opens with
/// the snapshot — or reads end-of-file when the pod failed, and
/// [`EmbeddedPod::stop`] then says why.
pub fn start(mut config: ServeConfig) -> anyhow::Result<EmbeddedPod> {
    let (clients, receiver) = mpsc::unbounded_channel();
    config.host_clients = Some(receiver);
    let name = config.name.clone();
    let thread = std::thread::Builder::new()
        .name(format!("pod {name}"))
        .spawn(move || serve(config))
        .context("cannot start a thread for the pod")?;
    Ok(EmbeddedPod {
        name,
        clients,
        thread: Some(thread),
    })
}

impl EmbeddedPod {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new connection with full access, as a client of the socket gets
    /// it. A pod that failed to start, or has stopped, closes it at once.
    pub fn connect(&self) -> std::io::Result<UnixStream> {
        let (ours, theirs) = UnixStream::pair()?;
        // A pod that is gone drops `theirs` with the message: `ours` then
        // reads end-of-file, which is how a client learns it anyway.
        let _ = self.clients.send(theirs);
        Ok(ours)
    }

    /// Stops the pod as `shutdown` does (the turn cancelled, the log
    /// flushed, the socket removed) and waits until it has; the pod's own
    /// error if it failed to start or to run.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> anyhow::Result<()> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        if !thread.is_finished() {
            let frame = Request::new(Method::Shutdown).to_frame();
            // A pod that already stopped closed its end: nothing to tell.
            if let Ok(mut stream) = self.connect() {
                let _ = stream.write_all(frame.as_bytes());
            }
        }
        match thread.join() {
            Ok(result) => result,
            Err(_) => anyhow::bail!("the pod {:?} panicked", self.name),
        }
    }
}

/// A host that ends early (an error, a panic unwinding) still stops its pod
/// cleanly, so the log is flushed and the socket removed.
impl Drop for EmbeddedPod {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            tracing::warn!("{e:#}");
        }
    }
}
