//! The view model: what the conversation shows, built only from the pod's
//! frames, with no terminal involved.
//!
//! Confirmed content comes from `snapshot` entries and `entry` frames and
//! nothing else. Streaming hints only build the one [`Draft`] block, which the
//! next `assistant_items` entry (or the turn's end) replaces, so streamed
//! text is never shown twice and never lost.

use std::collections::HashMap;

use serde_json::Value;
use uuid::Uuid;

use crate::protocol::{
    AssistantItem, Event, InFlight, Level, LogEntry, LogLine, Segment, Snapshot, TurnEndReason,
};

/// One block of the conversation. `rev` changes whenever what the block
/// draws changes; the layout cache keys on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub rev: u64,
    pub kind: BlockKind,
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
    /// The start of a session: drawn as a divider, which is how a compaction
    /// shows in the middle of the view.
    SessionStart {
        session_id: Uuid,
        compacted_from: Option<Uuid>,
    },
    /// An entry of a kind this build does not know.
    UnknownEntry,
}

/// A tool call and, once it arrives, its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolBlock {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    pub result: Option<ToolOutput>,
    pub expanded: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub output: String,
    pub is_error: bool,
}

/// The block being streamed, drawn from hints until its entry arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Draft {
    Text(String),
    Reasoning(String),
    ToolCall {
        call_id: String,
        name: String,
        arguments: String,
    },
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
    draft: Option<Draft>,
    draft_rev: u64,
    session_id: Option<Uuid>,
    last_seq: Option<u64>,
    tools: HashMap<String, usize>,
    selected: Option<usize>,
    /// Never reset, not even by a snapshot, so that a rev identifies one
    /// block's content for the lifetime of the client.
    next_rev: u64,
}

/// The first eight characters of a session id, as shown everywhere.
pub fn short_id(id: &Uuid) -> String {
    id.to_string().chars().take(8).collect()
}

impl Conversation {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_snapshot(snapshot: &Snapshot) -> Self {
        let mut c = Self::new();
        c.load_snapshot(snapshot);
        c
    }

    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    pub fn draft(&self) -> Option<&Draft> {
        self.draft.as_ref()
    }

    /// Changes whenever the draft's content does.
    pub fn draft_rev(&self) -> u64 {
        self.draft_rev
    }

    pub fn session_id(&self) -> Option<Uuid> {
        self.session_id
    }

    pub fn selected(&self) -> Option<usize> {
        self.selected
    }

    fn rev(&mut self) -> u64 {
        self.next_rev += 1;
        self.next_rev
    }

    fn push(&mut self, kind: BlockKind) {
        let rev = self.rev();
        if let BlockKind::Tool(t) = &kind {
            self.tools.insert(t.call_id.clone(), self.blocks.len());
        }
        self.blocks.push(Block { rev, kind });
    }

    /// Appends a notice (an error, a notification, a compaction step).
    pub fn push_notice(&mut self, level: Level, text: impl Into<String>) {
        self.push(BlockKind::Notice {
            level,
            text: text.into(),
        });
    }

