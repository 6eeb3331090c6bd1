//! The view model: what the conversation shows, built only from the pod's
//! frames, with no terminal involved.
//!
//! Confirmed content comes from `snapshot` entries and `entry` frames and
//! nothing else. Streaming hints only build the block in flight — folded
//! by [`InFlight::apply`], the same rule the pod uses for a snapshot's
//! `in_flight` — which the next entry (or the turn's end) replaces, so
//! streamed text is never shown twice and never lost.
//!
//! Time comes in from outside (`now` arguments) so that durations and
//! elapsed times are testable: a turn's duration is measured from the
//! `turn_start` this client saw to its `turn_end`, and is left out when the
//! client did not see the turn start (a view rebuilt from a snapshot).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use uuid::Uuid;

use crate::protocol::tools;
use crate::protocol::{
    AssistantItem, CheckpointReason, DecidedBy, Decision, ErrorCode, Event, ForkPoint, InFlight,
    Level, LogEntry, LogLine, Scope, Segment, Snapshot, SwitchReason, TurnEndReason, TurnError,
};

/// Lines of a running tool's output shown under its call.
pub const OUTPUT_TAIL_LINES: usize = 4;

/// The last rev handed out by any conversation of this process. One
/// counter for all of them, not one per conversation, because the layout
/// cache outlives a conversation: switching the view into another pod
/// makes a new `Conversation`, and a counter of its own would start again
/// at 1, so its block 0 at rev 1 would be served the rows laid out for the
/// previous view's block 0 at rev 1 (the trial of issue 39 saw the parent's
/// session header and entries in a child's view). Unique revs make every
/// cache entry of another view a miss, whoever replaces the conversation.
static LAST_REV: AtomicU64 = AtomicU64::new(0);

/// One block of the conversation. `rev` changes whenever what the block
/// draws changes; the layout cache keys on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub rev: u64,
    pub kind: BlockKind,
}

/// A user message of the session, as the rewind picker lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct InputMark {
    pub seq: u64,
    /// Its text on one line as it was typed — file refs, knowledge refs
    /// and a workflow call included, pastes and images left out.
    pub text: String,
    /// What its turn changed in the files (`2 files changed, +3 −1`), if
    /// anything.
    pub changes: Option<String>,
}

