//! The conversation as the worker holds it, and its projection into the
//! model's context.
//!
//! A [`Conversation`] only ever grows by entries that `SessionLog` confirmed
//! durable, so the model never sees anything a client could not. The
//! projection is a pure function of those entries (plus the flattened text of
//! user inputs, cached because resolving a `file_ref` reads the disk). The
//! serialised form of the projection is cached too, in a [`WireCache`]: a
//! model call writes only the messages that are new since the last one.

use std::borrow::Cow;
use std::collections::HashMap;

use uuid::Uuid;

use crate::input::{self, Flattened, Resolvers};
use crate::protocol::{
    AssistantItem, CheckpointReason, Decision, InjectedItem, LogEntry, ToolResult, TurnRef,
};
use crate::provider::{
    CacheRef, ChatMessage, ImageSlot, MessageSource, ModelRequest, Span, ToolSpec, UserPart,
    WireCache,
};
use crate::workspace::Workspace;

pub struct Conversation {
    pub session_id: Uuid,
    entries: Vec<LogEntry>,
    /// The model of the latest `model_change`, which requests name.
    model: Option<String>,
    /// Flattened model text (and images) of each `user_input`, by index
    /// into `entries`.
    flattened: HashMap<usize, Flattened>,
    /// Entries before this index have their inputs in `flattened`.
    flattened_upto: usize,
    /// The context as the provider last counted it; `None` until a call
    /// reported usage.
    pub reported_tokens: Option<Reported>,
    /// The requests' messages as the provider wrote them: entries only
    /// ever leave in `with_pending`, which drops what it takes back.
    wire: WireCache,
}

/// What the provider counted at the last model call that reported usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    /// The call's input and output tokens: the next request holds both.
    pub tokens: u64,
    /// The pod's estimate of the conversation's request when the call
    /// ended (its reply included), so that what is added later is counted
    /// by how much the estimate grew, not by the estimate as a whole: a
    /// server's own count can be half the estimate (a chat template that
    /// drops the tools), and mixing the two would make the context jump.
    pub estimate: u64,
}

impl Reported {
    /// The size of a request whose estimate is `estimate` now.
    pub fn size_at(self, estimate: u64) -> u64 {
        self.tokens + estimate.saturating_sub(self.estimate)
    }
}

impl Conversation {
    pub fn new(session_id: Uuid, entries: Vec<LogEntry>) -> Self {
        let model = entries.iter().rev().find_map(|e| match e {
            LogEntry::ModelChange { model, .. } => Some(model.clone()),
            _ => None,
        });
        Self {
            session_id,
            entries,
            model,
            flattened: HashMap::new(),
            flattened_upto: 0,
            reported_tokens: None,
            wire: WireCache::default(),
        }
    }

    #[cfg(test)]
    pub(crate) fn wire_cache(&self) -> &WireCache {
        &self.wire
    }

    pub fn entries(&self) -> &[LogEntry] {
        &self.entries
    }

    /// Records an entry that is now durable.
    pub fn push(&mut self, entry: LogEntry) {
        if let LogEntry::ModelChange { model, .. } = &entry {
            self.model = Some(model.clone());
        }
        self.entries.push(entry);
    }

    /// The provider and model this session had recorded running on as of
    /// entry `seq` (itself included; `None`: the last entry): its latest
    /// `model_change` by then, else its `session_start` (`None` for logs
    /// written before sessions recorded them) — the model that produced
    /// what a fork there copies.
    pub fn recorded_model_at(&self, seq: Option<u64>) -> Option<(String, String)> {
        let end = seq.map_or(self.entries.len(), |seq| {
            usize::try_from(seq)
                .map_or(usize::MAX, |seq| seq.saturating_add(1))
                .min(self.entries.len())
        });
        self.entries[..end].iter().rev().find_map(|e| match e {
            LogEntry::ModelChange {
                provider, model, ..
            } => Some((provider.clone(), model.clone())),
            LogEntry::SessionStart {
                provider: Some(provider),
                model: Some(model),
                ..
            } => Some((provider.clone(), model.clone())),
            _ => None,
        })
    }

