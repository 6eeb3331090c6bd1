//! What every client command does first: connect to the pod, or say in one
//! consistent way that none is listening; then read the snapshot.

use std::io::ErrorKind;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::client::{self, ClientError, Endpoint, EventStream, Refusal, RequestSink};
use crate::protocol::answer::Answer;
use crate::protocol::{Event, Method, Snapshot};

/// Exit codes of the client commands (`cli.md`); 0 and clap's 2 aside.
pub mod exit {
    /// An error, a refused request, a turn that did not complete.
    pub const FAILED: u8 = 1;
    /// Bad usage (clap's own code for a bad flag).
    pub const USAGE: u8 = 2;
    /// No pod is listening on the socket (or at `--url`), or it refused
    /// the device token.
    pub const NO_POD: u8 = 3;
    /// The turn was cancelled, or the queued run removed.
    pub const CANCELLED: u8 = 4;
    /// Stopped waiting before the turn ended.
    pub const DETACHED: u8 = 5;
}

/// How long a pod may take to send the snapshot that opens a connection.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);

/// Says that no pod listens at `endpoint` and how to start one; the exit
/// code that goes with it.
pub fn no_pod(endpoint: &Endpoint) -> ExitCode {
    match endpoint {
        Endpoint::Socket(socket) => match running_parent(socket) {
            Some((parent, slug)) => eprintln!(
                "pod: pod {parent} runs, but has no child pod {slug:?} (nothing listens on {}); \
                 `pod agents --name {parent}` lists its children",
                socket.display()
            ),
            None => eprintln!(
                "pod: no pod is listening on {}; start one with `pod serve` (or just `pod`)",
                socket.display()
            ),
        },
        Endpoint::Remote(remote) => eprintln!(
            "pod: no pod answers at {}; is it started with `pod serve --listen`?",
            remote.url
        ),
    }
    ExitCode::from(exit::NO_POD)
}

/// For a child pod's socket (`<dir>/<parent>.<slug>.sock`) that no pod
/// listens on: its parent's name and the slug, when the parent runs — so
/// that a mistyped or removed child is told apart from a pod that is down.
fn running_parent(socket: &Path) -> Option<(String, String)> {
    let name = socket.file_name()?.to_str()?.strip_suffix(".sock")?;
    let (parent, slug) = name.rsplit_once('.')?;
    let parent_socket = socket.with_file_name(format!("{parent}.sock"));
    let listens = std::os::unix::net::UnixStream::connect(parent_socket).is_ok();
    listens.then(|| (parent.to_owned(), slug.to_owned()))
}

/// Whether nothing listens on `socket` at all, as opposed to a pod that is
/// there but cannot be talked to (a permission error is worth its own words).
pub fn is_no_pod(error: &ClientError) -> bool {
    matches!(error, ClientError::Connect { source, .. }
        if matches!(source.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused))
}

/// Whether no pod listens on `socket`, checked without a runtime.
pub fn nobody_listens(socket: &Path) -> bool {
    matches!(std::os::unix::net::UnixStream::connect(socket),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused))
}

/// Connects to the pod; `Err` with the exit code (said on stderr) when no
/// pod listens there (3) or it refused the device token (3, with its reason).
pub async fn connect(
    endpoint: &Endpoint,
) -> anyhow::Result<Result<(EventStream, RequestSink), ExitCode>> {
    match client::connect(endpoint).await {
        Ok(connection) => Ok(Ok(connection)),
        Err(e) if is_no_pod(&e) => Ok(Err(no_pod(endpoint))),
        Err(ClientError::Unreachable { url, reason }) => {
            eprintln!("pod: no pod answers at {url}: {reason}");
            Ok(Err(ExitCode::from(exit::NO_POD)))
        }
        Err(e @ ClientError::Certificate { .. }) => {
            eprintln!("pod: {e}");
            Ok(Err(ExitCode::from(exit::NO_POD)))
        }
        Err(ClientError::Refused { status, reason, .. }) => {
            eprintln!("pod: the pod refused the connection ({status}): {reason}");
            Ok(Err(ExitCode::from(exit::NO_POD)))
        }
        Err(e) => Err(e.into()),
    }
}

/// Reads the snapshot every connection opens with.
pub async fn snapshot(events: &mut EventStream, socket: &Endpoint) -> anyhow::Result<Snapshot> {
    match tokio::time::timeout(SNAPSHOT_WAIT, events.next()).await {
        Ok(Some(Ok(Event::Snapshot(snapshot)))) => Ok(*snapshot),
        Ok(Some(Ok(_))) => anyhow::bail!("the pod did not start with a snapshot"),
        Ok(Some(Err(e))) => Err(e.into()),
        Ok(None) => anyhow::bail!("the pod closed the connection without a snapshot"),
        Err(_) => anyhow::bail!(
            "the pod at {socket} did not answer within {} s",
            SNAPSHOT_WAIT.as_secs()
        ),
    }
}

/// [`client::call`] for a command: a connection that failed is the
/// command's error (`?` reports it); any other refusal is for the command
/// to say in its own words.
pub async fn ask<A: Answer>(
    events: &mut EventStream,
    sink: &mut RequestSink,
    method: Method,
) -> anyhow::Result<Result<A, Refusal>> {
    match client::call(events, sink, method).await {
        Err(Refusal::Connection(e)) => Err(e.into()),
        answer => Ok(answer),
    }
}