impl InputMark {
    fn of(seq: u64, segments: &[Segment]) -> Self {
        use crate::protocol::SegmentView;
        // A message may be a workflow call and refs alone, with no text:
        // its row must still say which.
        let text: Vec<String> = segments
            .iter()
            .filter_map(|s| match s.view() {
                SegmentView::Text { text } => Some(text.to_owned()),
                SegmentView::FileRef { path } => Some(format!("@{path}")),
                SegmentView::KnowledgeRef { slug } => Some(format!("#{slug}")),
                SegmentView::WorkflowInvoke { slug, args } => Some(format!("/{slug} {args}")),
                _ => None,
            })
            .collect();
        Self {
            seq,
            text: text
                .join(" ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            changes: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum BlockKind {
    User {
        segments: Vec<Segment>,
    },
    /// Assistant text, rendered as Markdown.
    Assistant {
        text: String,
    },
    Reasoning {
        text: String,
    },
    Tool(ToolBlock),
    /// Text the pod put into the conversation (`notify`, compaction
    /// summary, project instructions). Project instructions are long and
    /// the same every session, so they start collapsed.
    Injected {
        source: String,
        text: String,
        expanded: bool,
    },
    Notice {
        level: Level,
        text: String,
    },
    /// How a tool call was decided (`approval_decision`).
    Decision(DecisionView),
    /// The model in use changed (`model_change`).
    ModelChange {
        provider: String,
        model: String,
    },
    /// The end of a turn: drawn only when there is something to say (it
    /// did not complete, or this client timed it).
    TurnEnd {
        reason: TurnEndReason,
        error: Option<TurnError>,
        duration: Option<Duration>,
    },
    /// The start of a session: drawn as a divider, which is how a
    /// compaction shows in the middle of the view and a switch at its top.
    SessionStart {
        session_id: Uuid,
        compacted_from: Option<Uuid>,
        forked_from: Option<ForkPoint>,
        /// Why the view switched to this session, when it did.
        switch: Option<SwitchReason>,
    },
    /// A child pod this pod's turn started (`agent_started`), or one of its
    /// turns that ended (`agent_turn_end`).
    Agent(AgentView),
    /// An entry of a kind this build does not know.
    UnknownEntry,
}

/// A child pod's entry in its parent's view.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentView {
    /// The child's full name.
    pub name: String,
    pub event: AgentEvent,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    Started {
        task: String,
    },
    TurnEnded {
        reason: TurnEndReason,
        usage: Option<crate::protocol::Usage>,
        /// Its final assistant text (the pod caps it at 4 KiB).
        text: String,
    },
}

/// A tool call and, once it arrives, its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolBlock {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    pub result: Option<ToolOutput>,
    pub expanded: bool,
    /// The last lines of its output while it runs (`tool_output_delta`).
    pub output_tail: Option<String>,
    /// Whole seconds it has been running, when this client saw it start.
    pub elapsed_secs: Option<u64>,
    /// An `approval_request` for it waits for an answer.
    pub awaiting_approval: bool,
    /// The connection to the pod was lost while it ran: how it ended is
    /// not known here (the next snapshot says).
    pub outcome_unknown: bool,
    /// How long it ran, when this client saw it start and end (the log
    /// has no times for tool calls): a cancelled command says it.
    pub ran_for: Option<Duration>,
    /// The unified diff the pod showed when it asked about this file edit
    /// (`approval_request`'s preview), made from the file as it was: unlike
    /// the call's `old_string`, which may be a bare substring of its lines,
    /// it has their whole text, indentation included.
    pub approval_diff: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub output: String,
    pub is_error: bool,
}

/// An `approval_decision`, as the transcript shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionView {
    pub decision: Decision,
    pub scope: Scope,
    pub rule: Option<String>,
    pub by: DecidedBy,
    pub client: Option<String>,
    pub message: Option<String>,
}

/// An `approval_request` no decision has answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    pub call_id: String,
    pub tool: String,
    pub summary: String,
    pub preview: String,
    pub reason: String,
    /// The rule a `session` answer would add (`bash:git status *`), shown
    /// before the user chooses — the entry's, as the pod computed it;
    /// `None` when the entry has none (a log older than the field).
    pub session_rule: Option<String>,
}

/// A `retry` hint: the model call failed and is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryView {
    pub attempt: u32,
    pub max_attempts: u32,
    pub delay_ms: u64,
    pub error: String,
}

/// When the running turn started.
#[derive(Debug, Clone)]
struct TurnClock {
    turn_id: Option<String>,
    started: Instant,
    /// This client saw its `turn_start`; otherwise `started` is estimated
    /// from its `user_input` (a view rebuilt mid-turn), good for showing
    /// the time it has run but not for recording its duration.
    seen: bool,
}

/// What applying an event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Changed,
    Unchanged,
    /// The entry stream has a gap or belongs to an unexpected session: the
    /// view can no longer be trusted and the client must reconnect to get a
    /// fresh snapshot.
    Resync(String),
}

#[derive(Debug, Default)]
pub struct Conversation {
    blocks: Vec<Block>,
    in_flight: Option<InFlight>,
    retry: Option<RetryView>,
    /// Changes whenever the live item (in-flight block, retry line) does.
    live_rev: u64,
    session_id: Option<Uuid>,
    last_seq: Option<u64>,
    /// The seq of the session's last user input (what `/undo` rewinds to).
    pub last_input_seq: Option<u64>,
    /// The session's user messages, oldest first: what the rewind picker
    /// (Esc Esc) offers.
    pub inputs: Vec<InputMark>,
    /// The last turn that changed files: its turn_start and turn_end
    /// checkpoints (what `/diff` shows).
    pub last_changed: Option<(String, Option<String>)>,
    tools: HashMap<String, usize>,
    /// Tool blocks whose running time is shown, with when they started.
    timed: Vec<(usize, Instant)>,
    /// The block showing a running tool's output tail.
    tailing: Option<usize>,
    pending: Vec<PendingApproval>,
    /// The running turn's clock.
    turn: Option<TurnClock>,
    /// Set by `session_switched`, consumed by the snapshot that follows.
    switch: Option<SwitchReason>,
    selected: Option<usize>,
}

