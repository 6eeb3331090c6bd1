//! The `/` commands and the menus: what Enter does with a message that
//! starts with `/name`, and the `list_completions` behind the `/`, `@` and
//! `#` menus.

use super::pending::Then;
use super::App;
use crate::protocol::{ApprovalMode, CompletionKind, Level, Method, Request, Segment, SegmentView};
use crate::tui::commands::{self, Builtin};
use crate::tui::composer::{MenuItem, TokenKind};
use crate::tui::connection::{ConnectionState, Outgoing};
use crate::tui::conversation::Conversation;
use crate::tui::overlay::Overlay;

impl App {
    /// Candidates for the menu. Workflows a `/` menu lists are remembered
    /// too, so that a workflow created since the attach can be called at
    /// once.
    pub(super) fn on_completions(&mut self, id: &str, items: Vec<MenuItem>) {
        let is_command_menu = self
            .composer
            .completion()
            .is_some_and(|c| c.request_id == id && c.token.kind == TokenKind::Command);
        if is_command_menu {
            for item in &items {
                if !self.workflows.iter().any(|w| w.value == item.value) {
                    self.workflows.push(item.clone());
                }
            }
        }
        if self.composer.set_completions(id, items)
            && std::mem::take(&mut self.tab_pending)
            && self.composer.completion_open()
        {
            self.composer.accept_completion();
            self.refresh_completion();
        }
    }

    /// Asks the pod for candidates when the token under the cursor changed.
    pub(super) fn refresh_completion(&mut self) {
        let next = &mut self.next_request;
        let token = self.composer.refresh_completion(|| {
            *next += 1;
            format!("tui-{next}")
        });
        if let (Some(token), Some(c)) = (token, self.composer.completion()) {
            let kind = match token.kind {
                TokenKind::Command => CompletionKind::Workflow,
                TokenKind::File => CompletionKind::File,
                TokenKind::Knowledge => CompletionKind::Knowledge,
            };
            let method = Method::ListCompletions {
                kind,
                prefix: token.prefix,
            };
            let request = Request::with_id(method, c.request_id.clone());
            self.outbox.push(Outgoing::Request(request));
        }
    }

    /// Sends the message, or runs the command it is.
    ///
    /// A message starting with `/name` is a built-in command (run here,
    /// never sent as text), a workflow (sent as a `workflow_invoke` with
    /// the rest of the line as its arguments), or refused in place with a
    /// hint. `//name …` sends `/name …` as text.
    pub(super) fn submit(&mut self) {
        let refs = self.composer.typed_file_refs();
        if self.composer.command_line().is_none()
            && !refs.is_empty()
            && self.connection == ConnectionState::Connected
        {
            for path in refs {
                let method = Method::ListCompletions {
                    kind: CompletionKind::File,
                    prefix: path.clone(),
                };
                self.ask(method, Then::Resolve { path });
            }
            self.resolving = Some(self.now + super::RESOLVE_WAIT);
            return;
        }
        self.submit_resolved();
    }

    /// Sends the message as it now is (its typed `@path`s resolved, or
    /// given up on), or runs the command it is.
    pub(super) fn submit_resolved(&mut self) {
        let segments = match self.composer.command_line() {
            Some(line) => {
                if let Some(builtin) = commands::builtin(&line.name) {
                    self.run_builtin(builtin, &line.args);
                    return;
                }
                if !self.workflows.iter().any(|w| w.value == line.name) {
                    self.flash = Some(format!(
                        "unknown command /{}: type / for the commands and workflows, // to send a leading /",
                        line.name
                    ));
                    return;
                }
                let mut segments = vec![Segment::workflow_invoke(line.name, line.args)];
                segments.extend(line.rest);
                segments
            }
            None => unescape_slash(self.composer.segments()),
        };
        if segments.is_empty() {
            return;
        }
        if self.connection != ConnectionState::Connected {
            self.flash = Some("not connected: the message stays here until you send it".into());
            return;
        }
        let uploads: Result<Vec<Method>, String> =
            self.composer.images().map(|image| image.upload()).collect();
        let uploads = match uploads {
            Ok(uploads) => uploads,
            Err(why) => {
                self.flash = Some(why);
                return;
            }
        };
        // Each image first: the pod handles this connection's frames in
        // order, so the run finds its blobs.
        for upload in uploads {
            self.send(upload);
        }
        let atoms = self.composer.atoms().to_vec();
        self.ask(Method::Run { segments }, Then::Run(atoms));
        self.composer.finish_submit();
        self.viewport.end();
    }

