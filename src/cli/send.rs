//! `pod send`: one message, the reply streamed to stdout, and an exit code
//! that tells a script how the turn ended (`cli.md`).
//!
//! The run carries a request id of its own; the turn whose `turn_start`
//! carries it is this command's turn, and only that turn is shown — other
//! clients' turns on the same pod pass by unseen.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{signal, SignalKind};

use super::args::SendArgs;
use super::connect::{connect, exit};
use super::transcript::Transcript;
use super::Paths;
use crate::client::{self, EventStream, Refusal};
use crate::protocol::answer::BlobStored;
use crate::protocol::{
    AssistantItem, DecidedBy, Decision, ErrorCode, Event, Level, LogEntry, Method, PodState,
    Request, Segment, TurnEndReason, TurnError,
};
use crate::safe_text;

/// The label this connection gives itself (`approval_decision.client`).
const CLIENT: &str = "pod send";

/// What `pod send` needs to start a pod when none runs.
pub struct Starting<'a> {
    /// `--config`, handed on.
    pub config: Option<&'a std::path::Path>,
    /// The `serve` flags typed before `send`, handed on.
    pub given: &'a [std::ffi::OsString],
    /// `--socket` (or `POD_SOCKET`) names the pod: it is not this
    /// command's to start.
    pub socket_given: bool,
}

pub fn run(paths: &Paths, args: SendArgs, starting: Starting) -> anyhow::Result<ExitCode> {
    // Nothing given but a pipe on stdin (`echo hi | pod send`): the pipe is
    // the message. With --file or --image the stdin is not ours to read.
    let piped = args.file.is_empty() && args.image.is_empty() && !std::io::stdin().is_terminal();
    let given = match args.text.or(args.message) {
        Some(given) => given,
        None if piped => "-".to_owned(),
        None => String::new(),
    };
    let text = if given == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the message from stdin")?;
        text
    } else {
        given
    };
    // An empty message would start a turn with nothing in it, which some
    // providers refuse: with nothing to send, this is a usage mistake.
    if text.trim().is_empty() && args.file.is_empty() && args.image.is_empty() {
        eprintln!(
            "pod: nothing to send: the message is empty; give --text TEXT (- reads it from \
             stdin), TEXT, --file PATH or --image FILE"
        );
        return Ok(ExitCode::from(exit::USAGE));
    }
    let mut segments: Vec<Segment> = Vec::new();
    if !text.trim().is_empty() {
        // Over the network the files are the pod's, not this machine's.
        if paths.is_remote() {
            segments.push(Segment::text(text));
        } else {
            segments.extend(typed_file_refs(&text, |path| {
                local_file(path, &paths.workspace)
            }));
        }
    }
    segments.extend(
        args.file
            .iter()
            .map(|path| Segment::file_ref(file_ref_path(path))),
    );
    let mut images = Vec::new();
    for path in &args.image {
        match read_image(path) {
            Ok(image) => images.push(image),
            Err(why) => {
                eprintln!("pod: cannot attach {}: {why}", safe_text::line(path));
                return Ok(ExitCode::from(exit::USAGE));
            }
        }
    }
    let options = Options {
        json: args.json,
        no_wait: args.no_wait,
    };
    let may_start = !args.no_start
        && !starting.socket_given
        && !paths.is_remote()
        && !crate::tools::process::under_a_pod();
    // A pod with a `--name` is stopped by that name.
    let pod = paths.command("");
    if may_start && super::connect::nobody_listens(&paths.socket) {
        if let Err(e) = super::serve::start_background(paths, starting.config, starting.given) {
            eprintln!("pod: no pod was running for this workspace, and starting one failed: {e:#}");
            return Ok(ExitCode::from(exit::NO_POD));
        }
        eprintln!(
            "pod: started the pod {:?} for {} (it keeps running; `{pod} stop` stops it)",
            paths.name,
            paths.workspace.display()
        );
    } else if !starting.given.is_empty() {
        // The flags are for a pod this command would start; a running one
        // keeps its own, and silence would let the user believe otherwise.
        let flags: Vec<String> = starting
            .given
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .filter(|f| f.starts_with("--"))
            .collect();
        eprintln!(
            "pod: a pod is already running, so {} set nothing: they are for a pod `pod send` \
             starts (`{pod} stop` first to start one with them; `{pod} \
             status` shows what it runs)",
            safe_text::line(&flags.join(" "))
        );
    }
    super::runtime()?.block_on(send(paths, segments, images, options))
}