/// The first eight characters of a session id, as shown everywhere.
pub fn short_id(id: &Uuid) -> String {
    id.to_string().chars().take(8).collect()
}

impl Conversation {
    pub fn new() -> Self {
        let mut conversation = Self::default();
        conversation.live_rev = conversation.rev();
        conversation
    }

    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The block being streamed, or the output of a running tool.
    pub fn in_flight(&self) -> Option<&InFlight> {
        self.in_flight.as_ref()
    }

    /// The model call being retried, until its next text or entry.
    pub fn retry(&self) -> Option<&RetryView> {
        self.retry.as_ref()
    }

    /// Whether there is a live item after the blocks: a streamed block
    /// (not a tool's output, which shows under its call) or a retry line.
    pub fn has_live_item(&self) -> bool {
        self.retry.is_some()
            || self
                .in_flight
                .as_ref()
                .is_some_and(|f| !matches!(f, InFlight::ToolOutput { .. }))
    }

    /// Changes whenever the live item's content does.
    pub fn live_rev(&self) -> u64 {
        self.live_rev
    }

    pub fn session_id(&self) -> Option<Uuid> {
        self.session_id
    }

    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    /// The approval requests still waiting for an answer, in log order.
    pub fn pending_approvals(&self) -> &[PendingApproval] {
        &self.pending
    }

    /// When the running turn started, if known.
    pub fn turn_started(&self) -> Option<Instant> {
        self.turn.as_ref().map(|t| t.started)
    }