    /// Empties the view (`/clear`) without touching what the stream
    /// continues from; the next snapshot shows everything again. A result
    /// for a call cleared away shows on its own.
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.tools.clear();
        self.selected = None;
    }

    /// Replaces everything with what a (re)connect's snapshot says.
    pub fn load_snapshot(&mut self, snapshot: &Snapshot) {
        self.blocks.clear();
        self.tools.clear();
        self.selected = None;
        self.session_id = Some(snapshot.session_id);
        self.last_seq = None;
        for LogLine { seq, entry } in &snapshot.entries {
            self.last_seq = Some(*seq);
            self.add_entry(entry);
        }
        self.draft = snapshot.in_flight.as_ref().and_then(|f| match f {
            InFlight::Text { text } => Some(Draft::Text(text.clone())),
            InFlight::Reasoning { text } => Some(Draft::Reasoning(text.clone())),
            InFlight::ToolCall {
                call_id,
                name,
                arguments_so_far,
            } => Some(Draft::ToolCall {
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments_so_far.clone(),
            }),
            InFlight::ToolOutput { .. } => None,
        });
        self.draft_rev = self.rev();
    }

    /// Applies one pod event to the view.
    pub fn apply(&mut self, event: &Event) -> Applied {
        match event {
            Event::Snapshot(s) => self.load_snapshot(s),
            Event::Entry {
                session_id,
                seq,
                entry,
            } => return self.apply_entry(*session_id, *seq, entry),
            Event::TextDelta { text } => match &mut self.draft {
                Some(Draft::Text(t)) => t.push_str(text),
                _ => self.draft = Some(Draft::Text(text.clone())),
            },
            Event::ReasoningDelta { text } => match &mut self.draft {
                Some(Draft::Reasoning(t)) => t.push_str(text),
                _ => self.draft = Some(Draft::Reasoning(text.clone())),
            },
            Event::ToolCallStart { call_id, name } => {
                self.draft = Some(Draft::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                });
            }
            Event::ToolCallArgsDelta { call_id, delta } => match &mut self.draft {
                Some(Draft::ToolCall {
                    call_id: id,
                    arguments,
                    ..
                }) if id == call_id => arguments.push_str(delta),
                _ => return Applied::Unchanged,
            },
            Event::Notification {
                level,
                source,
                message,
            } => self.push_notice(*level, format!("[{source}] {message}")),
            Event::Error { code, message, .. } => {
                let code = serde_json::to_value(code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "error".into());
                self.push_notice(Level::Error, format!("[error {code}] {message}"));
            }
            Event::CompactStart { .. } => self.push_notice(Level::Info, "[compact] starting"),
            Event::CompactDone { new_session_id, .. } => {
                self.push_notice(
                    Level::Info,
                    format!("[compact] done (new session {})", short_id(new_session_id)),
                );
                self.session_id = Some(*new_session_id);
                self.last_seq = None;
            }
            Event::CompactFailed { error } => {
                self.push_notice(Level::Error, format!("[compact error] {error}"));
            }
            _ => return Applied::Unchanged,
        }
        if matches!(
            event,
            Event::TextDelta { .. }
                | Event::ReasoningDelta { .. }
                | Event::ToolCallStart { .. }
                | Event::ToolCallArgsDelta { .. }
        ) {
            self.draft_rev = self.rev();
        }
        Applied::Changed
    }

    /// Applies an `entry` frame, checking that it continues the stream.
    pub fn apply_entry(&mut self, session_id: Uuid, seq: u64, entry: &LogEntry) -> Applied {
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
        self.add_entry(entry);
        Applied::Changed
    }

    fn add_entry(&mut self, entry: &LogEntry) {
        match entry {
            LogEntry::SessionStart {
                session_id,
                compacted_from,
                ..
            } => self.push(BlockKind::SessionStart {
                session_id: *session_id,
                compacted_from: *compacted_from,
            }),
            LogEntry::UserInput { segments, .. } => self.push(BlockKind::User {
                segments: segments.clone(),
            }),
            LogEntry::AssistantItems { items } => {
                self.clear_draft();
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
                        }),
                    });
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
                            let rev = self.rev();
                            let block = &mut self.blocks[i];
                            block.rev = rev;
                            if let BlockKind::Tool(t) = &mut block.kind {
                                t.result = Some(output);
                            }
                        }
                        None => self.push(BlockKind::Tool(ToolBlock {
                            call_id: r.call_id.clone(),
                            name: "(unknown call)".into(),
                            arguments: Value::Null,
                            result: Some(output),
                            expanded: false,
                        })),
                    }
                }
            }
            LogEntry::ApprovalRequest { .. }
            | LogEntry::ApprovalDecision { .. }
            | LogEntry::ModelChange { .. } => {}
            LogEntry::HookInjectedItems { items } => {
                for item in items {
                    self.push(BlockKind::Injected {
                        source: item.source.clone(),
                        text: item.text.clone(),
                        expanded: false,
                    });
                }
            }
            LogEntry::TurnEnd { reason, .. } => {
                self.clear_draft();
                let text = match reason {
                    TurnEndReason::Completed => return,
                    TurnEndReason::Unknown => "[turn ended]",
                    TurnEndReason::Cancelled => "[turn cancelled]",
                    TurnEndReason::Error => "[turn ended by an error]",
                    TurnEndReason::MaxSteps => "[turn stopped: too many steps]",
                    TurnEndReason::Interrupted => "[turn interrupted: the pod stopped mid-turn]",
                };
                let level = match reason {
                    TurnEndReason::Error => Level::Error,
                    _ => Level::Warn,
                };
                self.push_notice(level, text);
            }
            LogEntry::Unknown => self.push(BlockKind::UnknownEntry),
        }
    }

    fn clear_draft(&mut self) {
        if self.draft.take().is_some() {
            self.draft_rev = self.rev();
        }
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
