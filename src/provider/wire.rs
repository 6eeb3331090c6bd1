//! The serialised messages of a conversation, kept from one model call to
//! the next.
//!
//! Every call sends the whole conversation, and JSON-escaping it afresh
//! costs about a millisecond per megabyte on every call (see
//! `docs/performance.md`, later turns). A conversation only grows at its
//! end, so an HTTP provider keeps the bytes of the messages it wrote, each
//! with the [`MessageSource`] it was built from, and the next call writes
//! only the messages from the first one whose source differs: a body is the
//! kept bytes copied, then the new messages.
//!
//! Why kept bytes are never stale:
//! - a message is a function of the entries its source names: entries never
//!   change once in a conversation, and a user input's flattened text is
//!   made once per entry. A message that grows — assistant entries merged
//!   into one message, tool results arriving one by one, the results
//!   answering a message's calls — has another source once it has grown;
//! - a message's bytes may also depend on the messages before it (Anthropic
//!   merges consecutive messages of one role, OpenAI consecutive user
//!   messages), so bytes are only kept as a
//!   prefix: from the first message that differs everything is written
//!   again;
//! - entries leave a conversation only when `Conversation::with_pending`
//!   takes back the entries it tried a request with. It calls
//!   [`WireCache::forget_from`], which drops every message built from them
//!   (their indexes will be used again, perhaps by other entries). Another
//!   session is another `Conversation`, with an empty cache.

use std::fmt;
use std::sync::Mutex;

use super::{ChatMessage, ModelRequest};

/// Entries `first..=last` of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: usize,
    pub last: usize,
}

impl Span {
    /// The one entry `index`.
    pub fn of(index: usize) -> Self {
        Self {
            first: index,
            last: index,
        }
    }
}

/// The entries one message of a request was built from: within one
/// conversation, two messages with equal sources are equal (see the module
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSource {
    /// The user input at this entry.
    Input(usize),
    /// Item `item` of the injected items at `entry`.
    Injected { entry: usize, item: usize },
    /// The assistant items of these entries.
    Assistant(Span),
    /// The results answering the calls of the assistant message of `calls`:
    /// those recorded in the result entries `recorded` (`None`: no result
    /// entry follows), the missing ones supplied.
    Results { calls: Span, recorded: Option<Span> },
}

impl MessageSource {
    /// The last entry the message was built from.
    fn last_entry(self) -> usize {
        match self {
            Self::Input(entry) | Self::Injected { entry, .. } => entry,
            Self::Assistant(span) => span.last,
            Self::Results { calls, recorded } => recorded.unwrap_or(calls).last,
        }
    }
}

/// A request's handle on the cache of the conversation it was built from.
#[derive(Debug, Clone)]
pub struct CacheRef<'a> {
    pub cache: &'a WireCache,
    /// The source of each of the request's messages, in order.
    pub sources: Vec<MessageSource>,
}

/// The serialised messages of one conversation, per wire format (a pod may
/// summarise with one provider and talk with another).
#[derive(Default)]
pub struct WireCache(Mutex<Vec<Prefix>>);

impl fmt::Debug for WireCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WireCache")
    }
}

impl WireCache {
    /// Drops every message built from entry `len` or a later one: those
    /// entries are being taken out of the conversation.
    pub fn forget_from(&self, len: usize) {
        // A poisoned lock is never read again (see `write_messages`).
        if let Ok(mut prefixes) = self.0.lock() {
            for prefix in prefixes.iter_mut() {
                let keep = prefix
                    .messages
                    .iter()
                    .position(|m| m.source.last_entry() >= len)
                    .unwrap_or(prefix.messages.len());
                prefix.truncate(keep);
            }
        }
    }
}

/// What a format has written so far: the role of its last API message
/// (`None`: none yet). Anthropic needs it to merge messages of one role.
pub(super) type State = Option<&'static str>;

