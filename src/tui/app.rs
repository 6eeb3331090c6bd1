//! The application state: the conversation, the composer and the status,
//! and what keys, pod events and connection changes do to them.
//!
//! Nothing here touches the terminal or the socket: input arrives as values,
//! requests leave through an outbox, and drawing reads the state. That is
//! what makes the whole UI testable with a `TestBackend`.

use std::time::{Duration, Instant};

use super::approval::{self, ApprovalPanel, PanelAction};
use super::commands::{self, Builtin};
use super::composer::{Atom, Composer, MenuItem, TokenKind};
use super::connection::{ConnEvent, ConnectionState, Outgoing};
use super::conversation::{Applied, Conversation, PendingApproval};
use super::layout_cache::LayoutCache;
use super::notify::{Notifier, NotifyMode};
use super::overlay::{self, Overlay, RewindPicker};
use super::viewport::Viewport;
use crate::protocol::{
    CompletionKind, ErrorCode, Event, Greeting, Level, LogEntry, Method, PodState, Request, Status,
    Usage,
};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::event::{MouseEvent, MouseEventKind};

mod command;
mod pending;

/// Two Ctrl+C within this long quit.
const DOUBLE_CTRL_C: Duration = Duration::from_secs(1);
/// How soon a second Esc must follow the first to open the rewind picker.
const DOUBLE_ESC: Duration = Duration::from_secs(1);
const SPINNER_STEP: Duration = Duration::from_millis(80);
const WHEEL_ROWS: usize = 3;
/// Keys closer together than this are one burst of typing: a burst that
/// began in the input box never answers an approval panel that appeared
/// in the middle of it.
const TYPING_PAUSE: Duration = Duration::from_millis(500);
/// How long the approval panel is shown before it takes a key: a key
/// pressed sooner was meant for what was on screen before.
const PANEL_ARMING: Duration = Duration::from_millis(300);

pub struct App {
    pub(crate) conversation: Conversation,
    pub(crate) composer: Composer,
    pub(crate) cache: LayoutCache,
    pub(crate) viewport: Viewport,
    pub(crate) pod_name: String,
    /// How the user reaches this pod from its project (`pod`, or `pod
    /// --name NAME`), for the hints that name a command.
    pub pod_command: String,
    /// Whether an empty conversation on the offline model opens with a
    /// notice of how to use a real one: the terminal front end's first
    /// words to a new user (`tui::run` turns it on), not part of what a
    /// conversation's view is.
    pub offline_hint: bool,
    pub(crate) greeting: Option<Greeting>,
    /// Attached over the network (`--url`): the pod takes an `always`
    /// answer from here only if its greeting says so.
    remote: bool,
    pub(crate) status: Option<Status>,
    pub(crate) usage: Option<Usage>,
    pub(crate) connection: ConnectionState,
    pub(crate) spinner: usize,
    /// A one-line hint shown in the status bar until the next key.
    pub(crate) flash: Option<String>,
    /// The screen drawn over the conversation, taking the keys.
    pub(crate) overlay: Option<Overlay>,
    /// The workspace's workflows as the pod last listed them: what a
    /// `/name` may call besides the built-in commands.
    pub(crate) workflows: Vec<MenuItem>,
    /// This client's requests in flight and what to do with each answer.
    pending: pending::Requests,
    /// Bell and desktop notifications for a person who looked away.
    notifier: Notifier,
    /// Escapes to write to the terminal beside the next frame.
    alerts: Vec<String>,
    /// Ctrl+V asked for the clipboard's image, which the run loop reads
    /// off the event loop ([`App::take_clipboard_request`]).
    clipboard_wanted: bool,
    /// A session the picker resumed in order to fork it: forked as soon
    /// as its snapshot arrives.
    fork_after_resume: Option<String>,
    pub(crate) now: Instant,
    /// Whether the plan shows as a checklist (else one line); Ctrl+T.
    pub(crate) plan_expanded: bool,
    /// Size of the conversation area at the last draw, for paging.
    pub(crate) view_size: (u16, u16),
    last_spin: Instant,
    last_ctrl_c: Option<Instant>,
    last_esc: Option<Instant>,
    pub(super) outbox: Vec<Outgoing>,
    /// The pods this view came from through `/agents`, the one to go back
    /// to last; empty while the view is the attached pod's own.
    pub(crate) viewing: Vec<String>,
    quit: bool,
    dirty: bool,
    next_request: u64,
    /// This client's messages the pod queued behind a running turn, oldest
    /// first, until their turn starts: listed under the conversation, and
    /// the last can be taken back (Esc on an empty input box).
    pub(crate) queued: Vec<QueuedRun>,
    /// The approval panel shown in the input box's place while a tool call
    /// waits for an answer.
    pub(crate) approval: ApprovalPanel,
    /// The call the panel shows, to notice when another takes its place.
    approval_shown: Option<String>,
    /// When a key last went into the input box (or was held back from the
    /// panel as part of the same burst).
    last_typed: Option<Instant>,
    /// The panel appeared while the user was typing: their keys are held
    /// back until they pause.
    hold_keys: bool,
    /// When the approval panel showing appeared: it takes no key before
    /// [`PANEL_ARMING`] has passed.
    approval_shown_at: Option<Instant>,
    /// The pod's start warnings were shown (once per TUI, not per reconnect).
    warned: bool,
    /// A message whose typed `@path`s the pod is asked about before it is
    /// sent (Enter came before the menu could answer): past this, it goes
    /// as typed (the pod did not answer).
    resolving: Option<Instant>,
    /// Keys that came while `resolving`: they belong after the message, so
    /// they wait and are replayed once it is sent.
    deferred_keys: Vec<KeyEvent>,
    /// Tab came before the menu had candidates: the first is taken when they
    /// arrive, so a Tab typed in the same burst as the letters is not lost.
    tab_pending: bool,
}

