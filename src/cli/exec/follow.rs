//! Following the run on the private pod: its frames, its limits, its
//! final text and usage, and the patch from its checkpoints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::super::connect::exit;
use super::{Limit, Options, Ran, CLIENT};
use crate::client::{EventStream, RequestSink};
use crate::protocol::answer;
use crate::protocol::{
    AssistantItem, DecidedBy, Decision, Event, LogEntry, Method, Request, Segment, TurnEndReason,
    TurnError, Usage,
};
use crate::safe_text;

/// Runs the task on the hosted pod; `None` when the pod closed the
/// connection before its snapshot (it failed to start).
pub(super) async fn drive(
    pod: &crate::pod::embedded::EmbeddedPod,
    task: String,
    options: &Options,
) -> anyhow::Result<Option<Ran>> {
    let (mut events, mut sink) = crate::client::over(pod.connect()?)?;
    let session_id = match events.next().await {
        Some(Ok(Event::Snapshot(snapshot))) => snapshot.session_id,
        Some(Ok(_)) => anyhow::bail!("the private pod did not start with a snapshot"),
        Some(Err(e)) => return Err(e.into()),
        None => return Ok(None),
    };
    let request_id = format!("exec-{}", uuid::Uuid::new_v4().simple());
    sink.send(&Request::new(Method::Hello {
        client: CLIENT.into(),
    }))
    .await?;
    sink.send(&Request::with_id(
        Method::Run {
            segments: vec![Segment::text(task)],
        },
        request_id.clone(),
    ))
    .await?;
    let mut run = Follow::new(request_id, options, session_id);
    let deadline = options
        .timeout
        .map(|after| (after, options.started + after));
    run.follow(&mut events, &mut sink, deadline).await?;
    if let (Some(limit), Some(TurnEndReason::Cancelled)) = (run.limit, run.end) {
        record_limit(&mut events, &mut sink, limit).await?;
    }
    let patch = match &options.emit_patch {
        Some(file) if run.end.is_some() => run.write_patch(&mut events, &mut sink, file).await?,
        _ => None,
    };
    Ok(Some(Ran {
        end: run.end,
        error: run.error.take(),
        limit: run.limit,
        session_id,
        usage: run.usage(),
        text: run.texts.join("\n\n"),
        patch,
        lost: run.lost,
        duration: options.started.elapsed(),
    }))
}

/// Writes in the log why the run's turn was cancelled — the `turn_end`
/// only says `cancelled` — as a `notify` (committed at once: the pod is
/// idle), and waits until it is durable.
async fn record_limit(
    events: &mut EventStream,
    sink: &mut RequestSink,
    limit: Limit,
) -> anyhow::Result<()> {
    let message = format!("pod exec: {}", limit.error().message);
    sink.send(&Request::new(Method::Notify {
        message: message.clone(),
    }))
    .await?;
    while let Some(event) = events.next().await {
        if let Event::Entry {
            entry: LogEntry::HookInjectedItems { items },
            ..
        } = event?
        {
            if items.iter().any(|item| item.text == message) {
                break;
            }
        }
    }
    Ok(())
}

/// What the client knows of its run, frame by frame.
struct Follow<'a> {
    request_id: String,
    options: &'a Options,
    session_id: uuid::Uuid,
    ours: bool,
    end: Option<TurnEndReason>,
    error: Option<TurnError>,
    limit: Option<Limit>,
    lost: Option<u8>,
    /// The usage of the turn's finished model calls, then its `turn_end`'s.
    calls: Usage,
    /// The latest usage of the model call in progress.
    call: Option<Usage>,
    /// Child pods' turns (`agent_turn_end`).
    children: Usage,
    /// The turn's `turn_end` usage, once it came.
    turn_usage: Option<Usage>,
    /// The text blocks since the last tool results: the final answer.
    texts: Vec<String>,
    first_checkpoint: Option<String>,
    last_checkpoint: Option<String>,
    /// A checkpoint that could not be taken, and why.
    checkpoint_failed: Option<String>,
}

impl<'a> Follow<'a> {
    fn new(request_id: String, options: &'a Options, session_id: uuid::Uuid) -> Self {
        Self {
            request_id,
            options,
            session_id,
            ours: false,
            end: None,
            error: None,
            limit: None,
            lost: None,
            calls: Usage::default(),
            call: None,
            children: Usage::default(),
            turn_usage: None,
            texts: Vec::new(),
            first_checkpoint: None,
            last_checkpoint: None,
            checkpoint_failed: None,
        }
    }