    /// A rev no block or live item of any conversation of this process
    /// had before (see [`LAST_REV`]), so a rev identifies one block's
    /// content for the lifetime of the client.
    fn rev(&mut self) -> u64 {
        LAST_REV.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn push(&mut self, kind: BlockKind) {
        let rev = self.rev();
        if let BlockKind::Tool(t) = &kind {
            self.tools.insert(t.call_id.clone(), self.blocks.len());
        }
        self.blocks.push(Block { rev, kind });
    }

    /// Puts a decision under its call (after any decision already there),
    /// not at the end: with two calls in one step, the second call's block
    /// sits between the first one and the first one's decision. A call not
    /// in view (cleared away) gets its decision at the end.
    fn push_decision(&mut self, call_id: &str, decision: DecisionView) {
        let Some(&call) = self.tools.get(call_id) else {
            self.push(BlockKind::Decision(decision));
            return;
        };
        let at = call
            + 1
            + self.blocks[call + 1..]
                .iter()
                .take_while(|b| matches!(b.kind, BlockKind::Decision(_)))
                .count();
        let shift = |i: &mut usize| {
            if *i >= at {
                *i += 1;
            }
        };
        self.tools.values_mut().for_each(shift);
        self.timed.iter_mut().for_each(|(i, _)| shift(i));
        self.tailing.iter_mut().for_each(shift);
        self.selected.iter_mut().for_each(shift);
        let rev = self.rev();
        self.blocks.insert(
            at,
            Block {
                rev,
                kind: BlockKind::Decision(decision),
            },
        );
    }

    /// Appends a notice (an error, a notification, a compaction step).
    pub fn push_notice(&mut self, level: Level, text: impl Into<String>) {
        self.push(BlockKind::Notice {
            level,
            text: text.into(),
        });
    }

    /// Forgets a pending approval the pod says is not pending (another
    /// client answered it, or the turn ended).
    pub fn drop_pending(&mut self, call_id: &str) {
        self.pending.retain(|p| p.call_id != call_id);
        self.set_awaiting(call_id, false);
    }

    /// Keeps a file edit's approval preview with its call, when it is a
    /// unified diff (a preview can also say why the edit would fail).
    fn set_approval_diff(&mut self, call_id: &str, preview: &str) {
        self.change_tool(call_id, |t| {
            let edits = tools::effect(&t.name) == tools::Effect::WritesFile;
            let diff = edits && preview.starts_with("--- ");
            if diff {
                t.approval_diff = Some(preview.to_owned());
            }
            diff
        });
    }

    /// Marks the call's block as waiting for an answer, or not.
    fn set_awaiting(&mut self, call_id: &str, awaiting: bool) {
        self.change_tool(call_id, |t| {
            let changed = t.awaiting_approval != awaiting;
            t.awaiting_approval = awaiting;
            changed
        });
    }

    /// Lets `change` alter the block of the call `call_id`; the block is
    /// drawn again when it says it changed something.
    fn change_tool(&mut self, call_id: &str, change: impl FnOnce(&mut ToolBlock) -> bool) {
        let Some(&i) = self.tools.get(call_id) else {
            return;
        };
        let rev = self.rev();
        if let Some(Block {
            rev: block_rev,
            kind: BlockKind::Tool(t),
        }) = self.blocks.get_mut(i)
        {
            if change(t) {
                *block_rev = rev;
            }
        }
    }

    /// The pod went away: nothing runs as far as this view knows, so every
    /// running clock stops and each running tool says its outcome is not
    /// known (a reconnect's snapshot replaces all of it).
    pub fn connection_lost(&mut self) {
        for (i, _) in std::mem::take(&mut self.timed) {
            let rev = self.rev();
            if let Some(Block {
                kind: BlockKind::Tool(t),
                rev: block_rev,
                ..
            }) = self.blocks.get_mut(i)
            {
                t.outcome_unknown = true;
                *block_rev = rev;
            }
        }
        self.turn = None;
        self.pending.clear();
    }

    /// Empties the view (`/clear`) without touching what the stream
    /// continues from; the next snapshot shows everything again. A result
    /// for a call cleared away shows on its own.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.tools.clear();
        self.timed.clear();
        self.tailing = None;
        self.selected = None;
    }

    /// Replaces everything with what a (re)connect's snapshot says. The
    /// pending approvals are the requests without a decision that the
    /// pod's status also lists; a running turn is timed from its input.
    pub fn load_snapshot(&mut self, snapshot: &Snapshot, now: Instant) {
        self.clear();
        self.pending.clear();
        self.retry = None;
        self.session_id = Some(snapshot.session_id);
        self.last_seq = None;
        self.last_input_seq = None;
        self.inputs.clear();
        self.last_changed = None;
        let switch = self.switch.take();
        for LogLine { seq, entry } in &snapshot.entries {
            self.last_seq = Some(*seq);
            self.add_entry(entry, None);
        }
        // Set after the entries: the earlier turns' `turn_end`s among them
        // would otherwise stop the running turn's clock.
        self.turn = snapshot.status.turn.as_ref().and_then(|turn| {
            let started = snapshot
                .entries
                .iter()
                .rev()
                .find_map(|line| match &line.entry {
                    LogEntry::UserInput {
                        turn_id: Some(id),
                        at,
                        ..
                    } if *id == turn.turn_id => started_at(at, now),
                    _ => None,
                })?;
            Some(TurnClock {
                turn_id: Some(turn.turn_id.clone()),
                started,
                seen: false,
            })
        });
        if let Some(BlockKind::SessionStart { switch: s, .. }) =
            self.blocks.first_mut().map(|b| &mut b.kind)
        {
            *s = switch;
        }
        let listed = &snapshot.status.pending_approvals;
        let stale: Vec<String> = self
            .pending
            .iter()
            .filter(|p| !listed.contains(&p.call_id))
            .map(|p| p.call_id.clone())
            .collect();
        for call_id in stale {
            self.drop_pending(&call_id);
        }
        self.in_flight = snapshot.in_flight.clone();
        self.show_tool_output();
        self.live_rev = self.rev();
    }