/// How long a message waits for the pod to say which typed `@path`s are
/// files.
const RESOLVE_WAIT: Duration = Duration::from_secs(1);

/// One of this client's messages waiting in the pod's queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedRun {
    pub request_id: String,
    pub atoms: Vec<Atom>,
}

impl App {
    pub fn new(pod_name: impl Into<String>, now: Instant) -> Self {
        Self {
            conversation: Conversation::new(),
            composer: Composer::new(),
            cache: LayoutCache::new(),
            viewport: Viewport::new(),
            pod_name: pod_name.into(),
            pod_command: "pod".to_owned(),
            offline_hint: false,
            greeting: None,
            remote: false,
            status: None,
            usage: None,
            connection: ConnectionState::Connecting,
            spinner: 0,
            flash: None,
            overlay: None,
            workflows: Vec::new(),
            pending: pending::Requests::new(),
            notifier: Notifier::new(NotifyMode::Desktop),
            alerts: Vec::new(),
            clipboard_wanted: false,
            fork_after_resume: None,
            now,
            view_size: (80, 20),
            last_spin: now,
            last_ctrl_c: None,
            plan_expanded: true,
            last_esc: None,
            outbox: Vec::new(),
            viewing: Vec::new(),
            quit: false,
            dirty: true,
            next_request: 0,
            queued: Vec::new(),
            approval: ApprovalPanel::default(),
            approval_shown: None,
            last_typed: None,
            hold_keys: false,
            approval_shown_at: None,
            warned: false,
            resolving: None,
            deferred_keys: Vec::new(),
            tab_pending: false,
        }
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    pub fn composer(&self) -> &Composer {
        &self.composer
    }

    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    pub fn connection(&self) -> ConnectionState {
        self.connection
    }

    /// The pods the view came from through `/agents` (the one to go back
    /// to last); empty while the view is the attached pod's own.
    pub fn viewing(&self) -> &[String] {
        &self.viewing
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// How to tell a person who looked away (`--notify`).
    /// Says that the pod is reached over the network (`--url`).
    pub fn set_remote(&mut self, remote: bool) {
        self.remote = remote;
    }

    pub fn set_notify(&mut self, mode: NotifyMode) {
        self.notifier = Notifier::new(mode);
    }

    /// The bell and notification escapes due, for the run loop to write.
    pub fn take_alerts(&mut self) -> Vec<String> {
        std::mem::take(&mut self.alerts)
    }

    /// Whether Ctrl+V asked for the clipboard's image since the last call.
    pub fn take_clipboard_request(&mut self) -> bool {
        std::mem::take(&mut self.clipboard_wanted)
    }

    /// The clipboard's image (PNG bytes) became a chip, or the reason it
    /// could not is shown.
    pub fn on_clipboard_image(&mut self, image: Result<Vec<u8>, String>) {
        self.dirty = true;
        self.flash = match image.map(|png| self.composer.attach_clipboard_image(png)) {
            Ok(true) => None,
            Ok(false) => Some("the clipboard's image is not a PNG the pod takes".into()),
            Err(reason) => Some(reason),
        };
    }

    /// Whether anything changed since the last call: the run loop draws at
    /// most once per frame tick, and only then.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The requests and reconnects to hand to the connection task.
    pub fn take_outgoing(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.outbox)
    }

    /// This client's messages waiting in the pod's queue, oldest first.
    pub fn queued(&self) -> &[QueuedRun] {
        &self.queued
    }

    /// The approval the panel shows, and how many wait (it included).
    pub fn current_approval(&self) -> Option<(&PendingApproval, usize)> {
        self.approval.current(self.conversation.pending_approvals())
    }

    fn busy(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.state != PodState::Idle)
    }