/// An image to upload before the run: its file name, media type and bytes
/// in base64.
struct Image {
    name: String,
    media_type: &'static str,
    data: String,
}

/// Reads an `--image` file and tells its type from its bytes, so a file
/// that is not an image is refused here, before anything is sent.
fn read_image(path: &str) -> Result<Image, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let media_type = crate::protocol::blob::sniff(&bytes)
        .ok_or("it is not a PNG, JPEG, GIF or WebP image (by its first bytes)")?;
    let name = std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
    Ok(Image {
        name,
        media_type,
        data: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes),
    })
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

/// Sentence punctuation that may follow an `@path` without being part of
/// it (`see @a.py.` names `a.py`), as in the TUI's composer.
const TRAILING_PUNCTUATION: &[char] = &['.', ',', ';', ':', '!', '?', ')', '"', '\''];

/// The message as segments: each `@path` word outside backquotes that
/// names a file (`is_file` says, and gives the path to send) becomes a
/// `file_ref`, as a typed `@path` does in the TUI; the rest stays text.
fn typed_file_refs(text: &str, is_file: impl Fn(&str) -> Option<String>) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut plain_from = 0;
    let mut backticks = 0;
    let mut prev: Option<char> = None;
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        if c == '`' {
            backticks += 1;
        }
        if c == '@' && prev.is_none_or(char::is_whitespace) && backticks % 2 == 0 {
            let word = text[i + 1..]
                .split(|c: char| c.is_whitespace() || c == '`')
                .next()
                .unwrap_or_default();
            let path = word.trim_end_matches(TRAILING_PUNCTUATION);
            if let Some(sent) = (!path.is_empty()).then(|| is_file(path)).flatten() {
                if plain_from < i {
                    segments.push(Segment::text(&text[plain_from..i]));
                }
                segments.push(Segment::file_ref(sent));
                i += 1 + path.len();
                plain_from = i;
                prev = path.chars().last();
                continue;
            }
        }
        prev = Some(c);
        i += c.len_utf8();
    }
    if plain_from < text.len() {
        segments.push(Segment::text(&text[plain_from..]));
    }
    segments
}

/// An `@path` of the message as the pod should see it, when it names a
/// file of the workspace from here (as `--file` takes it) or from the
/// workspace; `None` otherwise — a handle, a file outside the workspace
/// (which the pod would refuse the whole message for): left as text.
fn local_file(path: &str, workspace: &std::path::Path) -> Option<String> {
    let workspace = workspace.canonicalize().ok()?;
    let inside = |p: &std::path::Path| {
        p.is_file()
            && p.canonicalize()
                .is_ok_and(|real| real.starts_with(&workspace))
    };
    let here = std::path::Path::new(path);
    if inside(here) {
        // Relative to the workspace, as the TUI sends a completed `@path`:
        // every client draws the message as typed, not as an absolute path
        // of this machine.
        let real = here.canonicalize().ok()?;
        let relative = real.strip_prefix(&workspace).ok()?;
        return Some(relative.display().to_string());
    }
    inside(&workspace.join(here)).then(|| path.to_owned())
}

#[derive(Debug, Clone, Copy)]
struct Options {
    json: bool,
    no_wait: bool,
}