    /// Applies one pod event to the view; `now` times turns and tools.
    pub fn apply(&mut self, event: &Event, now: Instant) -> Applied {
        if let Event::Snapshot(s) = event {
            self.load_snapshot(s, now);
            return Applied::Changed;
        }
        let live_before = (self.in_flight.clone(), self.retry.clone());
        InFlight::apply(&mut self.in_flight, event);
        let applied = self.apply_inner(event, now);
        match event {
            Event::Retry {
                attempt,
                max_attempts,
                delay_ms,
                error,
            } => {
                self.retry = Some(RetryView {
                    attempt: *attempt,
                    max_attempts: *max_attempts,
                    delay_ms: *delay_ms,
                    error: error.clone(),
                })
            }
            Event::TextDelta { .. }
            | Event::ReasoningDelta { .. }
            | Event::ToolCallStart { .. }
            | Event::Entry { .. }
            | Event::TurnStart { .. } => self.retry = None,
            _ => {}
        }
        if (&self.in_flight, &self.retry) == (&live_before.0, &live_before.1) {
            return applied;
        }
        self.live_rev = self.rev();
        self.show_tool_output();
        match applied {
            Applied::Unchanged => Applied::Changed,
            other => other,
        }
    }

    fn apply_inner(&mut self, event: &Event, now: Instant) -> Applied {
        match event {
            Event::Entry {
                session_id,
                seq,
                entry,
            } => return self.apply_entry(*session_id, *seq, entry, now),
            Event::TurnStart { turn_id, .. } => {
                self.turn = Some(TurnClock {
                    turn_id: Some(turn_id.clone()),
                    started: now,
                    seen: true,
                })
            }
            Event::Notification {
                level,
                source,
                message,
            } => self.push_notice(*level, format!("[{source}] {message}")),
            // The turn's `turn_end` tells a failed model call, live and in
            // every later snapshot: the frame sent as it failed would say it
            // twice.
            Event::Error {
                code: ErrorCode::ModelError,
                ..
            } => {}
            Event::Error { code, message, .. } => {
                let code = serde_json::to_value(code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "error".into());
                self.push_notice(Level::Error, format!("[error {code}] {message}"));
            }
            Event::CompactStart { .. } => self.push_notice(Level::Info, "[compact] starting"),
            Event::CompactDone {
                new_session_id,
                tokens_before,
                tokens_after,
            } => {
                let mut text = format!("[compact] done (new session {})", short_id(new_session_id));
                if *tokens_before > 0 {
                    text.push_str(&format!(
                        " · context {} → {} tokens",
                        tokens_before, tokens_after
                    ));
                }
                self.push_notice(Level::Info, text);
                self.session_id = Some(*new_session_id);
                self.last_seq = None;
            }
            Event::CompactFailed { error } => {
                self.push_notice(Level::Error, format!("[compact error] {error}"));
            }
            Event::SessionSwitched { reason, .. } => self.switch = Some(*reason),
            _ => return Applied::Unchanged,
        }
        Applied::Changed
    }

    /// Applies an `entry` frame, checking that it continues the stream.
    fn apply_entry(
        &mut self,
        session_id: Uuid,
        seq: u64,
        entry: &LogEntry,
        now: Instant,
    ) -> Applied {
        if self.session_id == Some(session_id) {
            match self.last_seq {
                Some(last) if seq <= last => return Applied::Unchanged,
                Some(last) if seq != last + 1 => {
                    return Applied::Resync(format!("entry {seq} after {last}: a gap"))
                }
                None if seq != 0 => {
                    return Applied::Resync(format!("session starts at entry {seq}"))
                }
                _ => {}
            }
        } else if seq != 0 {
            return Applied::Resync(format!("entry {seq} of an unexpected session"));
        }
        self.session_id = Some(session_id);
        self.last_seq = Some(seq);
        self.add_entry(entry, Some(now));
        Applied::Changed
    }

