//! A protocol client: connect to a pod's socket, read events, send methods.
//!
//! Used by every front end in this crate (`pod send`, `status`, `stop`, the
//! TUI). It is deliberately thin: the protocol is the API.

use std::path::{Path, PathBuf};

use futures::{SinkExt, StreamExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

use crate::protocol::{Event, Request};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no pod is listening on {}", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the process listening on {} runs as uid {server_uid}, not as you (uid {my_uid}); \
         refusing to talk to it. Someone else may have put it there: check that socket and its \
         directory",
        path.display()
    )]
    ForeignServer {
        path: PathBuf,
        server_uid: u32,
        my_uid: u32,
    },
    #[error("connection to the pod failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the pod sent a frame that is not a valid event: {0}")]
    BadEvent(String),
}

/// The reading half: yields events in the pod's order.
pub struct EventStream {
    frames: FramedRead<OwnedReadHalf, LinesCodec>,
}

/// The writing half: sends methods.
pub struct RequestSink {
    frames: FramedWrite<OwnedWriteHalf, LinesCodec>,
}

/// Connects to the pod listening on `socket`. Nothing is sent to a server
/// run by another user: whoever can create the socket first could otherwise
/// read what the user types.
pub async fn connect(socket: &Path) -> Result<(EventStream, RequestSink), ClientError> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect {
            path: socket.to_owned(),
            source,
        })?;
    let server_uid = stream.peer_cred()?.uid();
    let my_uid = rustix::process::geteuid().as_raw();
    if server_uid != my_uid {
        return Err(ClientError::ForeignServer {
            path: socket.to_owned(),
            server_uid,
            my_uid,
        });
    }
    let (read, write) = stream.into_split();
    Ok((
        EventStream {
            frames: FramedRead::new(read, LinesCodec::new()),
        },
        RequestSink {
            frames: FramedWrite::new(write, LinesCodec::new()),
        },
    ))
}

impl EventStream {
    /// The next event, or `None` when the pod closed the connection.
    pub async fn next(&mut self) -> Option<Result<Event, ClientError>> {
        Some(self.next_frame().await?.map(|(_, event)| event))
    }

    /// The next event with the frame it was parsed from.
    pub async fn next_frame(&mut self) -> Option<Result<(String, Event), ClientError>> {
        let line = match self.frames.next().await? {
            Ok(line) => line,
            Err(e) => return Some(Err(ClientError::BadEvent(e.to_string()))),
        };
        Some(match serde_json::from_str(&line) {
            Ok(event) => Ok((line, event)),
            Err(e) => Err(ClientError::BadEvent(format!("{e}: {line:.200}"))),
        })
    }
}

impl RequestSink {
    pub async fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        let frame = request.to_frame();
        self.frames
            .send(frame.trim_end_matches('\n'))
            .await
            .map_err(|e| ClientError::Io(std::io::Error::other(e.to_string())))
    }
}
