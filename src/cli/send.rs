//! `pod send`: one message, the reply streamed to stdout.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context as _;

use super::args::SendArgs;
use super::Paths;
use crate::client;
use crate::protocol::{Event, LogEntry, Method, Request, Segment, TurnEndReason};

pub fn run(paths: &Paths, args: SendArgs) -> anyhow::Result<ExitCode> {
    let text = if args.text == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the message from stdin")?;
        text
    } else {
        args.text
    };
    let mut segments = vec![Segment::text(text)];
    segments.extend(
        args.file
            .iter()
            .map(|path| Segment::file_ref(file_ref_path(path))),
    );
    super::runtime()?.block_on(send(paths, segments, args.json, args.no_wait))
}

/// A `--file` path as the pod should see it. The pod resolves relative paths
/// against its workspace; a shell user means their current directory. When
/// the path names a file from here, send it absolute (the pod accepts
/// absolute paths inside its workspace); otherwise send it as given.
fn file_ref_path(path: &str) -> String {
    let here = std::path::Path::new(path);
    if here.is_relative() && here.exists() {
        if let Ok(absolute) = here.canonicalize() {
            return absolute.display().to_string();
        }
    }
    path.to_owned()
}

async fn send(
    paths: &Paths,
    segments: Vec<Segment>,
    json: bool,
    no_wait: bool,
) -> anyhow::Result<ExitCode> {
    let (mut events, mut sink) = client::connect(&paths.socket).await?;
    let request_id = format!("send-{}", std::process::id());
    sink.send(&Request::with_id(
        Method::Run { segments },
        request_id.clone(),
    ))
    .await?;
    let mut stdout = std::io::stdout().lock();
    let mut ours = false;
    let mut ends_with_newline = true;
    while let Some(frame) = events.next_frame().await {
        let (line, event) = frame?;
        if json {
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
        }
        match event {
            Event::Response(r) if r.request_id.as_deref() == Some(&request_id) && no_wait => {
                return Ok(ExitCode::SUCCESS);
            }
            Event::Error {
                request_id: Some(id),
                message,
                ..
            } if id == request_id => {
                eprintln!("pod: the run was refused: {message}");
                return Ok(ExitCode::FAILURE);
            }
            Event::TurnStart {
                request_id: Some(id),
                ..
            } if id == request_id => ours = true,
            Event::TextDelta { text } if ours && !json => {
                write!(stdout, "{text}")?;
                stdout.flush()?;
                ends_with_newline = text.ends_with('\n');
            }
            Event::Error { message, .. } if ours => eprintln!("pod: {message}"),
            Event::Entry {
                entry: LogEntry::TurnEnd { reason, .. },
                ..
            } if ours => {
                if !json && !ends_with_newline {
                    writeln!(stdout)?;
                }
                return Ok(match reason {
                    TurnEndReason::Completed => ExitCode::SUCCESS,
                    other => {
                        eprintln!("pod: the turn ended: {}", other.as_str());
                        ExitCode::FAILURE
                    }
                });
            }
            Event::Shutdown { reason } => {
                anyhow::bail!("the pod shut down before the turn ended ({reason})")
            }
            _ => {}
        }
    }
    anyhow::bail!(
        "the pod at {} closed the connection before the turn ended",
        paths.socket.display()
    )
}