    /// Adds one entry's blocks. `now` is when a live entry arrived (None
    /// while loading a snapshot): it starts tool timers and ends turns.
    fn add_entry(&mut self, entry: &LogEntry, now: Option<Instant>) {
        match entry {
            LogEntry::SessionStart {
                session_id,
                compacted_from,
                forked_from,
                ..
            } => self.push(BlockKind::SessionStart {
                session_id: *session_id,
                compacted_from: *compacted_from,
                forked_from: forked_from.clone(),
                switch: None,
            }),
            LogEntry::UserInput { segments, .. } => {
                self.last_input_seq = self.last_seq;
                if let Some(seq) = self.last_seq {
                    self.inputs.push(InputMark::of(seq, segments));
                }
                self.push(BlockKind::User {
                    segments: segments.clone(),
                })
            }
            LogEntry::AssistantItems { items } => {
                for item in items {
                    self.push(match item {
                        AssistantItem::Text { text } => BlockKind::Assistant { text: text.clone() },
                        AssistantItem::Reasoning { text } => {
                            BlockKind::Reasoning { text: text.clone() }
                        }
                        AssistantItem::ToolCall {
                            call_id,
                            name,
                            arguments,
                        } => BlockKind::Tool(ToolBlock {
                            call_id: call_id.clone(),
                            name: name.clone(),
                            arguments: arguments.clone(),
                            result: None,
                            expanded: false,
                            output_tail: None,
                            elapsed_secs: now.map(|_| 0),
                            awaiting_approval: false,
                            outcome_unknown: false,
                            ran_for: None,
                            approval_diff: None,
                        }),
                    });
                    if let Some(now) = now {
                        if matches!(item, AssistantItem::ToolCall { .. }) {
                            self.timed.push((self.blocks.len() - 1, now));
                        }
                    }
                }
            }
            LogEntry::ToolResults { results } => {
                for r in results {
                    let output = ToolOutput {
                        output: r.output.clone(),
                        is_error: r.is_error,
                    };
                    match self.tools.get(&r.call_id).copied() {
                        Some(i) => {
                            let started = self.timed.iter().find(|(t, _)| *t == i).map(|t| t.1);
                            let ran_for = now
                                .zip(started)
                                .map(|(n, s)| n.saturating_duration_since(s));
                            self.timed.retain(|(t, _)| *t != i);
                            if self.tailing == Some(i) {
                                self.tailing = None;
                            }
                            let rev = self.rev();
                            let block = &mut self.blocks[i];
                            block.rev = rev;
                            if let BlockKind::Tool(t) = &mut block.kind {
                                t.result = Some(output);
                                t.output_tail = None;
                                t.elapsed_secs = None;
                                t.ran_for = ran_for;
                            }
                        }
                        None => self.push(BlockKind::Tool(ToolBlock {
                            call_id: r.call_id.clone(),
                            name: "(unknown call)".into(),
                            arguments: Value::Null,
                            result: Some(output),
                            expanded: false,
                            output_tail: None,
                            elapsed_secs: None,
                            awaiting_approval: false,
                            outcome_unknown: false,
                            ran_for: None,
                            approval_diff: None,
                        })),
                    }
                }
            }
            LogEntry::ApprovalRequest {
                call_id,
                tool,
                summary,
                preview,
                reason,
                session_rule,
            } => {
                self.set_awaiting(call_id, true);
                self.set_approval_diff(call_id, preview);
                self.pending.push(PendingApproval {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    summary: summary.clone(),
                    preview: preview.clone(),
                    reason: reason.clone(),
                    session_rule: session_rule.clone(),
                });
            }
            LogEntry::ApprovalDecision {
                call_id,
                decision,
                scope,
                rule,
                by,
                client,
                message,
                ..
            } => {
                self.drop_pending(call_id);
                // An allowed call starts running now: time it from here,
                // not from when it began to wait.
                if let (Some(now), Some(&i)) = (now, self.tools.get(call_id)) {
                    for (t, at) in &mut self.timed {
                        if *t == i {
                            *at = now;
                        }
                    }
                }
                self.push_decision(
                    call_id,
                    DecisionView {
                        decision: *decision,
                        scope: *scope,
                        rule: rule.clone(),
                        by: *by,
                        client: client.clone(),
                        message: message.clone(),
                    },
                );
            }
            LogEntry::ModelChange {
                provider, model, ..
            } => self.push(BlockKind::ModelChange {
                provider: provider.clone(),
                model: model.clone(),
            }),
            LogEntry::AgentStarted { name, task, .. } => self.push(BlockKind::Agent(AgentView {
                name: name.clone(),
                event: AgentEvent::Started { task: task.clone() },
            })),
            LogEntry::AgentTurnEnd {
                name,
                reason,
                usage,
                text,
                ..
            } => self.push(BlockKind::Agent(AgentView {
                name: name.clone(),
                event: AgentEvent::TurnEnded {
                    reason: *reason,
                    usage: *usage,
                    text: text.clone(),
                },
            })),
            LogEntry::RuleRevoked { rule, client, .. } => self.push_notice(
                Level::Info,
                match client {
                    Some(client) => format!("rule revoked: {rule} (by {client})"),
                    None => format!("rule revoked: {rule}"),
                },
            ),
            LogEntry::Checkpoint {
                checkpoint: Some(id),
                reason: CheckpointReason::TurnStart,
                ..
            } => self.last_changed = Some((id.clone(), None)),
            LogEntry::Checkpoint {
                checkpoint,
                reason: CheckpointReason::TurnEnd,
                changes,
                ..
            } => {
                if let Some((_, end)) = &mut self.last_changed {
                    *end = checkpoint.clone();
                }
                if let (Some(mark), false) = (self.inputs.last_mut(), changes.is_empty()) {
                    mark.changes = Some(crate::protocol::notes::summary(changes));
                }
                if !changes.is_empty() {
                    self.push(BlockKind::Injected {
                        source: "checkpoint".into(),
                        text: crate::tui::checkpoints::turn_summary(changes),
                        expanded: false,
                    });
                }
            }
            LogEntry::Rewind {
                files_restored,
                conflicts,
                not_restored,
                conversation,
                ..
            } => self.push(BlockKind::Injected {
                source: "rewind".into(),
                text: crate::protocol::notes::rewind(
                    files_restored,
                    conflicts,
                    not_restored,
                    *conversation,
                ),
                expanded: false,
            }),
            LogEntry::Checkpoint { .. } => {}
            LogEntry::HookInjectedItems { items } => {
                for item in items {
                    self.push(BlockKind::Injected {
                        source: item.source.clone(),
                        text: item.text.clone(),
                        expanded: false,
                    });
                }
            }
            LogEntry::TurnEnd {
                reason,
                error,
                turn_id,
                ..
            } => {
                for call_id in self
                    .pending
                    .drain(..)
                    .map(|p| p.call_id)
                    .collect::<Vec<_>>()
                {
                    self.set_awaiting(&call_id, false);
                }
                let started = self.turn.take().and_then(|clock| {
                    let same = turn_id.is_none() || clock.turn_id == *turn_id;
                    (same && clock.seen).then_some(clock.started)
                });
                let duration = now
                    .zip(started)
                    .map(|(n, s)| n.saturating_duration_since(s));
                if *reason != TurnEndReason::Completed || duration.is_some() {
                    self.push(BlockKind::TurnEnd {
                        reason: *reason,
                        error: error.clone(),
                        duration,
                    });
                }
            }
            LogEntry::Unknown => self.push(BlockKind::UnknownEntry),
        }
    }