    fn next_id(&mut self) -> String {
        self.next_request += 1;
        format!("tui-{}", self.next_request)
    }

    fn send(&mut self, method: Method) -> String {
        let id = self.next_id();
        self.outbox
            .push(Outgoing::Request(Request::with_id(method, id.clone())));
        id
    }

    /// Puts a refused message back into the input box, unless the user has
    /// started typing another one (it stays in the history then).
    fn give_back(&mut self, atoms: Vec<Atom>, why: &str) {
        if self.composer.is_empty() {
            self.composer.restore(atoms);
            self.flash = Some(format!("{why}: your message is back in the input box"));
        } else {
            self.flash = Some(format!("{why}: press Up to find your message"));
        }
    }

    /// Advances time: the spinner, the reconnect countdown.
    pub fn on_tick(&mut self, now: Instant) {
        let before = self.now;
        self.now = now;
        if self.resolving.is_some_and(|deadline| now >= deadline) {
            self.finish_resolving();
        }
        if self.busy() && now.duration_since(self.last_spin) >= SPINNER_STEP {
            self.spinner = self.spinner.wrapping_add(1);
            self.last_spin = now;
            self.dirty = true;
        }
        if self.conversation.tick(now) {
            self.dirty = true;
        }
        let arming = self
            .approval_shown_at
            .is_some_and(|at| now.saturating_duration_since(at) < PANEL_ARMING);
        if arming != self.approval.arming {
            self.approval.arming = arming;
            self.dirty = true;
        }
        if let ConnectionState::Retrying { at, .. } = self.connection {
            let secs = |t: Instant| at.saturating_duration_since(t).as_secs();
            if secs(before) != secs(now) {
                self.dirty = true;
            }
        }
    }