    /// The text of the latest injected item from `source`.
    pub fn latest_injected(&self, source: &str) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match e {
            LogEntry::HookInjectedItems { items } => items
                .iter()
                .rev()
                .find(|i| i.source == source)
                .map(|i| i.text.as_str()),
            _ => None,
        })
    }

    /// The open turn's ids, from its `user_input` (a fresh turn id for logs
    /// written before inputs recorded them).
    pub fn open_turn(&self) -> TurnRef {
        let ids = self.entries.iter().rev().find_map(|e| match e {
            LogEntry::UserInput {
                turn_id,
                request_id,
                ..
            } => Some((turn_id.clone(), request_id.clone())),
            _ => None,
        });
        let (turn_id, request_id) = ids.unwrap_or_default();
        TurnRef {
            turn_id: turn_id.unwrap_or_else(crate::pod::new_turn_id),
            request_id,
        }
    }

    /// Whether the open turn waits for a person: one of its calls without a
    /// result has an approval request and no decision.
    pub fn waiting_for_approval(&self) -> bool {
        self.has_open_turn()
            && self
                .open_step()
                .calls
                .iter()
                .any(|c| !c.finished && c.requested && c.decision.is_none())
    }

    /// The tool calls of the open turn that have no result yet, with what
    /// the log says of each: requested, decided. (Calls of one step all get
    /// results before the next model call, so these are the last step's.)
    pub fn open_step(&self) -> OpenStep {
        let start = self
            .entries
            .iter()
            .rposition(|e| matches!(e, LogEntry::UserInput { .. }))
            .unwrap_or(0);
        let mut step = OpenStep::default();
        for entry in &self.entries[start..] {
            match entry {
                LogEntry::AssistantItems { items } => {
                    for item in items {
                        if let AssistantItem::ToolCall {
                            call_id,
                            name,
                            arguments,
                        } = item
                        {
                            if step.calls.iter().all(|c| c.finished) {
                                step.calls.clear();
                                step.previous_stopped = false;
                            }
                            step.calls.push(StepCall {
                                call_id: call_id.clone(),
                                name: name.clone(),
                                arguments: arguments.clone(),
                                finished: false,
                                decision: None,
                                requested: false,
                                shown: None,
                            });
                        }
                    }
                }
                LogEntry::ApprovalRequest {
                    call_id, preview, ..
                } => {
                    if let Some(c) = step.calls.iter_mut().find(|c| &c.call_id == call_id) {
                        c.requested = true;
                        c.shown = Some(preview.clone());
                    }
                }
                LogEntry::ApprovalDecision {
                    call_id,
                    decision,
                    message,
                    ..
                } => {
                    if let Some(c) = step.calls.iter_mut().find(|c| &c.call_id == call_id) {
                        c.decision = Some((*decision, message.clone()));
                    }
                }
                LogEntry::ToolResults { results } => {
                    for r in results {
                        if let Some(c) = step.calls.iter_mut().find(|c| c.call_id == r.call_id) {
                            c.finished = true;
                            step.previous_stopped = r.output.ends_with(STOPPED_MARK);
                        }
                    }
                }
                _ => {}
            }
        }
        step
    }

    /// Tool calls of the current turn that have no result yet, in order.
    /// (A turn that went on in a compacted session starts at its beginning.)
    pub fn unanswered_calls(&self) -> Vec<String> {
        let turn_start = self
            .entries
            .iter()
            .rposition(|e| matches!(e, LogEntry::UserInput { .. }))
            .unwrap_or(0);
        let mut open: Vec<String> = Vec::new();
        for entry in &self.entries[turn_start..] {
            match entry {
                LogEntry::AssistantItems { items } => {
                    for item in items {
                        if let AssistantItem::ToolCall { call_id, .. } = item {
                            open.push(call_id.clone());
                        }
                    }
                }
                LogEntry::ToolResults { results } => {
                    open.retain(|id| !results.iter().any(|r| &r.call_id == id));
                }
                _ => {}
            }
        }
        open
    }

    /// True when the last turn began and never ended (the pod died
    /// mid-turn). A turn that went on in a compacted session shows as model
    /// or tool entries after the summary; one cut short before it committed
    /// anything there is only visible in the session it came from (see
    /// [`Conversation::carried_from`]).
    /// The open turn's user input while the model has answered nothing of
    /// that turn yet. A compaction before the turn's first model call
    /// carries it into the new session after the summary: a summary alone
    /// rarely says what was just asked, and the model would answer the
    /// summary instead of the user.
    pub fn unanswered_input(&self) -> Option<&LogEntry> {
        for entry in self.entries.iter().rev() {
            match entry {
                LogEntry::UserInput { .. } => return Some(entry),
                LogEntry::AssistantItems { .. }
                | LogEntry::ToolResults { .. }
                | LogEntry::TurnEnd { .. }
                | LogEntry::SessionStart { .. }
                | LogEntry::ApprovalRequest { .. }
                | LogEntry::ApprovalDecision { .. } => return None,
                _ => {}
            }
        }
        None
    }

    pub fn has_open_turn(&self) -> bool {
        for entry in self.entries.iter().rev() {
            match entry {
                LogEntry::TurnEnd { .. } | LogEntry::SessionStart { .. } => return false,
                LogEntry::UserInput { .. }
                | LogEntry::AssistantItems { .. }
                | LogEntry::ToolResults { .. } => return true,
                LogEntry::HookInjectedItems { .. }
                | LogEntry::ModelChange { .. }
                | LogEntry::RuleRevoked { .. }
                | LogEntry::Checkpoint { .. }
                | LogEntry::Rewind { .. }
                | LogEntry::AgentStarted { .. }
                | LogEntry::AgentTurnEnd { .. }
                | LogEntry::Unknown => {}
                LogEntry::ApprovalRequest { .. } | LogEntry::ApprovalDecision { .. } => {
                    return true
                }
            }
        }
        false
    }

    /// The session this one was compacted from, as long as no turn entry
    /// has been committed here: a turn open there when the pod compacted
    /// mid-turn goes on here, and until it commits something only the old
    /// log shows it open.
    pub fn carried_from(&self) -> Option<Uuid> {
        let Some(LogEntry::SessionStart {
            compacted_from: Some(from),
            ..
        }) = self.entries.first()
        else {
            return None;
        };
        let quiet = self.entries[1..]
            .iter()
            .all(|e| matches!(e, LogEntry::HookInjectedItems { .. } | LogEntry::Unknown));
        quiet.then_some(*from)
    }

    /// Runs `f` on the conversation as it will be once `pending` is
    /// committed, without committing it: lets a turn start its first model
    /// call while the user input is still being synced. Nothing of
    /// `pending` stays behind.
    /// `read` is what [`Conversation::inputs_to_read`] asked for, read.
    pub fn with_pending<R>(
        &mut self,
        pending: &[LogEntry],
        read: Vec<(usize, Flattened)>,
        workspace: &Workspace,
        resolvers: &Resolvers,
        f: impl FnOnce(Prepared<'_>) -> R,
    ) -> R {
        let len = self.entries.len();
        self.entries.extend(pending.iter().cloned());
        self.insert_read(read);
        let result = f(self.prepare(workspace, resolvers));
        for index in len..self.entries.len() {
            self.flattened.remove(&index);
        }
        self.flattened_upto = self.flattened_upto.min(len);
        self.wire.forget_from(len);
        self.entries.truncate(len);
        result
    }

    /// The user inputs not flattened yet whose flattening reads files, by
    /// index — those of the log, then those of `pending` as
    /// [`Conversation::with_pending`] will place them. A caller on an actor
    /// thread flattens them elsewhere and hands the text back
    /// ([`Conversation::insert_read`]), so that no file is read where the
    /// clients' fan-out runs.
    pub fn inputs_to_read(
        &self,
        pending: &[LogEntry],
    ) -> Vec<(usize, Vec<crate::protocol::Segment>, input::Resolved)> {
        let len = self.entries.len();
        let logged = self.entries.iter().enumerate().skip(self.flattened_upto);
        let pending = pending.iter().enumerate().map(|(i, e)| (len + i, e));
        logged
            .chain(pending)
            .filter_map(|(index, entry)| match entry {
                LogEntry::UserInput {
                    segments, resolved, ..
                } if !self.flattened.contains_key(&index) && input::reads_files(segments) => {
                    Some((index, segments.clone(), resolved.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Takes the flattened text of inputs [`Conversation::inputs_to_read`]
    /// named. Text for an index past the entries is dropped: it belonged
    /// to pending entries that are not (or no longer) there.
    pub fn insert_read(&mut self, read: Vec<(usize, Flattened)>) {
        for (index, text) in read {
            if index < self.entries.len() {
                self.flattened.entry(index).or_insert(text);
            }
        }
    }

    /// Flattens the user inputs not flattened yet: what a request borrows
    /// its user messages from. Resolving a `file_ref` reads the disk here
    /// unless the text was read beforehand (see `inputs_to_read`).
    pub fn prepare(&mut self, workspace: &Workspace, resolvers: &Resolvers) -> Prepared<'_> {
        for index in self.flattened_upto..self.entries.len() {
            if let LogEntry::UserInput {
                segments, resolved, ..
            } = &self.entries[index]
            {
                self.flattened
                    .entry(index)
                    .or_insert_with(|| input::flatten(segments, resolved, workspace, resolvers));
            }
        }
        self.flattened_upto = self.entries.len();
        Prepared(self, resolvers.max_context_images)
    }
}

/// A conversation whose user inputs are all flattened: what a model request
/// is built from (see [`Conversation::prepare`]).
#[derive(Clone, Copy)]
/// It carries `--max-context-images`: only the last that many images are
/// sent, older ones as placeholders.
pub struct Prepared<'a>(&'a Conversation, usize);

impl<'a> Prepared<'a> {
    pub fn conversation(self) -> &'a Conversation {
        self.0
    }

    /// The model request for the conversation so far, borrowed from its
    /// entries: no text is copied (see `docs/performance.md`). Each message
    /// names the entries it was built from, for the conversation's
    /// [`WireCache`].
    pub fn request(self, system: &'a str, tools: Cow<'a, [ToolSpec]>) -> ModelRequest<'a> {
        let conversation = self.0;
        let mut raw: Vec<Raw<'a>> = Vec::new();
        // Notes from checkpoint and rewind entries wait for the next message
        // that is not a tool result: a turn-start checkpoint sits between a
        // call and its result, where no user message may go.
        let mut notes: Vec<(String, MessageSource)> = Vec::new();
        let mut images: Vec<ImageSlot> = Vec::new();
        let overflowed = overflowed_inputs(&conversation.entries);
        for (index, entry) in conversation.entries.iter().enumerate() {
            if overflowed.contains(&index) {
                continue;
            }
            if !notes.is_empty() && starts_message(entry) {
                raw.extend(
                    notes
                        .drain(..)
                        .map(|(text, source)| Raw::User(Cow::Owned(text), source)),
                );
            }
            match entry {
                LogEntry::UserInput { .. } => {
                    // Every input is in `flattened`: a `Prepared` is only
                    // made by `prepare`.
                    let source = MessageSource::Input(index);
                    match conversation.flattened.get(&index) {
                        Some(flat) if !flat.images.is_empty() => {
                            raw.push(Raw::UserParts(parts(flat, &mut images), source));
                        }
                        flat => raw.push(Raw::User(
                            Cow::Borrowed(flat.map_or("", |f| f.text.as_str())),
                            source,
                        )),
                    }
                }
                LogEntry::AssistantItems { items } => {
                    let items = items.iter().map(Cow::Borrowed);
                    match raw.last_mut() {
                        Some(Raw::Assistant(so_far, span)) => {
                            so_far.extend(items);
                            span.last = index;
                        }
                        _ => raw.push(Raw::Assistant(items.collect(), Span::of(index))),
                    }
                }
                LogEntry::ToolResults { results } => {
                    let results = results.iter().map(Cow::Borrowed);
                    match raw.last_mut() {
                        Some(Raw::Results(so_far, span)) => {
                            so_far.extend(results);
                            span.last = index;
                        }
                        _ => raw.push(Raw::Results(results.collect(), Span::of(index))),
                    }
                }
                LogEntry::HookInjectedItems { items } => {
                    for (item_index, item) in items.iter().enumerate() {
                        let source = MessageSource::Injected {
                            entry: index,
                            item: item_index,
                        };
                        raw.push(Raw::User(Cow::Owned(injected_text(item)), source));
                    }
                }
                LogEntry::Checkpoint {
                    reason: CheckpointReason::TurnStart,
                    changes,
                    ..
                } if !changes.is_empty() => notes.push((
                    format!(
                        "[checkpoint] {}",
                        crate::protocol::notes::hand_edits(changes)
                    ),
                    MessageSource::Injected {
                        entry: index,
                        item: 0,
                    },
                )),
                LogEntry::Rewind {
                    files_restored,
                    conflicts,
                    not_restored,
                    conversation: rewound,
                    ..
                } => notes.push((
                    format!(
                        "[rewind] {}",
                        crate::protocol::notes::rewind(
                            files_restored,
                            conflicts,
                            not_restored,
                            *rewound
                        )
                    ),
                    MessageSource::Injected {
                        entry: index,
                        item: 0,
                    },
                )),
                LogEntry::Checkpoint { .. }
                | LogEntry::SessionStart { .. }
                | LogEntry::TurnEnd { .. }
                | LogEntry::ApprovalRequest { .. }
                | LogEntry::ApprovalDecision { .. }
                | LogEntry::ModelChange { .. }
                | LogEntry::RuleRevoked { .. }
                | LogEntry::AgentStarted { .. }
                | LogEntry::AgentTurnEnd { .. }
                | LogEntry::Unknown => {}
            }
        }
        raw.extend(
            notes
                .into_iter()
                .map(|(text, source)| Raw::User(Cow::Owned(text), source)),
        );
        let (messages, sources) = answer_every_call(raw).into_iter().unzip();
        choose_sent(&mut images, self.1);
        ModelRequest {
            model: conversation.model.as_deref().map(Cow::Borrowed),
            system: Cow::Borrowed(system),
            messages,
            tools,
            cache: Some(CacheRef {
                cache: &conversation.wire,
                sources,
            }),
            max_output_tokens: None,
            images,
        }
    }
}

/// The parts of an input with images, its slots appended to `images`.
fn parts<'a>(flat: &'a Flattened, images: &mut Vec<ImageSlot>) -> Vec<UserPart<'a>> {
    let mut parts = Vec::with_capacity(flat.images.len() * 2 + 1);
    let mut from = 0;
    for (at, slot) in &flat.images {
        let text = flat.text.get(from..*at).unwrap_or("");
        if !text.is_empty() {
            parts.push(UserPart::Text(Cow::Borrowed(text)));
        }
        parts.push(UserPart::Image(images.len()));
        images.push(slot.clone());
        from = *at;
    }
    let rest = flat.text.get(from..).unwrap_or("");
    if !rest.is_empty() {
        parts.push(UserPart::Text(Cow::Borrowed(rest)));
    }
    parts
}