async fn send(
    paths: &Paths,
    mut segments: Vec<Segment>,
    images: Vec<Image>,
    options: Options,
) -> anyhow::Result<ExitCode> {
    let (mut events, mut sink) = match connect(&paths.endpoint).await? {
        Ok(connection) => connection,
        Err(code) => return Ok(code),
    };
    // Installed before the run goes out, so that no Ctrl+C can kill this
    // process silently while its run is on its way.
    let mut interrupts =
        signal(SignalKind::interrupt()).context("cannot watch for Ctrl+C (SIGINT)")?;
    // `timeout 8 pod send …`, a closed terminal, a supervisor stopping the
    // job: each means the user no longer wants the answer, so they cancel
    // the run as Ctrl+C does — left alone, the pod would go on generating
    // and the runs queued behind it would wait.
    let mut terminations = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut hangups = signal(SignalKind::hangup()).context("cannot watch for SIGHUP")?;
    let request_id = format!("send-{}", uuid::Uuid::new_v4().simple());
    sink.send(&Request::new(Method::Hello {
        client: CLIENT.into(),
    }))
    .await?;
    let stdout = std::io::stdout();
    let tools_inline = stdout.is_terminal();
    let transcript = Transcript::new(stdout.lock(), std::io::stderr(), tools_inline);
    let mut turn = Turn::new(request_id.clone(), options, transcript, paths.command(""));
    for image in images {
        let method = Method::PutBlob {
            media_type: image.media_type.into(),
            data: image.data,
        };
        // Frames before the answer (the snapshot, other clients' turns)
        // go where they would have gone; the first failure to print one
        // ends the command once the answer is in.
        let mut unprinted = None;
        let answer = client::call_seeing(&mut events, &mut sink, method, |line, event| {
            if unprinted.is_none() {
                unprinted = turn.on_frame(&line, event).err();
            }
        })
        .await;
        if let Some(e) = unprinted {
            return Err(e.into());
        }
        match answer {
            Ok(BlobStored { blob, .. }) => {
                segments.push(Segment::image(blob, image.media_type, Some(image.name)));
            }
            Err(Refusal::Refused { message, .. }) => {
                eprintln!(
                    "pod: the pod refused the image {}: {}",
                    safe_text::line(&image.name),
                    safe_text::line(&message)
                );
                return Ok(ExitCode::from(exit::FAILED));
            }
            Err(e @ (Refusal::Connection(_) | Refusal::Unexpected(_))) => return Err(e.into()),
            Err(Refusal::Closed | Refusal::ShutDown { .. }) => {
                anyhow::bail!("the connection to the pod was lost while sending an image")
            }
        }
    }
    sink.send(&Request::with_id(
        Method::Run { segments },
        request_id.clone(),
    ))
    .await?;
    loop {
        let flow = tokio::select! {
            frame = events.next_frame() => match frame {
                Some(Ok((line, event))) => match turn.on_frame(&line, event) {
                    // Whoever read the answer stopped (`pod send … | head`):
                    // this command stops waiting, quietly, as a pipeline's
                    // stage does.
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        Flow::Exit(ExitCode::from(exit::DETACHED))
                    }
                    flow => flow?,
                },
                Some(Err(e)) => turn.stop_waiting(&format!("the connection to the pod failed: {e}"))?,
                None => turn.stop_waiting(&format!(
                    "the connection to the pod at {} was lost before the turn ended",
                    paths.endpoint
                ))?,
            },
            _ = stop_signal(&mut interrupts, &mut terminations, &mut hangups) => match turn.interrupt()? {
                Some(cancel) => {
                    sink.send(&cancel).await?;
                    Flow::Continue
                }
                None => Flow::Exit(ExitCode::from(exit::DETACHED)),
            },
        };
        match flow {
            Flow::Continue => {}
            Flow::Exit(code) => return Ok(code),
            Flow::CancelledElsewhere => {
                let shut_down = shutdown_follows(&mut events).await;
                return Ok(turn.cancelled_elsewhere(shut_down));
            }
        }
    }
}

/// The next SIGINT, SIGTERM or SIGHUP.
async fn stop_signal(
    interrupts: &mut tokio::signal::unix::Signal,
    terminations: &mut tokio::signal::unix::Signal,
    hangups: &mut tokio::signal::unix::Signal,
) {
    tokio::select! {
        _ = interrupts.recv() => {}
        _ = terminations.recv() => {}
        _ = hangups.recv() => {}
    }
}

/// How long after a turn that ended `cancelled` without our asking a
/// `shutdown` may follow for the cancel to count as the pod's stop.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

/// Whether the pod is stopping: a stop cancels the running turn, commits its
/// `turn_end`, and only then says `shutdown` and closes.
async fn shutdown_follows(events: &mut EventStream) -> bool {
    let watch = async {
        loop {
            match events.next().await {
                None | Some(Err(_)) | Some(Ok(Event::Shutdown { .. })) => return true,
                Some(Ok(_)) => {}
            }
        }
    };
    tokio::time::timeout(SHUTDOWN_GRACE, watch)
        .await
        .unwrap_or(false)
}

enum Flow {
    Continue,
    Exit(ExitCode),
    /// Our turn ended `cancelled` though we did not cancel it: another
    /// client did, or the pod is shutting down — which one decides the exit
    /// code.
    CancelledElsewhere,
}