    /// Runs a built-in command. The input box is cleared (the command goes
    /// into the history) unless the command could not be carried out; the
    /// pod's answer, an error included, shows in the conversation.
    pub(super) fn run_builtin(&mut self, builtin: &Builtin, args: &str) {
        let before = self.next_request;
        self.run_builtin_command(builtin, args);
        if self.next_request != before {
            let id = format!("tui-{}", self.next_request);
            self.pending.entry(id).or_default().command = Some(format!("/{}", builtin.name));
        }
    }

    fn run_builtin_command(&mut self, builtin: &Builtin, args: &str) {
        match builtin.name {
            "help" => self.overlay = Some(Overlay::Help { scroll: 0 }),
            "status" => {
                let text = self.status_report();
                self.conversation.push_notice(Level::Info, text);
                self.viewport.end();
            }
            "compact" => {
                self.send(Method::Compact);
            }
            "pause" => self.pause(),
            "resume" => {
                self.send(Method::Resume);
            }
            "new" => {
                self.send(Method::NewSession);
            }
            "fork" => {
                self.send(Method::Fork { at_seq: None });
            }
            "undo" => match self.conversation.last_input_seq {
                Some(seq) => {
                    self.send(crate::tui::checkpoints::undo(seq));
                }
                None => {
                    self.flash = Some("nothing to undo: this session has no message yet".into());
                    return;
                }
            },
            "diff" => match self.conversation.last_changed.clone() {
                Some((from, to)) => {
                    let method = Method::GetDiff {
                        from,
                        to,
                        path: None,
                        binary: false,
                    };
                    self.ask(method, Then::Diff);
                }
                None => {
                    self.flash = Some("no turn of this session changed files".into());
                    return;
                }
            },
            "sessions" => {
                self.ask(Method::ListSessions, Then::Sessions);
            }
            "model" if args.is_empty() => {
                let model = self.current_model();
                self.conversation.push_notice(
                    Level::Info,
                    format!(
                        "[model] {model} · /model NAME switches to another model of the provider"
                    ),
                );
                self.viewport.end();
            }
            "model" => {
                self.send(Method::SetModel {
                    model: args.to_owned(),
                });
            }
            "approval" if args.is_empty() => self.cycle_approval_mode(),
            "approval" => {
                let mode = serde_json::from_value::<ApprovalMode>(serde_json::Value::from(args))
                    .unwrap_or(ApprovalMode::Unknown);
                if mode == ApprovalMode::Unknown {
                    self.flash = Some(format!(
                        "no approval mode {args:?}: ask, edits, auto or read-only"
                    ));
                    return;
                }
                self.send(Method::SetApproval { mode });
            }
            "permissions" if args.is_empty() => {
                self.ask(Method::ListRules, Then::Rules);
            }
            "jobs" if args.is_empty() => {
                self.ask(Method::ListJobs, Then::Jobs);
            }
            "jobs" => match args.parse::<u64>() {
                Ok(job) => {
                    self.ask(Method::GetJobOutput { job }, Then::JobOutput);
                }
                Err(_) => {
                    self.flash = Some(format!(
                        "no job {args:?}: /jobs lists the jobs, /jobs N shows what job N printed"
                    ));
                    return;
                }
            },
            "permissions" => match args.strip_prefix("revoke").map(str::trim) {
                Some(rule) if !rule.is_empty() => {
                    self.send(Method::RevokeRule {
                        rule: rule.to_owned(),
                    });
                }
                _ => {
                    self.flash = Some(
                        "/permissions lists the rules; /permissions revoke RULE revokes one".into(),
                    );
                    return;
                }
            },
            "clear" => {
                self.conversation.clear();
                // Users of other agents expect /clear to reset the model's
                // context: say what it did, and what does that.
                self.conversation.push_notice(
                    Level::Info,
                    "[cleared] this screen only: the model still sees the whole conversation. \
                     /new starts a fresh one (this one stays in /sessions)"
                        .to_owned(),
                );
                self.viewport.end();
            }
            "agents" if args.is_empty() => {
                let children = self
                    .status
                    .as_ref()
                    .map(|s| s.agents.clone())
                    .unwrap_or_default();
                let picker = crate::tui::agents::AgentPicker::new(
                    self.viewing.last().map(String::as_str),
                    &children,
                );
                self.overlay = Some(Overlay::Agents(picker));
            }
            "agents" if matches!(args, ".." | "back") => {
                if self.viewing.is_empty() {
                    self.flash =
                        Some("this view is not a child pod's: nothing to go back to".into());
                    return;
                }
                self.back_to_parent();
            }
            "agents" => {
                let children = self
                    .status
                    .as_ref()
                    .map(|s| s.agents.as_slice())
                    .unwrap_or_default();
                match crate::tui::agents::find(children, args) {
                    Some(agent) => {
                        let name = agent.name.clone();
                        self.open_agent(name);
                    }
                    None => {
                        self.flash = Some(format!(
                            "this pod has no child pod {args:?}: /agents lists them"
                        ));
                        return;
                    }
                }
            }
            "quit" => self.quit = true,
            other => {
                self.flash = Some(format!("/{other} is not available in this version"));
                return;
            }
        }
        self.composer.finish_submit();
    }