    pub fn on_connection(&mut self, event: ConnEvent) {
        self.dirty = true;
        match event {
            ConnEvent::Connected => {
                self.connection = ConnectionState::WaitingForSnapshot;
                let hello = Method::Hello {
                    client: approval::client_label(),
                };
                self.outbox.push(Outgoing::Request(Request::new(hello)));
            }
            ConnEvent::Event(event) => self.on_pod_event(*event),
            ConnEvent::BadFrame(message) => self
                .conversation
                .push_notice(Level::Error, format!("[bad frame] {message}")),
            ConnEvent::Retrying { retry_in, error } => {
                let was_connected = match self.connection {
                    ConnectionState::Connected | ConnectionState::WaitingForSnapshot => {
                        // Nothing is known to run any more: no "running",
                        // no clock counting for a pod that is gone.
                        self.status = None;
                        self.conversation.connection_lost();
                        self.conversation.push_notice(
                            Level::Warn,
                            format!(
                                "[disconnected] {error}. If the pod stopped, start it again with \
                                 `pod` (or `pod serve`) in the project's directory; this view \
                                 reconnects by itself when it is back"
                            ),
                        );
                        self.viewport.end();
                        true
                    }
                    ConnectionState::Retrying { was_connected, .. } => was_connected,
                    ConnectionState::Connecting => false,
                };
                // A pod that comes back may not have kept its queue; the
                // status bar's count says what it holds.
                self.queued.clear();
                self.connection = ConnectionState::Retrying {
                    at: self.now + retry_in,
                    was_connected,
                };
            }
            ConnEvent::CannotOpen(why) => {
                self.viewing.pop();
                self.conversation.push_notice(Level::Warn, why);
                self.viewport.end();
                // The view was given up for the child's: the pod's own
                // snapshot brings it back.
                self.outbox.push(Outgoing::Reconnect);
            }
            ConnEvent::NotSent(request) => {
                if let Method::Run { .. } = request.method {
                    let unsent = request.request_id.and_then(|id| self.pending.remove(&id));
                    if let Some(pending::Pending {
                        then: pending::Then::Run(atoms),
                        ..
                    }) = unsent
                    {
                        self.give_back(atoms, "not sent");
                    }
                }
            }
        }
    }

    /// Tells a person who looked away that a child pod asks for approval:
    /// its request is in the child's log, not in this view, so the
    /// parent's status is where it first shows (`/agents` opens the child).
    fn alert_child_requests(&mut self, status: &crate::protocol::Status) {
        let before = self
            .status
            .as_ref()
            .map(|s| s.agents.as_slice())
            .unwrap_or_default();
        for agent in &status.agents {
            let known = before
                .iter()
                .find(|a| a.name == agent.name)
                .map(|a| a.pending_approvals.as_slice())
                .unwrap_or_default();
            if let Some(call) = agent.pending_approvals.iter().find(|c| !known.contains(c)) {
                let body = format!("{}: call {call} · /agents opens it", agent.name);
                self.alerts
                    .extend(self.notifier.alert("a child pod waits for approval", &body));
            }
        }
    }

    /// Whether a key goes to the approval panel rather than the composer.
    /// Only the panel's own keys, and only once it is armed: shown for
    /// [`PANEL_ARMING`] and not in the middle of a burst of typing that
    /// began before it appeared. Every other key is the message's — no
    /// keystroke is dropped, nor taken as an answer the user never saw.
    fn panel_takes(&mut self, key: &KeyEvent) -> bool {
        if key.modifiers.contains(KeyModifiers::CONTROL) || self.approval.message.is_some() {
            return true;
        }
        let own = matches!(
            key.code,
            KeyCode::Char('y' | 'a' | 'A' | 'n' | 'N')
                | KeyCode::Esc
                | KeyCode::Up
                | KeyCode::Down
                | KeyCode::PageUp
                | KeyCode::PageDown
                | KeyCode::Home
        );
        if self.hold_keys {
            let typing = self
                .last_typed
                .is_some_and(|t| self.now.saturating_duration_since(t) < TYPING_PAUSE);
            if typing {
                return false;
            }
            self.hold_keys = false;
        }
        let armed = self
            .approval_shown_at
            .is_none_or(|at| self.now.saturating_duration_since(at) >= PANEL_ARMING);
        own && armed
    }

    /// Applies one pod event. Until this connection's snapshot arrives,
    /// nothing else is applied: the view is snapshot-then-live, always.
    pub fn on_pod_event(&mut self, event: Event) {
        // A panel that was already there when this view began was not
        // sprung on anyone typing: it is armed at once.
        let snapshot = matches!(event, Event::Snapshot(_));
        self.apply_pod_event(event);
        self.approval
            .forget_settled(self.conversation.pending_approvals());
        let shown = self.current_approval().map(|(p, _)| p.call_id.clone());
        if shown != self.approval_shown {
            self.hold_keys = shown.is_some()
                && self
                    .last_typed
                    .is_some_and(|t| self.now.saturating_duration_since(t) < TYPING_PAUSE);
            self.approval_shown_at = shown.as_ref().filter(|_| !snapshot).map(|_| self.now);
            self.approval.arming = self.approval_shown_at.is_some();
            self.approval_shown = shown;
        }
    }