/// Marks the last `max` images whose blobs are there as sent: older ones
/// go as placeholders, so a long session of screenshots stays within what
/// providers take (and what the context holds).
fn choose_sent(images: &mut [ImageSlot], max: usize) {
    let mut left = max;
    for slot in images.iter_mut().rev() {
        if left == 0 {
            break;
        }
        if slot.path.is_some() {
            slot.send = true;
            left -= 1;
        }
    }
}

/// The user inputs of turns that ended `context_overflow` before the model
/// answered anything: such an input never reached the model, and merged
/// into the next message it would make every later call overflow too.
fn overflowed_inputs(entries: &[LogEntry]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut unanswered = None;
    for (index, entry) in entries.iter().enumerate() {
        match entry {
            LogEntry::UserInput { .. } => unanswered = Some(index),
            LogEntry::AssistantItems { .. } => unanswered = None,
            LogEntry::TurnEnd {
                error: Some(error), ..
            } if error.code == crate::protocol::TurnErrorCode::ContextOverflow => {
                out.extend(unanswered.take())
            }
            LogEntry::TurnEnd { .. } => unanswered = None,
            _ => {}
        }
    }
    out
}

/// Whether an entry becomes a message of its own (not a tool result, which
/// joins the assistant message before it): where waiting notes may go.
fn starts_message(entry: &LogEntry) -> bool {
    matches!(
        entry,
        LogEntry::UserInput { .. }
            | LogEntry::AssistantItems { .. }
            | LogEntry::HookInjectedItems { .. }
    )
}