    /// The model in use: the status's (it follows `set_model`), else the
    /// greeting's.
    pub(crate) fn current_model(&self) -> String {
        let provider = self.greeting.as_ref().map_or("", |g| g.provider.as_str());
        let model = match (&self.status, &self.greeting) {
            (Some(s), _) if !s.model.is_empty() => s.model.as_str(),
            (_, Some(g)) => g.model.as_str(),
            _ => return "unknown (not connected yet)".into(),
        };
        format!("{provider}/{model}")
    }

    /// The approval mode in force: the status's, else the greeting's.
    pub(crate) fn approval_mode(&self) -> ApprovalMode {
        match (&self.status, &self.greeting) {
            (Some(s), _) => s.approval,
            (None, Some(g)) => g.approval,
            (None, None) => ApprovalMode::Unknown,
        }
    }

    /// Forks session `id`: at once if it is the current one, else once
    /// resuming it has made it current (the protocol forks only the
    /// current session).
    pub(super) fn fork(&mut self, id: String) {
        let current = self.conversation.session_id().map(|s| s.to_string());
        if current.as_deref() == Some(id.as_str()) {
            self.send(Method::Fork { at_seq: None });
        } else {
            self.send(Method::ResumeSession {
                session_id: id.clone(),
            });
            self.fork_after_resume = Some(id);
        }
    }