    /// Copies the tail of a running tool's output into its block, which is
    /// where it is drawn.
    fn show_tool_output(&mut self) {
        let (index, tail) = match &self.in_flight {
            Some(InFlight::ToolOutput { call_id, text }) => {
                (self.tools.get(call_id).copied(), Some(tail(text)))
            }
            _ => (None, None),
        };
        if self.tailing != index {
            if let Some(old) = self.tailing.take() {
                self.set_tail(old, None);
            }
        }
        if let Some(i) = index {
            self.set_tail(i, tail);
        }
        self.tailing = index;
    }

    fn set_tail(&mut self, index: usize, tail: Option<String>) {
        let rev = self.rev();
        if let Some(block) = self.blocks.get_mut(index) {
            if let BlockKind::Tool(t) = &mut block.kind {
                if t.output_tail != tail {
                    t.output_tail = tail;
                    block.rev = rev;
                }
            }
        }
    }

    /// Advances the running tools' clocks; says whether any shown time
    /// changed.
    pub fn tick(&mut self, now: Instant) -> bool {
        let mut changed = false;
        for k in 0..self.timed.len() {
            let (i, started) = self.timed[k];
            let secs = now.saturating_duration_since(started).as_secs();
            let Some(Block {
                kind: BlockKind::Tool(t),
                ..
            }) = self.blocks.get_mut(i)
            else {
                continue;
            };
            if t.elapsed_secs != Some(secs) {
                t.elapsed_secs = Some(secs);
                let rev = self.rev();
                self.blocks[i].rev = rev;
                changed = true;
            }
        }
        changed
    }