/// What `pod send` knows about its run and its turn, frame by frame.
struct Turn<O: Write, E: Write> {
    request_id: String,
    /// The request id of the `cancel` the first Ctrl+C sends.
    cancel_id: String,
    options: Options,
    transcript: Transcript<O, E>,
    /// `pod` with the flags that reach this pod, for the hints.
    pod: String,
    /// The pod answered the run with a `response`.
    accepted: bool,
    /// How many runs were ahead of ours when it was accepted.
    ahead: usize,
    /// Our `turn_start` arrived: frames from here to our `turn_end` are ours.
    ours: bool,
    /// The pod's last known state is `waiting` (for an approval).
    pod_waiting: bool,
    told_queued_behind_approval: bool,
    interrupts: u32,
    /// The message of a model error broadcast during our turn, shown at the
    /// end should the `turn_end` carry no error of its own.
    model_error: Option<String>,
}

impl<O: Write, E: Write> Turn<O, E> {
    fn new(
        request_id: String,
        options: Options,
        transcript: Transcript<O, E>,
        pod: String,
    ) -> Self {
        Self {
            pod,
            cancel_id: format!("{request_id}-cancel"),
            request_id,
            options,
            transcript,
            accepted: false,
            ahead: 0,
            ours: false,
            pod_waiting: false,
            told_queued_behind_approval: false,
            interrupts: 0,
            model_error: None,
        }
    }

    fn on_frame(&mut self, line: &str, event: Event) -> std::io::Result<Flow> {
        if let Some(flow) = self.answer(line, &event)? {
            return Ok(flow);
        }
        match &event {
            // The state of the pod before our turn: never printed.
            Event::Snapshot(snapshot) => {
                if !self.ours {
                    self.pod_waiting = snapshot.status.state == PodState::Waiting;
                }
                return Ok(Flow::Continue);
            }
            Event::TurnStart {
                request_id: Some(id),
                ..
            } if *id == self.request_id => self.ours = true,
            Event::Status(status) => {
                self.pod_waiting = status.state == PodState::Waiting;
                self.note_queued_behind_approval();
            }
            Event::Shutdown { reason } => {
                if self.ours {
                    self.print_json(line)?;
                }
                return self.stop_waiting(&format!(
                    "the pod shut down before the turn ended ({reason})"
                ));
            }
            _ => {}
        }
        if !self.ours {
            return Ok(Flow::Continue);
        }
        self.print_json(line)?;
        self.show(event)
    }

    /// Handles the answers to this command's own requests.
    fn answer(&mut self, line: &str, event: &Event) -> std::io::Result<Option<Flow>> {
        let (id, refusal) = match event {
            Event::Response(r) => (r.request_id.as_deref(), None),
            Event::Error {
                request_id,
                code,
                message,
            } => (request_id.as_deref(), Some((*code, message.as_str()))),
            _ => return Ok(None),
        };
        let Some(id) = id else {
            // A frame the pod could not read carries no request id. Until
            // the run is accepted, the only such frame this command can
            // have sent is its run: a message over the pod's frame limit.
            if let (false, Some((ErrorCode::FrameTooLarge, message))) = (self.accepted, refusal) {
                self.print_json(line)?;
                eprintln!(
                    "pod: the pod refused the message: {}. Attach long text as a file \
                     (--file PATH) instead",
                    safe_text::line(message)
                );
                return Ok(Some(Flow::Exit(ExitCode::from(exit::FAILED))));
            }
            return Ok(None);
        };
        if id == self.request_id {
            self.print_json(line)?;
            if let Some((_, message)) = refusal {
                eprintln!(
                    "pod: the pod refused the message: {}",
                    safe_text::line(message)
                );
                return Ok(Some(Flow::Exit(ExitCode::from(exit::FAILED))));
            }
            if let Event::Response(r) = event {
                self.accepted = true;
                self.ahead = r.queued.unwrap_or(0);
            }
            if self.options.no_wait {
                return Ok(Some(Flow::Exit(ExitCode::SUCCESS)));
            }
            if self.ahead > 0 && !self.pod_waiting {
                let runs = if self.ahead == 1 {
                    "1 run; it starts when that ends".to_owned()
                } else {
                    format!("{} runs; it starts when they end", self.ahead)
                };
                self.transcript.notice(&format!(
                    "pod: your message is queued behind {runs} (Ctrl+C removes it)"
                ))?;
            }
            self.note_queued_behind_approval();
            return Ok(Some(Flow::Continue));
        }
        if id == self.cancel_id {
            match (event, refusal) {
                (Event::Response(r), _) if r.removed == Some(true) => {
                    eprintln!("pod: your message was still queued: it is removed, nothing ran");
                    return Ok(Some(Flow::Exit(ExitCode::from(exit::CANCELLED))));
                }
                // The turn ended on its own meanwhile; its `turn_end` says how.
                (_, Some((ErrorCode::NotRunning, _))) => {}
                (_, Some((_, message))) => {
                    eprintln!("pod: cancelling failed: {}", safe_text::line(message))
                }
                // Cancelled while running: the turn ends `cancelled` next.
                _ => {}
            }
            return Ok(Some(Flow::Continue));
        }
        Ok(None)
    }