    fn apply_pod_event(&mut self, event: Event) {
        self.dirty = true;
        if let Event::Snapshot(snapshot) = &event {
            self.connection = ConnectionState::Connected;
            self.greeting = Some(snapshot.greeting.clone());
            self.status = Some(snapshot.status.clone());
            self.usage = snapshot.entries.iter().rev().find_map(|l| match l.entry {
                LogEntry::TurnEnd { usage, .. } => usage,
                _ => None,
            });
            self.conversation.load_snapshot(snapshot, self.now);
            self.approval.reset();
            self.forget_answers();
            self.approval.always_refused = self.remote && !snapshot.greeting.allow_remote_always;
            // Whatever the last hint said about the connection is over.
            self.flash = None;
            // The pod's start warnings (a misspelt config key, say) are
            // otherwise only in its log: shown once, at the bottom.
            if !std::mem::replace(&mut self.warned, true) {
                for warning in &snapshot.greeting.warnings {
                    let text = format!("[pod warning] {}", crate::safe_text::line(warning));
                    self.conversation.push_notice(Level::Warn, text);
                }
            }
            // A conversation on the offline model that has not begun would
            // otherwise open empty, only the status bar saying so until a
            // first reply (whose words these are); once it has begun, those
            // replies say it. Said on every such snapshot, which rebuilds the
            // transcript.
            let begun = snapshot
                .entries
                .iter()
                .any(|line| matches!(line.entry, crate::protocol::LogEntry::UserInput { .. }));
            if self.offline_hint
                && !begun
                && snapshot.greeting.provider == crate::protocol::offline::PROVIDER
            {
                let text = format!(
                    "[offline model] This pod runs pod's built-in offline model: no real model \
                     is configured, so its replies are not written by one. {}",
                    crate::protocol::offline::real_model_hint(&self.pod_command)
                );
                self.conversation.push_notice(Level::Info, text);
            }
            self.viewport.end();
            self.ask(
                Method::ListCompletions {
                    kind: CompletionKind::Workflow,
                    prefix: String::new(),
                },
                pending::Then::Workflows,
            );
            if let Some(fork) = self.fork_after_resume.take() {
                if fork == snapshot.session_id.to_string() {
                    self.send(Method::Fork { at_seq: None });
                }
            }
            return;
        }
        if self.connection != ConnectionState::Connected {
            return;
        }
        match event {
            Event::Status(status) => {
                self.alert_child_requests(&status);
                self.status = Some(status);
            }
            Event::Usage(usage) => self.usage = Some(usage),
            Event::Response(response) => self.on_response(response),
            Event::Error {
                code,
                ref message,
                request_id: Some(ref id),
            } if self.says_refusal(id) => {
                let id = id.clone();
                let message = message.clone();
                self.on_refused(&id, code, &message, &event);
            }
            Event::Shutdown { reason } => self
                .conversation
                .push_notice(Level::Warn, format!("[pod shut down] {reason}")),
            event => {
                if let Event::TurnStart {
                    request_id: Some(id),
                    ..
                } = &event
                {
                    self.queued.retain(|q| &q.request_id != id);
                }
                if let Event::Entry {
                    entry: LogEntry::TurnEnd { usage: Some(u), .. },
                    ..
                } = &event
                {
                    self.usage = Some(*u);
                }
                let alert = match &event {
                    Event::Entry {
                        entry: LogEntry::ApprovalRequest { tool, summary, .. },
                        ..
                    } => self
                        .notifier
                        .alert("pod waits for approval", &format!("{tool}: {summary}")),
                    Event::Entry {
                        entry: LogEntry::TurnEnd { reason, .. },
                        ..
                    } => self
                        .notifier
                        .alert("pod", &format!("turn ended: {}", reason_text(*reason))),
                    _ => None,
                };
                self.alerts.extend(alert);
                if let Applied::Resync(why) = self.conversation.apply(&event, self.now) {
                    self.conversation
                        .push_notice(Level::Warn, format!("[resync] {why}"));
                    self.outbox.push(Outgoing::Reconnect);
                }
            }
        }
    }