    /// Indices of the blocks that expand and collapse (tool calls, project
    /// instructions), oldest first.
    fn collapsible_indices(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| is_collapsible(&b.kind))
            .map(|(i, _)| i)
    }

    /// Moves the selection to the previous (`back`) or next collapsible
    /// block, starting from the last one. Returns the newly selected index.
    pub fn select_block(&mut self, back: bool) -> Option<usize> {
        let next = match (self.selected, back) {
            (None, _) => self.collapsible_indices().next_back(),
            (Some(s), true) => self
                .collapsible_indices()
                .rev()
                .find(|&i| i < s)
                .or(Some(s)),
            (Some(s), false) => self.collapsible_indices().find(|&i| i > s).or(Some(s)),
        };
        self.set_selected(next);
        next
    }

    fn set_selected(&mut self, next: Option<usize>) {
        for i in [self.selected, next].into_iter().flatten() {
            let rev = self.rev();
            if let Some(b) = self.blocks.get_mut(i) {
                b.rev = rev;
            }
        }
        self.selected = next;
    }

    /// Expands or collapses the selected block, or the last collapsible
    /// one when none is selected.
    pub fn toggle_block(&mut self) {
        let Some(i) = self
            .selected
            .or_else(|| self.collapsible_indices().next_back())
        else {
            return;
        };
        let rev = self.rev();
        if let Some(block) = self.blocks.get_mut(i) {
            match &mut block.kind {
                BlockKind::Tool(ToolBlock { expanded, .. })
                | BlockKind::Injected { expanded, .. } => *expanded = !*expanded,
                _ => return,
            }
            block.rev = rev;
        }
    }
}

/// The instant that corresponds to the wall-clock time `at` (RFC 3339),
/// when it is in the past.
fn started_at(at: &str, now: Instant) -> Option<Instant> {
    let at = humantime::parse_rfc3339_weak(at).ok()?;
    let age = std::time::SystemTime::now().duration_since(at).ok()?;
    now.checked_sub(age)
}

/// The last [`OUTPUT_TAIL_LINES`] lines of a running tool's output.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    let from = lines.len().saturating_sub(OUTPUT_TAIL_LINES);
    lines[from..].join("\n")
}

/// The source of the `hook_injected_items` carrying `AGENTS.md` (or
/// `CLAUDE.md`); its text starts with the file's name.
pub const PROJECT_INSTRUCTIONS: &str = "project_instructions";

fn is_collapsible(kind: &BlockKind) -> bool {
    match kind {
        BlockKind::Tool(_) => true,
        BlockKind::Injected { source, .. } => source == PROJECT_INSTRUCTIONS,
        _ => false,
    }
}