    /// The run's usage: its turn's model calls and its children's.
    fn usage(&self) -> Usage {
        let mut usage = self.turn_usage.unwrap_or_else(|| {
            let mut so_far = self.calls;
            if let Some(call) = &self.call {
                so_far.add(call);
            }
            so_far
        });
        usage.add(&self.children);
        usage
    }

    async fn follow(
        &mut self,
        events: &mut EventStream,
        sink: &mut RequestSink,
        deadline: Option<(Duration, Instant)>,
    ) -> anyhow::Result<()> {
        let timer = async {
            match deadline {
                Some((_, at)) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(timer);
        let mut timed_out = false;
        loop {
            let frame = tokio::select! {
                frame = events.next_frame() => frame,
                () = &mut timer, if !timed_out => {
                    timed_out = true;
                    if let Some((after, _)) = deadline {
                        self.end_early(sink, Limit::Timeout(after)).await?;
                    }
                    continue;
                }
            };
            let (line, event) = match frame {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    eprintln!("pod: the connection to the private pod failed: {e}");
                    self.lost = Some(exit::DETACHED);
                    return Ok(());
                }
                None => {
                    eprintln!("pod: the private pod closed the connection before the run ended");
                    self.lost = Some(exit::DETACHED);
                    return Ok(());
                }
            };
            if self.on_frame(&line, event, sink).await? {
                return Ok(());
            }
        }
    }

    /// Handles one frame; true when the run is over.
    async fn on_frame(
        &mut self,
        line: &str,
        event: Event,
        sink: &mut RequestSink,
    ) -> anyhow::Result<bool> {
        match &event {
            Event::Response(r) if r.request_id.as_deref() == Some(&self.request_id) => {
                self.print_json(line)?;
                return Ok(false);
            }
            Event::Error {
                request_id: Some(id),
                message,
                ..
            } if *id == self.request_id => {
                self.print_json(line)?;
                eprintln!(
                    "pod: the pod refused the task: {}",
                    safe_text::line(message)
                );
                self.lost = Some(exit::FAILED);
                return Ok(true);
            }
            Event::TurnStart {
                request_id: Some(id),
                ..
            } if *id == self.request_id => self.ours = true,
            Event::Shutdown { reason } => {
                if self.ours {
                    self.print_json(line)?;
                }
                eprintln!(
                    "pod: the private pod shut down before the run ended ({})",
                    safe_text::line(reason)
                );
                self.lost = Some(exit::DETACHED);
                return Ok(true);
            }
            _ => {}
        }
        if !self.ours {
            return Ok(false);
        }
        self.print_json(line)?;
        match event {
            Event::Usage(usage) => {
                self.call = Some(usage);
                self.check_budget(sink).await?;
            }
            Event::Entry {
                session_id, entry, ..
            } => {
                self.session_id = session_id;
                return self.on_entry(entry, sink).await;
            }
            Event::Error { message, .. } if !self.options.json => {
                eprintln!("pod: {}", safe_text::line(&message));
            }
            _ => {}
        }
        Ok(false)
    }

    async fn on_entry(&mut self, entry: LogEntry, sink: &mut RequestSink) -> anyhow::Result<bool> {
        match entry {
            LogEntry::AssistantItems { items } => {
                for item in items {
                    match item {
                        AssistantItem::Text { text } => self.texts.push(text),
                        AssistantItem::ToolCall {
                            name, arguments, ..
                        } if !self.options.json => {
                            eprintln!("{}", super::super::transcript::tool_line(&name, &arguments));
                        }
                        _ => {}
                    }
                }
            }
            LogEntry::ToolResults { .. } => {
                self.texts.clear();
                if let Some(call) = self.call.take() {
                    self.calls.add(&call);
                }
            }
            LogEntry::ApprovalDecision {
                decision: Decision::Deny,
                by: DecidedBy::Policy,
                rule: Some(rule),
                ..
            } if rule == crate::approval::NEVER_ASK_RULE && !self.options.json => {
                eprintln!(
                    "pod: a tool call was denied: nobody answers approvals in `pod exec` \
                     (--approval auto, or --allow RULE, lets such calls run)"
                );
            }
            LogEntry::Checkpoint {
                checkpoint, error, ..
            } => match checkpoint {
                Some(id) => {
                    if self.first_checkpoint.is_none() {
                        self.first_checkpoint = Some(id.clone());
                    }
                    self.last_checkpoint = Some(id);
                }
                None => {
                    self.checkpoint_failed =
                        Some(error.unwrap_or_else(|| "the pod gave no reason".into()));
                }
            },
            LogEntry::AgentTurnEnd {
                usage: Some(usage), ..
            } => {
                self.children.add(&usage);
                self.check_budget(sink).await?;
            }
            LogEntry::TurnEnd {
                reason,
                usage,
                error,
                ..
            } => {
                self.end = Some(reason);
                self.turn_usage = Some(usage.unwrap_or_default());
                // A limit that cancelled the turn is why it ended; a turn
                // that ended on its own meanwhile ended as it says.
                match self.limit {
                    Some(limit) if reason == TurnEndReason::Cancelled => {
                        self.error = Some(limit.error())
                    }
                    _ => {
                        self.limit = None;
                        self.error = error;
                    }
                }
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }

    async fn check_budget(&mut self, sink: &mut RequestSink) -> anyhow::Result<()> {
        let Some(max) = self.options.max_tokens else {
            return Ok(());
        };
        let usage = self.usage();
        if usage.input_tokens + usage.output_tokens >= max {
            self.end_early(sink, Limit::Budget(max)).await?;
        }
        Ok(())
    }

    /// Cancels the run's turn because `limit` was reached (once).
    async fn end_early(&mut self, sink: &mut RequestSink, limit: Limit) -> anyhow::Result<()> {
        if self.limit.is_some() || self.end.is_some() {
            return Ok(());
        }
        self.limit = Some(limit);
        sink.send(&Request::with_id(
            Method::Cancel {
                run: Some(self.request_id.clone()),
            },
            format!("{}-limit", self.request_id),
        ))
        .await?;
        Ok(())
    }

    fn print_json(&self, line: &str) -> std::io::Result<()> {
        if !self.options.json {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        match writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            done => done,
        }
    }

    /// `--emit-patch`: the diff between the run's first and last checkpoint,
    /// written to `file`; where it was written, or `None` (said on stderr)
    /// when it could not be made.
    async fn write_patch(
        &self,
        events: &mut EventStream,
        sink: &mut RequestSink,
        file: &Path,
    ) -> anyhow::Result<Option<PathBuf>> {
        if let Some(why) = &self.checkpoint_failed {
            eprintln!(
                "pod: --emit-patch: no patch: a checkpoint of the run could not be taken ({}), \
                 so what changed is not known",
                safe_text::line(why)
            );
            return Ok(None);
        }
        let diff = match (&self.first_checkpoint, &self.last_checkpoint) {
            (Some(from), Some(to)) if from != to => match get_diff(events, sink, from, to).await? {
                Ok(diff) => diff,
                Err(why) => {
                    eprintln!("pod: --emit-patch: no patch: {}", safe_text::line(&why));
                    return Ok(None);
                }
            },
            // Nothing that may change files ran: the patch is empty.
            _ => Diff::default(),
        };
        if diff.truncated {
            eprintln!(
                "pod: --emit-patch: the diff is over the pod's 4 MiB limit and was cut: {} is \
                 incomplete and will not apply",
                file.display()
            );
        }
        std::fs::write(file, diff.text.as_bytes())
            .with_context(|| format!("--emit-patch: cannot write {}", file.display()))?;
        Ok(Some(file.to_path_buf()))
    }
}

#[derive(Default)]
struct Diff {
    text: String,
    truncated: bool,
}

/// Asks the pod for the diff between two checkpoints; `Err` with the pod's
/// refusal.
async fn get_diff(
    events: &mut EventStream,
    sink: &mut RequestSink,
    from: &str,
    to: &str,
) -> anyhow::Result<Result<Diff, String>> {
    let method = Method::GetDiff {
        from: from.to_owned(),
        to: Some(to.to_owned()),
        path: None,
        binary: true,
    };
    Ok(
        match crate::client::call::<answer::Diff>(events, sink, method).await {
            Ok(answer) => Ok(Diff {
                text: answer.diff,
                truncated: answer.truncated,
            }),
            Err(refusal) => Err(refusal.to_string()),
        },
    )
}