    /// The pod refused this client's answer to `call_id`: not pending any
    /// more (someone else answered, the turn ended) dismisses it; any
    /// other refusal shows it again, with the error.
    fn on_refused_answer(&mut self, call_id: &str, code: ErrorCode, message: &str) {
        if code == ErrorCode::NotPending {
            self.conversation.drop_pending(call_id);
            self.conversation.push_notice(
                Level::Warn,
                format!("[approval] {call_id} was no longer waiting: {message}"),
            );
        } else {
            self.approval.unanswer(call_id);
            self.conversation
                .push_notice(Level::Error, format!("[approval refused] {message}"));
        }
    }

    pub fn on_terminal(&mut self, event: TermEvent) {
        self.dirty = true;
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.on_key(key),
            TermEvent::Paste(text) => {
                self.composer.paste(&text);
                self.refresh_completion();
            }
            TermEvent::FocusGained => self.notifier.set_focused(true),
            TermEvent::FocusLost => self.notifier.set_focused(false),
            TermEvent::Mouse(MouseEvent { kind, .. }) => match kind {
                MouseEventKind::ScrollUp => self.scroll(true, WHEEL_ROWS),
                MouseEventKind::ScrollDown => self.scroll(false, WHEEL_ROWS),
                _ => {}
            },
            _ => {}
        }
    }

    fn scroll(&mut self, up: bool, n: usize) {
        let (width, height) = self.view_size;
        let mut rows = self.cache.rows(&self.conversation, width);
        let height = usize::from(height);
        if up {
            self.viewport.scroll_up(&mut rows, height, n);
        } else {
            self.viewport.scroll_down(&mut rows, height, n);
        }
    }

    fn page(&self) -> usize {
        usize::from(self.view_size.1).saturating_sub(2).max(1)
    }

    fn on_key(&mut self, key: KeyEvent) {
        if self.resolving.is_some() {
            self.deferred_keys.push(key);
            return;
        }
        if key.code != KeyCode::Tab {
            self.tab_pending = false;
        }
        self.handle_key(key);
    }

    /// Sends the message being resolved, then replays the keys typed
    /// meanwhile.
    pub(super) fn finish_resolving(&mut self) {
        if self.resolving.take().is_some() {
            self.forget_resolving();
            self.submit_resolved();
            for key in std::mem::take(&mut self.deferred_keys) {
                self.on_key(key);
            }
        }
    }

    fn handle_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        if !(ctrl && key.code == KeyCode::Char('c')) {
            self.flash = None;
        }
        if let Some(overlay) = &mut self.overlay {
            match key.code {
                KeyCode::Char('c') if ctrl => self.ctrl_c(),
                KeyCode::Char('d') if ctrl => self.quit = true,
                _ => {
                    let page = usize::from(self.view_size.1).saturating_sub(2).max(1);
                    match overlay.on_key(key, page) {
                        overlay::Action::None => {}
                        overlay::Action::Close => self.overlay = None,
                        overlay::Action::Resume(id) => {
                            self.overlay = None;
                            self.send(Method::ResumeSession { session_id: id });
                        }
                        overlay::Action::Fork(id) => {
                            self.overlay = None;
                            self.fork(id);
                        }
                        overlay::Action::OpenAgent(name) => self.open_agent(name),
                        overlay::Action::BackToParent => self.back_to_parent(),
                        overlay::Action::Rewind {
                            seq,
                            files,
                            conversation,
                        } => {
                            self.overlay = None;
                            self.send(crate::tui::checkpoints::rewind(seq, files, conversation));
                        }
                    }
                }
            }
            return;
        }
        if key.code == KeyCode::BackTab {
            self.cycle_approval_mode();
            return;
        }
        if let Some((request, _)) = self.current_approval() {
            let request = request.clone();
            if self.panel_takes(&key) {
                match key.code {
                    KeyCode::Char('c') if ctrl => self.ctrl_c(),
                    KeyCode::Char('d') if ctrl => self.quit = true,
                    _ => {
                        let esc = key.code == KeyCode::Esc && self.approval.message.is_none();
                        if let PanelAction::Answer(method) = self.approval.on_key(key, &request) {
                            self.ask(
                                method,
                                pending::Then::Approve {
                                    call_id: request.call_id.clone(),
                                },
                            );
                            self.approval.sent(request.call_id);
                            // The next call's panel follows the user's own
                            // answer: it is theirs to answer at once.
                            self.approval_shown =
                                self.current_approval().map(|(p, _)| p.call_id.clone());
                            self.approval_shown_at = None;
                            self.approval.arming = false;
                            if esc {
                                self.flash = Some(
                                    "denied (Esc); to run it after all, ask the model to try again"
                                        .into(),
                                );
                            }
                        }
                    }
                }
                return;
            }
            if self.hold_keys {
                self.flash = Some("typing goes into your message; pause, then y, a, n or N".into());
            }
        }
        match key.code {
            KeyCode::Char('c') if ctrl => self.ctrl_c(),
            KeyCode::Char('d') if ctrl => self.quit = true,
            KeyCode::Char('o') if ctrl => self.conversation.toggle_block(),
            KeyCode::Char('t') if ctrl => self.plan_expanded = !self.plan_expanded,
            KeyCode::Char('p') if ctrl => self.toggle_pause(),
            KeyCode::Char('j') if ctrl => self.composer.insert_newline(),
            KeyCode::Char('a') if ctrl => self.composer.line_start(),
            KeyCode::Char('e') if ctrl => self.composer.line_end(),
            KeyCode::Char('u') if ctrl => self.composer.clear_draft(),
            KeyCode::Char('l') if ctrl => self.viewport.end(),
            KeyCode::Char('v') if ctrl => {
                self.clipboard_wanted = true;
                self.flash = Some("reading the clipboard's image…".into());
            }
            KeyCode::Enter if alt || shift => self.composer.insert_newline(),
            // Candidates are on their way: take the first when they come.
            KeyCode::Tab
                if self.composer.completion().is_some() && !self.composer.completion_open() =>
            {
                self.tab_pending = true;
            }
            KeyCode::Enter | KeyCode::Tab if self.composer.completion_open() => {
                let accepted = self.composer.accept_completion();
                if let (KeyCode::Enter, Some((TokenKind::Command, item))) = (key.code, accepted) {
                    if commands::builtin(&item.value).is_some_and(Builtin::runs_on_accept) {
                        self.submit();
                    }
                }
            }
            KeyCode::Enter => {
                // A sent message ends the burst: what follows is meant
                // for whatever appears next.
                self.last_typed = None;
                self.submit();
            }
            KeyCode::Char('?') if self.composer.is_empty() => {
                self.overlay = Some(Overlay::Help { scroll: 0 })
            }
            KeyCode::Esc if self.composer.completion_open() => self.composer.dismiss_completion(),
            KeyCode::Esc if self.composer.is_empty() && !self.queued.is_empty() => self.take_back(),
            KeyCode::Esc if self.composer.is_empty() && !self.busy() => self.esc_while_idle(),
            KeyCode::Esc => self.cancel(),
            KeyCode::Up | KeyCode::Down if alt => self.select_block(key.code == KeyCode::Up),
            KeyCode::Up | KeyCode::Down if self.composer.completion_open() => {
                self.composer.move_completion(key.code == KeyCode::Down)
            }
            KeyCode::Up => {
                if !self.composer.up() {
                    self.composer.history_prev();
                }
            }
            KeyCode::Down => {
                if !self.composer.down() {
                    self.composer.history_next();
                }
            }
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::PageUp => self.scroll(true, self.page()),
            KeyCode::PageDown => self.scroll(false, self.page()),
            KeyCode::Home => {
                let (width, height) = self.view_size;
                let mut rows = self.cache.rows(&self.conversation, width);
                self.viewport.home(&mut rows, usize::from(height));
            }
            KeyCode::End => self.viewport.end(),
            KeyCode::Char(c) if !ctrl => {
                self.composer.insert_char(c);
                self.last_typed = Some(self.now);
            }
            _ => return,
        }
        self.refresh_completion();
    }

    fn select_block(&mut self, back: bool) {
        if let Some(index) = self.conversation.select_block(back) {
            let (width, height) = self.view_size;
            let mut rows = self.cache.rows(&self.conversation, width);
            self.viewport.reveal(&mut rows, usize::from(height), index);
        }
    }

    /// Asks the pod to drop this client's last queued message; it comes
    /// back into the input box once the pod says it was removed.
    fn take_back(&mut self) {
        let Some(run) = self.queued.last().map(|q| q.request_id.clone()) else {
            return;
        };
        if self.taking_back(&run) {
            return;
        }
        self.ask(
            Method::Cancel {
                run: Some(run.clone()),
            },
            pending::Then::TakeBack { run },
        );
    }

    fn took_back(&mut self, run: &str, removed: bool) {
        let Some(at) = self.queued.iter().position(|q| q.request_id == run) else {
            return;
        };
        let taken = self.queued.remove(at);
        if !removed {
            self.flash = Some("that message had already started: its turn is cancelled".into());
        } else if self.composer.is_empty() {
            self.composer.restore(taken.atoms);
        } else {
            self.flash = Some("taken back: press Up to find your message".into());
        }
    }

    /// Moves to the next approval mode (Shift+Tab, `/approval`); the pod's
    /// `status` confirms it.
    pub(super) fn cycle_approval_mode(&mut self) {
        let mode = approval::next_mode(self.approval_mode());
        if let Some(status) = &mut self.status {
            status.approval = mode;
        }
        self.send(Method::SetApproval { mode });
        self.flash = Some(format!(
            "approval mode: {} (Shift+Tab for the next)",
            mode.as_str()
        ));
    }

    fn cancel(&mut self) {
        if self.busy() {
            self.send(Method::Cancel { run: None });
        }
    }

    /// Esc on an empty composer with nothing running: a second one soon
    /// after opens the rewind picker (the first says so).
    fn esc_while_idle(&mut self) {
        if self
            .last_esc
            .is_some_and(|t| self.now.duration_since(t) <= DOUBLE_ESC)
        {
            self.last_esc = None;
            self.overlay = Some(Overlay::Rewind(RewindPicker::new(
                &self.conversation.inputs,
            )));
            return;
        }
        self.last_esc = Some(self.now);
        self.flash = Some("Esc again to rewind to an earlier message".into());
    }

    /// `/pause`: the turn (or, while idle, the next one) holds before its
    /// next model call or tool run, until `/resume`.
    pub(super) fn pause(&mut self) {
        self.send(Method::Pause);
        self.flash = Some("pausing before the next step".into());
    }

    /// Ctrl+P: resumes a paused turn, else pauses.
    fn toggle_pause(&mut self) {
        if self
            .status
            .as_ref()
            .is_some_and(|s| s.state == PodState::Paused)
        {
            self.send(Method::Resume);
        } else {
            self.pause();
        }
    }

    fn ctrl_c(&mut self) {
        // A draft goes first, as in a shell: the turn is cancelled (and
        // the TUI quit) only by the presses after it.
        if self.overlay.is_none() && self.current_approval().is_none() && !self.composer.is_empty()
        {
            self.composer.clear_draft();
            self.last_ctrl_c = None;
            self.flash = Some(if self.busy() {
                "draft cleared; Ctrl+C again cancels the turn".into()
            } else {
                "draft cleared; Ctrl+C twice quits (the pod keeps running)".into()
            });
            return;
        }
        if self
            .last_ctrl_c
            .is_some_and(|t| self.now.duration_since(t) <= DOUBLE_CTRL_C)
        {
            self.quit = true;
            return;
        }
        self.last_ctrl_c = Some(self.now);
        self.cancel();
        self.flash = Some("Ctrl+C again to quit (the pod keeps running)".into());
    }
}

/// A turn's end reason as the notification says it.
fn reason_text(reason: crate::protocol::TurnEndReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into())
}