/// A message as the entries give it, before [`answer_every_call`] pairs
/// calls and results; assistant items and results of consecutive entries
/// are merged, with the entries they came from.
enum Raw<'a> {
    User(Cow<'a, str>, MessageSource),
    UserParts(Vec<UserPart<'a>>, MessageSource),
    Assistant(Vec<Cow<'a, AssistantItem>>, Span),
    Results(Vec<Cow<'a, ToolResult>>, Span),
}

/// What the model is told about a tool call the log holds no result for.
pub const NO_RESULT_RECORDED: &str =
    "[no result was recorded for this tool call: the turn ended before it could be saved]";

/// Makes the messages a context a model API accepts: every tool call is
/// answered in the message right after its assistant message, and no
/// result answers a call that message did not make (OpenAI and Anthropic
/// reject either with a 400).
///
/// The log is closed properly — every turn ends with results for all its
/// calls, retried after a storage failure and on start — so on a sound log
/// this changes nothing. It is the second line of defence for a log that
/// was damaged anyway (by an older pod, by hand, by a failure no one
/// foresaw): the missing results are supplied here, in the projection
/// only, so one bad turn cannot make the whole session unusable.
fn answer_every_call(raw: Vec<Raw<'_>>) -> Vec<(ChatMessage<'_>, MessageSource)> {
    let mut out = Vec::with_capacity(raw.len());
    let mut raw = raw.into_iter().peekable();
    while let Some(message) = raw.next() {
        match message {
            Raw::Assistant(items, calls_span) => {
                let assistant = MessageSource::Assistant(calls_span);
                let calls: Vec<&str> = items
                    .iter()
                    .filter_map(|item| match item.as_ref() {
                        AssistantItem::ToolCall { call_id, .. } => Some(call_id.as_str()),
                        _ => None,
                    })
                    .collect();
                if calls.is_empty() {
                    out.push((ChatMessage::Assistant { items }, assistant));
                    continue;
                }
                let (mut results, recorded) = match raw.next_if(|m| matches!(m, Raw::Results(..))) {
                    Some(Raw::Results(results, span)) => (results, Some(span)),
                    _ => (Vec::new(), None),
                };
                results.retain(|r| calls.contains(&r.call_id.as_str()));
                let missing: Vec<String> = calls
                    .into_iter()
                    .filter(|id| !results.iter().any(|r| r.call_id == *id))
                    .map(str::to_owned)
                    .collect();
                results.extend(
                    missing_results(missing, NO_RESULT_RECORDED)
                        .into_iter()
                        .map(Cow::Owned),
                );
                let source = MessageSource::Results {
                    calls: calls_span,
                    recorded,
                };
                out.push((ChatMessage::Assistant { items }, assistant));
                out.push((ChatMessage::ToolResults { results }, source));
            }
            // Results that follow no assistant message with calls answer
            // nothing the model made: left out.
            Raw::Results(..) => {}
            Raw::User(text, source) => {
                let injected = matches!(source, MessageSource::Injected { .. });
                out.push((ChatMessage::User { text, injected }, source));
            }
            Raw::UserParts(parts, source) => out.push((ChatMessage::UserParts { parts }, source)),
        }
    }
    out
}

/// How pod-injected text reads to the model: labelled, so it is never
/// mistaken for something the user typed.
fn injected_text(item: &InjectedItem) -> String {
    match item.source.as_str() {
        "compact_summary" => format!("{SUMMARY_LABEL}\n{}", item.text),
        source => format!("[{source}] {}", item.text),
    }
}

const SUMMARY_LABEL: &str = "[Summary of the conversation so far, written when it was compacted]";

/// The last line of a tool result whose tool was killed because the pod
/// stopped (see `pod::tool_step`).
pub const STOPPED_MARK: &str = "[interrupted: the pod stopped]";

/// The tool calls of the open turn without a result, as [`Conversation::open_step`] finds them.
#[derive(Debug, Default)]
pub struct OpenStep {
    pub calls: Vec<StepCall>,
    /// The step's latest result is that of a tool the stopping pod killed:
    /// the call after it cannot have started.
    pub previous_stopped: bool,
}

#[derive(Debug)]
pub struct StepCall {
    pub call_id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    pub finished: bool,
    pub decision: Option<(Decision, Option<String>)>,
    pub requested: bool,
    /// The preview its approval request showed a person, if it was asked.
    pub shown: Option<String>,
}

/// Results for tool calls that will never run, so the log always projects to
/// a valid model context.
pub fn missing_results(call_ids: Vec<String>, why: &str) -> Vec<ToolResult> {
    call_ids
        .into_iter()
        .map(|call_id| ToolResult {
            call_id,
            output: why.to_owned(),
            is_error: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TurnEndReason, Usage};

    fn start(compacted_from: Option<Uuid>) -> LogEntry {
        LogEntry::SessionStart {
            session_id: Uuid::new_v4(),
            created_at: LogEntry::now(),
            compacted_from,
            forked_from: None,
            provider: None,
            model: None,
            workspace: None,
            parent: None,
            replay_of: None,
        }
    }

    fn summary() -> LogEntry {
        LogEntry::HookInjectedItems {
            items: vec![InjectedItem {
                source: "compact_summary".into(),
                text: "so far".into(),
            }],
        }
    }

    fn text() -> LogEntry {
        LogEntry::AssistantItems {
            items: vec![AssistantItem::Text { text: "hi".into() }],
        }
    }

    fn end() -> LogEntry {
        LogEntry::TurnEnd {
            reason: TurnEndReason::Completed,
            turn_id: None,
            request_id: None,
            usage: None::<Usage>,
            error: None,
        }
    }

    fn file_input(path: &str) -> LogEntry {
        LogEntry::UserInput {
            segments: vec![crate::protocol::Segment::file_ref(path)],
            at: LogEntry::now(),
            turn_id: None,
            request_id: None,
            resolved: Default::default(),
        }
    }

    /// What a worker does: the files are read first (on the blocking pool),
    /// and building the request then reads nothing — proven here by
    /// removing the file in between.
    #[test]
    fn inputs_read_beforehand_are_what_the_request_carries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha").unwrap();
        std::fs::write(dir.path().join("b.txt"), "beta").unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let resolvers = Resolvers::for_workspace(&workspace);
        let mut conversation = Conversation::new(
            Uuid::new_v4(),
            vec![start(None), user("plain"), file_input("a.txt"), end()],
        );
        let pending = [file_input("b.txt")];
        let todo = conversation.inputs_to_read(&pending);
        assert_eq!(
            todo.iter().map(|(i, _, _)| *i).collect::<Vec<_>>(),
            [2, 4],
            "only inputs that read files, the pending one placed after the log"
        );
        let read: Vec<(usize, Flattened)> = todo
            .into_iter()
            .map(|(i, segments, resolved)| {
                (
                    i,
                    input::flatten(&segments, &resolved, &workspace, &resolvers),
                )
            })
            .collect();
        std::fs::remove_file(dir.path().join("a.txt")).unwrap();
        std::fs::remove_file(dir.path().join("b.txt")).unwrap();
        let users = |request: ModelRequest<'_>| -> Vec<String> {
            request
                .messages
                .iter()
                .filter_map(|m| match m {
                    ChatMessage::User { text, .. } => Some(text.to_string()),
                    _ => None,
                })
                .collect()
        };
        let texts =
            conversation.with_pending(&pending, read.clone(), &workspace, &resolvers, |p| {
                users(p.request("", Cow::Borrowed(&[])))
            });
        assert!(
            texts[1].contains("alpha") && texts[2].contains("beta"),
            "{texts:?}"
        );
        // The pending input left with its text; the logged one's text stays.
        conversation.insert_read(read);
        assert_eq!(conversation.inputs_to_read(&[]).len(), 0);
        let texts = users(
            conversation
                .prepare(&workspace, &resolvers)
                .request("", Cow::Borrowed(&[])),
        );
        assert_eq!(texts.len(), 2);
        assert!(texts[1].contains("alpha"), "{texts:?}");
    }

    /// What the offline model answers to a conversation of `entries`.
    fn offline_reply(entries: Vec<LogEntry>) -> String {
        use crate::provider::{ModelEvent, Provider};
        use futures::StreamExt;
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let resolvers = Resolvers::for_workspace(&workspace);
        let mut conversation = Conversation::new(Uuid::new_v4(), entries);
        let request = conversation
            .prepare(&workspace, &resolvers)
            .request("system", Cow::Borrowed(&[]));
        let offline = crate::provider::Offline {
            word_delay: std::time::Duration::ZERO,
            ..Default::default()
        };
        let events: Vec<_> = futures::executor::block_on(offline.stream(&request).collect());
        events
            .into_iter()
            .filter_map(|event| match event {
                Ok(ModelEvent::TextDelta(text)) => Some(text),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_typed_label_reaches_the_offline_model_as_typed() {
        // Typed text that reads like the labels the pod gives what it
        // injects is still what the user sent (issue 37).
        let summary_label = format!("{SUMMARY_LABEL} hi");
        for typed in [
            "[note] hi",
            "[project_instructions] hi",
            summary_label.as_str(),
        ] {
            let chars = typed.chars().count();
            let described = format!("Your last message had {chars} characters in 1 line(s)");
            let reply = offline_reply(vec![start(None), user(typed)]);
            assert!(reply.contains(&described), "{typed}: {reply}");
            // Past what the pod injected after it, all the same.
            let reply = offline_reply(vec![start(None), user(typed), summary()]);
            assert!(reply.contains(&described), "{typed}: {reply}");
        }
    }

    #[test]
    fn a_turn_carried_into_a_compacted_session_is_open_once_it_commits_there() {
        let from = Uuid::new_v4();
        let quiet = Conversation::new(Uuid::new_v4(), vec![start(Some(from)), summary()]);
        assert!(!quiet.has_open_turn());
        assert_eq!(quiet.carried_from(), Some(from));

        let going_on =
            Conversation::new(Uuid::new_v4(), vec![start(Some(from)), summary(), text()]);
        assert!(going_on.has_open_turn());
        assert_eq!(going_on.carried_from(), None);

        let ended = Conversation::new(Uuid::new_v4(), vec![start(Some(from)), summary(), end()]);
        assert!(!ended.has_open_turn());
        assert_eq!(ended.carried_from(), None);
    }

    fn call(id: &str) -> LogEntry {
        LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: id.into(),
                name: "read_file".into(),
                arguments: serde_json::json!({}),
            }],
        }
    }

    fn result(id: &str) -> LogEntry {
        LogEntry::ToolResults {
            results: vec![ToolResult {
                call_id: id.into(),
                output: "ok".into(),
                is_error: false,
            }],
        }
    }

    fn user(text: &str) -> LogEntry {
        LogEntry::UserInput {
            segments: vec![crate::protocol::Segment::text(text)],
            at: LogEntry::now(),
            turn_id: None,
            request_id: None,
            resolved: Default::default(),
        }
    }

    fn project(entries: Vec<LogEntry>) -> Vec<ChatMessage<'static>> {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let resolvers = Resolvers::for_workspace(&workspace);
        let mut conversation = Conversation::new(Uuid::new_v4(), entries);
        let request = conversation
            .prepare(&workspace, &resolvers)
            .request("system", Cow::Borrowed(&[]));
        request.messages.into_iter().map(owned).collect()
    }

    fn owned(message: ChatMessage<'_>) -> ChatMessage<'static> {
        let own = |items: Vec<Cow<'_, AssistantItem>>| {
            items
                .into_iter()
                .map(|i| Cow::Owned(i.into_owned()))
                .collect()
        };
        match message {
            ChatMessage::User { text, injected } => ChatMessage::User {
                text: Cow::Owned(text.into_owned()),
                injected,
            },
            ChatMessage::UserParts { parts } => ChatMessage::UserParts {
                parts: parts
                    .into_iter()
                    .map(|part| match part {
                        UserPart::Text(t) => UserPart::Text(Cow::Owned(t.into_owned())),
                        UserPart::Image(slot) => UserPart::Image(slot),
                    })
                    .collect(),
            },
            ChatMessage::Assistant { items } => ChatMessage::Assistant { items: own(items) },
            ChatMessage::ToolResults { results } => ChatMessage::ToolResults {
                results: results
                    .into_iter()
                    .map(|r| Cow::Owned(r.into_owned()))
                    .collect(),
            },
        }
    }

    /// Every call is answered right after its assistant message, and every
    /// result answers a call of the message before it.
    fn assert_valid(messages: &[ChatMessage]) {
        for (i, message) in messages.iter().enumerate() {
            if let ChatMessage::Assistant { items } = message {
                let calls: Vec<&String> = items
                    .iter()
                    .filter_map(|item| match item.as_ref() {
                        AssistantItem::ToolCall { call_id, .. } => Some(call_id),
                        _ => None,
                    })
                    .collect();
                if calls.is_empty() {
                    continue;
                }
                let Some(ChatMessage::ToolResults { results }) = messages.get(i + 1) else {
                    panic!("calls {calls:?} are not answered: {messages:?}");
                };
                let answered: Vec<&String> = results.iter().map(|r| &r.call_id).collect();
                assert_eq!(answered.len(), calls.len(), "{messages:?}");
                for call in calls {
                    assert!(answered.contains(&call), "{call} unanswered: {messages:?}");
                }
            }
            if matches!(message, ChatMessage::ToolResults { .. }) {
                assert!(
                    matches!(
                        messages.get(i.wrapping_sub(1)),
                        Some(ChatMessage::Assistant { .. })
                    ),
                    "results answer no call: {messages:?}"
                );
            }
        }
    }

    #[test]
    fn unfinished_turns_anywhere_in_the_log_still_project_to_a_valid_context() {
        // What a transient disk-full left behind under an older pod: a call
        // with no result and no turn_end, then the next turn.
        let messages = project(vec![
            start(None),
            user("one"),
            call("c1"),
            user("two"),
            text(),
            end(),
            user("three"),
            call("c2"),
            call("c3"),
            result("c3"),
            user("four"),
            call("c4"),
        ]);
        assert_valid(&messages);
        let ChatMessage::ToolResults { results } = &messages[2] else {
            panic!("{messages:?}");
        };
        assert_eq!(results[0].call_id, "c1");
        assert!(results[0].is_error);
        assert_eq!(results[0].output, NO_RESULT_RECORDED);
    }

    #[test]
    fn a_sound_log_projects_unchanged_and_stray_results_are_left_out() {
        let sound = vec![
            start(None),
            user("one"),
            call("c1"),
            result("c1"),
            text(),
            end(),
        ];
        let messages = project(sound);
        assert_valid(&messages);
        assert_eq!(messages.len(), 4, "{messages:?}");

        let stray = project(vec![start(None), user("one"), result("c9"), text(), end()]);
        assert_valid(&stray);
        assert_eq!(stray.len(), 2, "{stray:?}");
    }

    fn checkpoint(changes: Vec<crate::protocol::FileChange>) -> LogEntry {
        LogEntry::Checkpoint {
            checkpoint: Some("ab".into()),
            error: None,
            reason: CheckpointReason::TurnStart,
            changes,
            skipped: Vec::new(),
            skipped_more: None,
            at: "2026-12-01T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn hand_edits_reach_the_model_after_the_results_and_checkpoints_do_not() {
        let edit = crate::protocol::FileChange {
            path: "notes.md".into(),
            change: crate::protocol::ChangeKind::Modified,
            added: Some(1),
            removed: Some(0),
        };
        let messages = project(vec![
            start(None),
            user("one"),
            call("c1"),
            checkpoint(vec![edit]),
            result("c1"),
            text(),
            end(),
        ]);
        assert_valid(&messages);
        let ChatMessage::User { text, injected } = &messages[3] else {
            panic!("{messages:?}");
        };
        assert_eq!(
            text,
            "[checkpoint] Since the last turn, files were changed outside the pod: notes.md \
             (modified)."
        );
        assert!(injected);
        assert_eq!(messages.len(), 5, "{messages:?}");
        // A checkpoint with no hand edits is not sent at all.
        let quiet = project(vec![
            start(None),
            user("one"),
            call("c1"),
            checkpoint(Vec::new()),
            result("c1"),
        ]);
        assert_eq!(quiet.len(), 3, "{quiet:?}");
    }

    #[test]
    fn a_session_not_compacted_carries_nothing() {
        let fresh = Conversation::new(Uuid::new_v4(), vec![start(None)]);
        assert_eq!(fresh.carried_from(), None);
        assert!(!fresh.has_open_turn());
    }
}