    /// Shows one frame of our turn as text (and notices on stderr).
    fn show(&mut self, event: Event) -> std::io::Result<Flow> {
        let text = !self.options.json;
        match event {
            Event::TextDelta { text: delta } if text => self.transcript.text(&delta)?,
            Event::ToolCallStart { .. } => self.transcript.end_block(),
            Event::Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            } => self.transcript.notice(&format!(
                "pod: {} · retrying in {} ({attempt}/{max_attempts})",
                safe_text::line(&error),
                seconds(delay_ms)
            ))?,
            Event::Error {
                code: ErrorCode::ModelError,
                message,
                ..
            } => self.model_error = Some(message),
            Event::Error { message, .. } => self
                .transcript
                .notice(&format!("pod: {}", safe_text::line(&message)))?,
            // A hook that failed, an MCP server that went down: worth a
            // line while this turn runs (informational notices are not).
            Event::Notification {
                level: Level::Warn | Level::Error,
                source,
                message,
            } => self.transcript.notice(&format!(
                "pod: [{}] {}",
                safe_text::line(&source),
                safe_text::line(&message)
            ))?,
            Event::Entry { entry, .. } => return self.show_entry(entry),
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn show_entry(&mut self, entry: LogEntry) -> std::io::Result<Flow> {
        match entry {
            LogEntry::AssistantItems { items } => {
                for item in items {
                    match item {
                        AssistantItem::ToolCall {
                            name, arguments, ..
                        } if !self.options.json => self.transcript.tool_call(&name, &arguments)?,
                        _ => self.transcript.end_block(),
                    }
                }
            }
            LogEntry::ApprovalRequest {
                call_id,
                tool,
                summary,
                ..
            } => {
                let (tool, summary, call_id) = (
                    safe_text::line(&tool),
                    safe_text::line(&summary),
                    safe_text::line(&call_id),
                );
                // A bell where a person can hear it: someone who sent a
                // message and looked away learns that the pod waits for them.
                let bell = if std::io::stderr().is_terminal() {
                    "\x07"
                } else {
                    ""
                };
                // A summary may name its tool already (`write_file new a.txt`).
                let what = if summary.starts_with(tool.as_ref()) {
                    summary.to_string()
                } else {
                    format!("{tool}: {summary}")
                };
                self.transcript.notice(&format!(
                    "{bell}pod: waiting for approval: {what} (call {call_id})"
                ))?;
                let pod = &self.pod;
                self.transcript.notice(&format!(
                    "pod: answer with `{pod} approve {call_id}` or `{pod} deny {call_id}` \
                     (any client may answer; `{pod} pending` lists what waits)"
                ))?;
            }
            LogEntry::ApprovalDecision {
                call_id,
                decision,
                by: DecidedBy::User | DecidedBy::Hook,
                client,
                ..
            } => {
                let verb = match decision {
                    Decision::Allow => "approved",
                    Decision::Deny => "denied",
                    Decision::Unknown => "decided",
                };
                let by = client
                    .map(|c| format!(" by {}", safe_text::line(&c)))
                    .unwrap_or_default();
                self.transcript.notice(&format!(
                    "pod: call {} {verb}{by}",
                    safe_text::line(&call_id)
                ))?;
            }
            // A call shown with its `⚙` line that never ran (its reply was
            // cut or failed, the pod stopped): say so, or the line reads
            // as if it ran.
            LogEntry::ToolResults { results } => {
                self.transcript.end_block();
                for result in results.iter().filter(|r| r.is_error) {
                    if let Some(why) = result.output.strip_prefix("[not run: ") {
                        self.transcript.notice(&format!(
                            "pod: tool call {} was not run: {}",
                            safe_text::line(&result.call_id),
                            safe_text::line(why.trim_end_matches(']'))
                        ))?;
                    }
                }
            }
            LogEntry::TurnEnd { reason, error, .. } => return self.end(reason, error),
            _ => self.transcript.end_block(),
        }
        Ok(Flow::Continue)
    }

    fn end(&mut self, reason: TurnEndReason, error: Option<TurnError>) -> std::io::Result<Flow> {
        self.finish_output()?;
        let code = match reason {
            TurnEndReason::Completed => return Ok(Flow::Exit(ExitCode::SUCCESS)),
            TurnEndReason::Cancelled if self.interrupts == 0 => {
                return Ok(Flow::CancelledElsewhere)
            }
            TurnEndReason::Cancelled => {
                eprintln!("pod: the turn was cancelled");
                exit::CANCELLED
            }
            TurnEndReason::MaxSteps => {
                eprintln!(
                    "pod: the turn stopped at its step limit (max_steps; `pod serve --max-steps` \
                     raises it)"
                );
                exit::FAILED
            }
            TurnEndReason::Error | TurnEndReason::Interrupted | TurnEndReason::Unknown => {
                let why = match error {
                    Some(e) => format!("{}: {}", code_name(&e), e.message),
                    None => self
                        .model_error
                        .take()
                        .unwrap_or_else(|| "the pod recorded no reason".into()),
                };
                eprintln!(
                    "pod: the turn ended with {}: {}",
                    reason.as_str(),
                    safe_text::lines(&why)
                );
                exit::FAILED
            }
        };
        Ok(Flow::Exit(ExitCode::from(code)))
    }

    /// The end of a turn cancelled by someone else, or by the pod stopping.
    fn cancelled_elsewhere(&self, pod_shut_down: bool) -> ExitCode {
        if pod_shut_down {
            eprintln!("pod: the pod shut down before the turn ended");
            ExitCode::from(exit::DETACHED)
        } else {
            eprintln!("pod: the turn was cancelled (by another client)");
            ExitCode::from(exit::CANCELLED)
        }
    }

    /// The first Ctrl+C: the `cancel` to send for our run. The second: `None`,
    /// stop waiting.
    fn interrupt(&mut self) -> std::io::Result<Option<Request>> {
        self.interrupts += 1;
        if self.interrupts == 1 {
            // Not `eprintln!`: after a hang-up the terminal is gone, and a
            // failed write must not panic before the cancel goes out.
            let _ = writeln!(
                std::io::stderr(),
                "pod: cancelling your message… (Ctrl+C again stops waiting)"
            );
            return Ok(Some(Request::with_id(
                Method::Cancel {
                    run: Some(self.request_id.clone()),
                },
                self.cancel_id.clone(),
            )));
        }
        self.finish_output()?;
        eprintln!("pod: stopped waiting; whatever the pod is doing goes on");
        Ok(None)
    }

    /// Gives up before the turn ended, saying why.
    fn stop_waiting(&mut self, why: &str) -> std::io::Result<Flow> {
        self.finish_output()?;
        eprintln!("pod: {why}");
        Ok(Flow::Exit(ExitCode::from(exit::DETACHED)))
    }

    /// Says once that our run waits behind a turn that waits for a person.
    fn note_queued_behind_approval(&mut self) {
        if self.accepted
            && !self.ours
            && self.ahead > 0
            && self.pod_waiting
            && !self.told_queued_behind_approval
        {
            self.told_queued_behind_approval = true;
            eprintln!(
                "pod: your message is queued behind a turn that is waiting for approval \
                 (`{} pending` lists what waits)",
                self.pod
            );
        }
    }

    fn print_json(&mut self, line: &str) -> std::io::Result<()> {
        if self.options.json {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
        }
        Ok(())
    }

    fn finish_output(&mut self) -> std::io::Result<()> {
        if self.options.json {
            Ok(())
        } else {
            self.transcript.finish()
        }
    }
}

/// `2s`, `0.5s`: a delay as a person reads it.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// The wire name of an error's code (`provider_http`, …).
fn code_name(error: &TurnError) -> String {
    serde_json::to_value(error.code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "other".into())
}