/// One wire format's way of writing a message into a JSON array.
pub(super) trait WireFormat {
    /// Names the format's bytes in the cache.
    const NAME: &'static str;
    /// Appends `message`, which follows messages that left `state`, with
    /// whatever separates it from them; returns the state after it.
    fn write(
        message: &ChatMessage<'_>,
        state: State,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<State>;
}

/// The messages one format wrote for one conversation, in order.
struct Prefix {
    format: &'static str,
    messages: Vec<Kept>,
    bytes: Vec<u8>,
}

struct Kept {
    source: MessageSource,
    /// Where the message's bytes end in `Prefix::bytes`.
    end: usize,
    /// The state after the message.
    after: State,
}

impl Prefix {
    /// Keeps the first `count` messages.
    fn truncate(&mut self, count: usize) {
        self.messages.truncate(count);
        self.bytes
            .truncate(self.messages.last().map_or(0, |m| m.end));
    }
}

/// Appends the request's messages as `F` writes them, taking what its cache
/// kept and keeping what it did not; returns the state after the last.
pub(super) fn write_messages<F: WireFormat>(
    request: &ModelRequest<'_>,
    out: &mut Vec<u8>,
) -> serde_json::Result<State> {
    let cached = request
        .cache
        .as_ref()
        .filter(|c| c.sources.len() == request.messages.len());
    let Some(CacheRef { cache, sources }) = cached else {
        return write_all::<F>(&request.messages, out);
    };
    // A poisoned lock means a write panicked half-way: its bytes are not
    // trusted, nor written to again.
    let Ok(mut prefixes) = cache.0.lock() else {
        return write_all::<F>(&request.messages, out);
    };
    let at = match prefixes.iter().position(|p| p.format == F::NAME) {
        Some(at) => at,
        None => {
            prefixes.push(Prefix {
                format: F::NAME,
                messages: Vec::new(),
                bytes: Vec::new(),
            });
            prefixes.len() - 1
        }
    };
    let prefix = &mut prefixes[at];
    let same = prefix
        .messages
        .iter()
        .zip(sources)
        .take_while(|(kept, source)| kept.source == **source)
        .count();
    prefix.truncate(same);
    let mut state = prefix.messages.last().and_then(|m| m.after);
    for (message, source) in request.messages.iter().zip(sources).skip(same) {
        match F::write(message, state, &mut prefix.bytes) {
            Ok(after) => {
                state = after;
                let end = prefix.bytes.len();
                prefix.messages.push(Kept {
                    source: *source,
                    end,
                    after,
                });
            }
            Err(e) => {
                let count = prefix.messages.len();
                prefix.truncate(count);
                return Err(e);
            }
        }
    }
    out.extend_from_slice(&prefix.bytes);
    Ok(state)
}

fn write_all<F: WireFormat>(
    messages: &[ChatMessage<'_>],
    out: &mut Vec<u8>,
) -> serde_json::Result<State> {
    messages
        .iter()
        .try_fold(None, |state, message| F::write(message, state, out))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use proptest::prelude::*;
    use uuid::Uuid;

    use super::*;
    use crate::context::{Conversation, Prepared};
    use crate::input::Resolvers;
    use crate::protocol::{
        AssistantItem, InjectedItem, LogEntry, Segment, ToolResult, TurnEndReason,
    };
    use crate::provider::{anthropic, openai, ToolSpec};
    use crate::workspace::Workspace;

    type Write = fn(&str, &ModelRequest<'_>, &mut Vec<u8>) -> serde_json::Result<()>;
    const FORMATS: [(&str, Write); 2] = [
        ("openai", openai::write_body),
        ("anthropic", anthropic::write_body),
    ];

    /// The bodies of `prepared`'s request in both formats, written with
    /// the conversation's cache; each is checked against the one written
    /// without it, and parsed.
    fn bodies(prepared: Prepared<'_>, system: &str) -> Result<Vec<Vec<u8>>, TestCaseError> {
        let tools = [ToolSpec {
            name: "f".into(),
            description: "does f".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let request = prepared.request(system, Cow::Borrowed(&tools));
        let afresh = ModelRequest {
            cache: None,
            max_output_tokens: None,
            images: Vec::new(),
            ..request.clone()
        };
        let mut out = Vec::new();
        for (name, write) in FORMATS {
            let (mut cached, mut plain) = (Vec::new(), Vec::new());
            write("m", &request, &mut cached).unwrap();
            write("m", &afresh, &mut plain).unwrap();
            prop_assert_eq!(
                String::from_utf8_lossy(&cached),
                String::from_utf8_lossy(&plain),
                "{}",
                name
            );
            serde_json::from_slice::<serde_json::Value>(&cached)
                .map_err(|e| TestCaseError::fail(format!("{name}: not JSON: {e}")))?;
            out.push(cached);
        }
        Ok(out)
    }

    /// A made-up entry: the fields that change the request vary, the
    /// texts need escaping and may be blank (Anthropic drops blank text).
    #[derive(Debug, Clone)]
    enum Made {
        User(String),
        Text(String),
        Reasoning(String),
        Call(u8),
        Results(Vec<(u8, String, bool)>),
        Injected(Vec<String>),
        TurnEnd,
    }

    impl Made {
        fn entry(&self) -> LogEntry {
            let call_id = |id: &u8| format!("c{id}");
            match self {
                Made::User(text) => LogEntry::UserInput {
                    segments: vec![Segment::text(text.clone())],
                    at: LogEntry::now(),
                    turn_id: None,
                    request_id: None,
                    resolved: Default::default(),
                },
                Made::Text(text) => LogEntry::AssistantItems {
                    items: vec![AssistantItem::Text { text: text.clone() }],
                },
                Made::Reasoning(text) => LogEntry::AssistantItems {
                    items: vec![AssistantItem::Reasoning { text: text.clone() }],
                },
                Made::Call(id) => LogEntry::AssistantItems {
                    items: vec![AssistantItem::ToolCall {
                        call_id: call_id(id),
                        name: "f".into(),
                        arguments: serde_json::json!({ "id": id }),
                    }],
                },
                Made::Results(results) => LogEntry::ToolResults {
                    results: results
                        .iter()
                        .map(|(id, output, is_error)| ToolResult {
                            call_id: call_id(id),
                            output: output.clone(),
                            is_error: *is_error,
                        })
                        .collect(),
                },
                Made::Injected(texts) => LogEntry::HookInjectedItems {
                    items: texts
                        .iter()
                        .map(|text| InjectedItem {
                            source: "notify".into(),
                            text: text.clone(),
                        })
                        .collect(),
                },
                Made::TurnEnd => LogEntry::TurnEnd {
                    reason: TurnEndReason::Completed,
                    turn_id: None,
                    request_id: None,
                    usage: None,
                    error: None,
                },
            }
        }
    }

    fn text() -> impl Strategy<Value = String> {
        "[ab \"\\\\\n\t\u{1}é✓]{0,6}"
    }

    fn made() -> impl Strategy<Value = Made> {
        prop_oneof![
            text().prop_map(Made::User),
            text().prop_map(Made::Text),
            text().prop_map(Made::Reasoning),
            (0u8..4).prop_map(Made::Call),
            prop::collection::vec((0u8..4, text(), any::<bool>()), 0..3).prop_map(Made::Results),
            prop::collection::vec(text(), 0..3).prop_map(Made::Injected),
            Just(Made::TurnEnd),
        ]
    }

    /// What happens to a conversation: an entry is committed, or entries
    /// are tried with `with_pending` and taken back.
    #[derive(Debug, Clone)]
    enum Step {
        Commit(Made),
        Try(Vec<Made>),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => made().prop_map(Step::Commit),
            1 => prop::collection::vec(made(), 1..3).prop_map(Step::Try),
        ]
    }

    fn setup() -> (tempfile::TempDir, Workspace, Resolvers) {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let resolvers = Resolvers::for_workspace(&workspace);
        (dir, workspace, resolvers)
    }

    proptest! {
        /// However a conversation grows — messages appended, the last
        /// assistant message or results message growing, calls answered
        /// late or never, entries tried and taken back — every request
        /// written with the cache is byte for byte the one written afresh.
        #[test]
        fn bodies_written_with_the_cache_are_those_written_afresh(
            steps in prop::collection::vec((step(), any::<bool>()), 1..40),
            system in prop_oneof![Just(""), Just("sys")],
        ) {
            let (_dir, workspace, resolvers) = setup();
            let mut conversation = Conversation::new(Uuid::new_v4(), Vec::new());
            for (step, then_send) in steps {
                match step {
                    Step::Commit(made) => conversation.push(made.entry()),
                    Step::Try(made) => {
                        let pending: Vec<LogEntry> = made.iter().map(Made::entry).collect();
                        conversation.with_pending(&pending, Vec::new(), &workspace, &resolvers, |prepared| {
                            bodies(prepared, system)
                        })?;
                    }
                }
                // Not every step is followed by a request: the next one may
                // find entries in place of those taken back.
                if then_send {
                    bodies(conversation.prepare(&workspace, &resolvers), system)?;
                }
            }
            bodies(conversation.prepare(&workspace, &resolvers), system)?;
        }
    }

    /// The messages kept for `format`.
    fn kept(conversation: &Conversation, format: &str) -> usize {
        let prefixes = conversation.wire_cache().0.lock().unwrap();
        prefixes
            .iter()
            .find(|p| p.format == format)
            .map_or(0, |p| p.messages.len())
    }

    #[test]
    fn a_later_request_reuses_the_kept_bytes_and_only_those_still_true() {
        let (_dir, workspace, resolvers) = setup();
        let user = |text: &str| Made::User(text.into()).entry();
        let mut conversation = Conversation::new(Uuid::new_v4(), vec![user("one")]);
        bodies(conversation.prepare(&workspace, &resolvers), "").unwrap();
        conversation.push(Made::Text("two".into()).entry());
        bodies(conversation.prepare(&workspace, &resolvers), "").unwrap();
        // The last assistant message grows: it is written again. Its call
        // has no result yet: one is supplied.
        conversation.push(Made::Call(1).entry());
        bodies(conversation.prepare(&workspace, &resolvers), "").unwrap();
        for (name, _) in FORMATS {
            assert_eq!(kept(&conversation, name), 3, "{name}");
        }

        // Entries tried and taken back leave nothing of theirs behind: the
        // results message answered the call from one of them.
        let pending = [
            Made::Results(vec![(1, "out".into(), false)]).entry(),
            user("three"),
        ];
        conversation.with_pending(&pending, Vec::new(), &workspace, &resolvers, |prepared| {
            bodies(prepared, "").unwrap();
        });
        for (name, _) in FORMATS {
            assert_eq!(kept(&conversation, name), 2, "{name}");
        }
        for body in bodies(conversation.prepare(&workspace, &resolvers), "").unwrap() {
            let body = String::from_utf8_lossy(&body);
            assert!(
                !body.contains("three") && !body.contains("\"out\""),
                "{body}"
            );
        }

        // The kept bytes are what the next request sends: a mark put in
        // them shows up in its body.
        {
            let mut prefixes = conversation.wire_cache().0.lock().unwrap();
            for prefix in prefixes.iter_mut() {
                let at = prefix.bytes.windows(3).position(|w| w == b"one").unwrap();
                prefix.bytes[at..at + 3].copy_from_slice(b"ONE");
            }
        }
        conversation.push(Made::Results(vec![(1, "out".into(), false)]).entry());
        let request = conversation
            .prepare(&workspace, &resolvers)
            .request("", Cow::Borrowed(&[]));
        for (name, write) in FORMATS {
            let mut body = Vec::new();
            write("m", &request, &mut body).unwrap();
            let body = String::from_utf8(body).unwrap();
            assert!(
                body.contains("ONE") && body.contains("\"out\""),
                "{name}: {body}"
            );
        }
    }
}