    /// What `/status` shows: the pod's latest greeting and status.
    pub(super) fn status_report(&self) -> String {
        let mut lines = vec!["[status]".to_owned()];
        let mut row = |label: &str, value: String| lines.push(format!("  {label:<9} {value}"));
        match &self.greeting {
            Some(g) => row(
                "pod",
                format!(
                    "{} (pid {}, version {}) in {}",
                    g.pod, g.pid, g.version, g.workspace
                ),
            ),
            None => row("pod", format!("{} (not connected yet)", self.pod_name)),
        }
        if let Some(status) = &self.status {
            let state = serde_json::to_value(status.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "unknown".into());
            let mut text = format!("{state}, {} queued", status.queued);
            if !status.pending_approvals.is_empty() {
                text.push_str(&format!(
                    ", {} waiting for approval",
                    status.pending_approvals.len()
                ));
            }
            row("state", text);
        }
        if let Some(id) = self.conversation.session_id() {
            row("session", id.to_string());
        }
        row("model", self.current_model());
        if let Some(status) = self.status.as_ref().filter(|s| s.context_window > 0) {
            row(
                "context",
                format!(
                    "{} of {} tokens",
                    status.context_tokens, status.context_window
                ),
            );
        }
        row("approval", self.approval_mode().as_str().to_owned());
        if let Some(g) = &self.greeting {
            let sandbox = &g.sandbox;
            let enforced = if sandbox.available {
                "enforced"
            } else {
                "NOT enforced on this system"
            };
            let network = if sandbox.network {
                "network on"
            } else {
                "network off"
            };
            row(
                "sandbox",
                format!("{}, {enforced}, {network}", sandbox.mode.as_str()),
            );
            let servers: Vec<String> = g
                .mcp_servers
                .iter()
                .map(|m| {
                    let state = serde_json::to_value(m.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_else(|| "unknown".into());
                    match &m.error {
                        Some(e) => format!("{} {state} ({e})", m.name),
                        None => format!("{} {state}, {} tools", m.name, m.tools),
                    }
                })
                .collect();
            row(
                "MCP",
                if servers.is_empty() {
                    "no servers".into()
                } else {
                    servers.join("; ")
                },
            );
        }
        lines.join("\n")
    }
}

/// `//name …` is how a message starting with `/name` is sent as text: one
/// slash is dropped. Any other message is sent as it is.
fn unescape_slash(mut segments: Vec<Segment>) -> Vec<Segment> {
    if let Some(SegmentView::Text { text }) = segments.first().map(Segment::view) {
        if let Some(rest) = text.strip_prefix("//") {
            if rest.starts_with(commands::is_name_char) {
                segments[0] = Segment::text(format!("/{rest}"));
            }
        }
    }
    segments
}

/// How many of a job's last lines `/jobs N` shows.
const JOB_LINES: usize = 20;

fn job_state(job: &crate::protocol::JobInfo) -> String {
    match (job.running, job.exit_code, job.signal) {
        (true, _, _) => "running".to_owned(),
        (false, Some(code), _) => format!("exit {code}"),
        (false, None, Some(signal)) => format!("signal {signal}"),
        (false, None, None) => "ended".to_owned(),
    }
}

/// What `/jobs` shows: one job a line, and how to read one.
pub(super) fn jobs_report(jobs: &[crate::protocol::JobInfo]) -> String {
    let mut lines = vec!["[jobs]".to_owned()];
    if jobs.is_empty() {
        lines.push("  no background jobs".into());
    }
    for job in jobs {
        lines.push(format!(
            "  {:>3}  {:<10} {}",
            job.job,
            job_state(job),
            crate::safe_text::line(&job.command)
        ));
    }
    if !jobs.is_empty() {
        lines.push("  /jobs N shows what job N has printed so far".into());
    }
    lines.join("\n")
}

/// What `/jobs N` shows: the job, and the last lines it has printed.
pub(super) fn job_output_report(jobs: &[crate::protocol::JobInfo], output: &str) -> String {
    let mut lines = Vec::new();
    for job in jobs {
        lines.push(format!(
            "[job {} · {}] {}",
            job.job,
            job_state(job),
            crate::safe_text::line(&job.command)
        ));
    }
    let text = crate::safe_text::lines(output);
    let printed: Vec<&str> = text.trim_end().lines().collect();
    if printed.is_empty() {
        lines.push("  (no output yet)".into());
    }
    let from = printed.len().saturating_sub(JOB_LINES);
    if from > 0 {
        lines.push(format!(
            "  … {from} earlier lines (pod jobs output N prints them all)"
        ));
    }
    lines.extend(printed[from..].iter().map(|l| format!("  {l}")));
    lines.join("\n")
}

/// What `/permissions` shows: one rule a line with where it came from, and
/// how to revoke one an answer added.
pub(super) fn rules_report(rules: &[crate::protocol::RuleInfo]) -> String {
    let mut lines = vec!["[permissions]".to_owned()];
    if rules.is_empty() {
        lines.push("  no rules: the approval mode decides every call".into());
    }
    for r in rules {
        lines.push(format!("  {:<5} {:<8} {}", r.kind, r.source, r.rule));
    }
    if rules.iter().any(|r| r.source == "decision") {
        lines.push("  /permissions revoke RULE takes back a rule an answer added".into());
    }
    lines.join("\n")
}

impl App {
    /// Switches the view into a child pod of the one in view: the
    /// connection goes to the child's socket, and its snapshot rebuilds the
    /// whole view, as after any reconnect; what is typed then goes to it.
    pub(crate) fn open_agent(&mut self, name: String) {
        let here = self
            .greeting
            .as_ref()
            .map_or_else(|| self.pod_name.clone(), |g| g.pod.clone());
        self.viewing.push(here);
        self.switch_view(Outgoing::Open(name));
    }

    /// Switches the view back to the pod it came from.
    pub(crate) fn back_to_parent(&mut self) {
        if self.viewing.pop().is_some() {
            self.switch_view(Outgoing::Back);
        }
    }

    /// Nothing of the pod left behind stays on screen while the other
    /// pod's snapshot is on its way: a reader must never take the old
    /// view's lines for the new pod's.
    fn switch_view(&mut self, to: Outgoing) {
        self.conversation = Conversation::new();
        self.viewport.end();
        self.overlay = None;
        self.status = None;
        self.greeting = None;
        self.queued.clear();
        self.connection = ConnectionState::Connecting;
        self.outbox.push(to);
        self.dirty = true;
    }
}
