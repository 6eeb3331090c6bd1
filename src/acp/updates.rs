//! The pod's log entries and hints as ACP `session/update`s.
//!
//! Pure: [`Updates`] remembers only what it must to say each thing once —
//! which tool calls the editor has been told of, and whether a text block
//! already reached it as deltas — and returns the updates (the
//! `params.update` of a `session/update`) for the caller to send. They are
//! built as the SDK's own types, straight from the entries: a `session/load`
//! of 10,000 entries makes each update once, not a JSON tree first.

use std::collections::{HashMap, HashSet};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;

use crate::protocol::{AssistantItem, LogEntry, SegmentView};

/// The tool that sets the plan: its arguments are the plan.
const UPDATE_PLAN: &str = "update_plan";

/// How entries become updates: live (the text already streamed as
/// deltas) or replayed (`session/load`: every entry says it all).
#[derive(Debug, Default)]
pub struct Updates {
    /// Tool calls the editor has a `tool_call` for: later news is an update.
    announced: HashSet<String>,
    /// Tool calls whose arguments are streaming: the tool's name and the
    /// arguments' JSON so far. A call is announced when they are whole, so
    /// that its `tool_call` has its title (the command, the path): an
    /// editor that draws a `tool_call` alone would otherwise show "bash".
    streaming: HashMap<String, (String, String)>,
}

impl Updates {
    /// A hint of the running turn: deltas become chunks, a tool call whose
    /// arguments have streamed whole is announced with its title (the
    /// editor shows it pending), before the model's reply is committed.
    pub fn hint(&mut self, event: &crate::protocol::Event) -> Option<SessionUpdate> {
        use crate::protocol::Event;
        match event {
            Event::TextDelta { text } if !text.is_empty() => {
                Some(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            Event::ReasoningDelta { text } if !text.is_empty() => {
                Some(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            Event::ToolCallStart { call_id, name } => {
                self.streaming
                    .insert(call_id.clone(), (name.clone(), String::new()));
                None
            }
            Event::ToolCallArgsDelta { call_id, delta } => {
                if let Some((_, json)) = self.streaming.get_mut(call_id) {
                    json.push_str(delta);
                }
                None
            }
            Event::ToolCallDone { call_id } => {
                let (name, json) = self.streaming.remove(call_id)?;
                // Arguments that are not JSON are the model's mistake: the
                // tool refuses them, and the call is still announced.
                let arguments: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                if name == UPDATE_PLAN || !self.announced.insert(call_id.clone()) {
                    return None;
                }
                let mut call = ToolCall::new(call_id.clone(), title(&name, &arguments))
                    .kind(kind(&name))
                    .status(ToolCallStatus::Pending);
                if !arguments.is_null() {
                    call = call.raw_input(arguments);
                }
                Some(SessionUpdate::ToolCall(call))
            }
            Event::Retry { .. } => {
                // The retried call streams its calls again.
                self.streaming.clear();
                None
            }
            _ => None,
        }
    }

    /// One committed entry. `live`: its text came as deltas already, and a
    /// user input carrying one of `ours` (a run this editor sent) is not
    /// echoed back; replayed, everything is said.
    pub fn entry(
        &mut self,
        entry: &LogEntry,
        live: bool,
        ours: &HashSet<String>,
    ) -> Vec<SessionUpdate> {
        match entry {
            LogEntry::UserInput {
                segments,
                request_id,
                ..
            } => {
                if live && request_id.as_ref().is_some_and(|id| ours.contains(id)) {
                    return Vec::new();
                }
                segments
                    .iter()
                    .filter_map(|segment| user_text(segment.view()))
                    .map(|text| SessionUpdate::UserMessageChunk(chunk(text)))
                    .collect()
            }
            LogEntry::AssistantItems { items } => items
                .iter()
                .filter_map(|item| self.assistant_item(item, live))
                .collect(),
            LogEntry::ApprovalDecision {
                call_id,
                decision: crate::protocol::Decision::Deny,
                ..
            } => vec![status(call_id, ToolCallStatus::Failed)],
            LogEntry::ToolResults { results } => results
                .iter()
                .map(|result| {
                    let state = if result.is_error {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        result.call_id.clone(),
                        ToolCallUpdateFields::new()
                            .status(state)
                            .content(vec![ToolCallContent::from(text(&result.output))]),
                    ))
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    fn assistant_item(&mut self, item: &AssistantItem, live: bool) -> Option<SessionUpdate> {
        match item {
            AssistantItem::Text { text } if !live => {
                Some(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            AssistantItem::Reasoning { text } if !live => {
                Some(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            AssistantItem::Text { .. } | AssistantItem::Reasoning { .. } => None,
            AssistantItem::ToolCall {
                call_id,
                name,
                arguments,
            } => {
                if name == UPDATE_PLAN {
                    if let Some(plan) = plan(arguments) {
                        self.announced.insert(call_id.clone());
                        return Some(SessionUpdate::Plan(plan));
                    }
                }
                let locations: Vec<ToolCallLocation> = arguments
                    .get("path")
                    .and_then(Value::as_str)
                    .map(ToolCallLocation::new)
                    .into_iter()
                    .collect();
                let content: Vec<ToolCallContent> =
                    diff(name, arguments).map(Into::into).into_iter().collect();
                let title = title(name, arguments);
                if self.announced.insert(call_id.clone()) {
                    return Some(SessionUpdate::ToolCall(
                        ToolCall::new(call_id.clone(), title)
                            .kind(kind(name))
                            .status(ToolCallStatus::Pending)
                            .raw_input(arguments.clone())
                            .locations(locations)
                            .content(content),
                    ));
                }
                let mut fields = ToolCallUpdateFields::new()
                    .title(title)
                    .kind(kind(name))
                    .raw_input(arguments.clone());
                if !locations.is_empty() {
                    fields = fields.locations(locations);
                }
                if !content.is_empty() {
                    fields = fields.content(content);
                }
                Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id.clone(),
                    fields,
                )))
            }
        }
    }
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

/// A text chunk, of whichever of the three message kinds wraps it.
fn chunk(content: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(content)))
}

fn status(call_id: &str, status: ToolCallStatus) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    ))
}

/// What a user's segment reads as in the editor: its text, a file as
/// `@path`, an image by its name.
fn user_text(segment: SegmentView<'_>) -> Option<String> {
    match segment {
        SegmentView::Text { text } | SegmentView::Paste { text, .. } => Some(text.to_owned()),
        SegmentView::FileRef { path } => Some(format!("@{path}")),
        SegmentView::KnowledgeRef { slug } => Some(format!("#{slug}")),
        SegmentView::WorkflowInvoke { slug, args } => Some(format!("/{slug} {args}")),
        SegmentView::Image { name, .. } => Some(format!("[image {}]", name.unwrap_or("pasted"))),
        SegmentView::Unknown { .. } => None,
    }
}

/// ACP's kind of a pod tool: the icon an editor shows.
pub(super) fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_dir" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "glob" | "grep" => ToolKind::Search,
        "bash" => ToolKind::Execute,
        "web_fetch" => ToolKind::Fetch,
        UPDATE_PLAN => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// One line that says what the call does: the command, or the tool and
/// the path it touches.
fn title(tool: &str, arguments: &Value) -> String {
    let field = |name| arguments.get(name).and_then(Value::as_str);
    match (
        field("command"),
        field("path"),
        field("pattern"),
        field("url"),
    ) {
        (Some(command), ..) => command.to_owned(),
        (None, Some(path), ..) => format!("{tool} {path}"),
        (None, None, Some(pattern), _) => format!("{tool} {pattern}"),
        (None, None, None, Some(url)) => format!("{tool} {url}"),
        _ => tool.to_owned(),
    }
}

/// The change a file tool asks for, as ACP's diff: an edit's old and new
/// text, a write's whole new content.
fn diff(tool: &str, arguments: &Value) -> Option<Diff> {
    let field = |name| arguments.get(name).and_then(Value::as_str);
    let path = field("path")?;
    match tool {
        "edit_file" => {
            Some(Diff::new(path, field("new_string")?).old_text(field("old_string")?.to_owned()))
        }
        "write_file" => Some(Diff::new(path, field("content")?)),
        _ => None,
    }
}

/// `update_plan`'s arguments as ACP's plan, or `None` when they are not a
/// plan (the tool will refuse them, and say why in its result).
fn plan(arguments: &Value) -> Option<Plan> {
    let items = arguments.get("items")?.as_array()?;
    let entries = items
        .iter()
        .map(|item| {
            let status = match item.get("status")?.as_str()? {
                "pending" => PlanEntryStatus::Pending,
                "in_progress" => PlanEntryStatus::InProgress,
                "done" => PlanEntryStatus::Completed,
                _ => return None,
            };
            Some(PlanEntry::new(
                item.get("text")?.as_str()?,
                PlanEntryPriority::Medium,
                status,
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Plan::new(entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Event, Segment, ToolResult};
    use serde_json::json;

    fn ours() -> HashSet<String> {
        HashSet::from(["acp-1".to_owned()])
    }

    /// The updates as the editor reads them.
    fn wire(updates: impl IntoIterator<Item = SessionUpdate>) -> Vec<Value> {
        updates
            .into_iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect()
    }

    #[test]
    fn live_text_comes_from_deltas_and_replayed_text_from_entries() {
        let mut live = Updates::default();
        let delta = wire(live.hint(&Event::TextDelta { text: "hi".into() }));
        assert_eq!(delta[0]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(delta[0]["content"]["text"], "hi");
        let items = LogEntry::AssistantItems {
            items: vec![AssistantItem::Text { text: "hi".into() }],
        };
        assert!(live.entry(&items, true, &ours()).is_empty());
        let replayed = wire(Updates::default().entry(&items, false, &ours()));
        assert_eq!(replayed[0]["content"]["text"], "hi");
    }

    #[test]
    fn only_other_clients_input_is_echoed_live() {
        let input = |request_id: &str| LogEntry::UserInput {
            segments: vec![Segment::text("hello"), Segment::file_ref("src/a.rs")],
            at: String::new(),
            turn_id: None,
            request_id: Some(request_id.into()),
            resolved: Default::default(),
        };
        let mut updates = Updates::default();
        assert!(updates.entry(&input("acp-1"), true, &ours()).is_empty());
        let theirs = wire(updates.entry(&input("send-1"), true, &ours()));
        let texts: Vec<_> = theirs.iter().map(|u| &u["content"]["text"]).collect();
        assert_eq!(texts, ["hello", "@src/a.rs"]);
        assert_eq!(theirs[0]["sessionUpdate"], "user_message_chunk");
    }

    #[test]
    fn an_edit_is_announced_with_its_location_and_diff_then_settled() {
        let mut updates = Updates::default();
        assert!(updates
            .hint(&Event::ToolCallStart {
                call_id: "c1".into(),
                name: "edit_file".into(),
            })
            .is_none());
        for delta in [
            r#"{"path": "a.txt", "#,
            r#""old_string": "x", "new_string": "y"}"#,
        ] {
            assert!(updates
                .hint(&Event::ToolCallArgsDelta {
                    call_id: "c1".into(),
                    delta: delta.into(),
                })
                .is_none());
        }
        // Announced once its arguments are whole: with its title.
        let started = wire(updates.hint(&Event::ToolCallDone {
            call_id: "c1".into(),
        }));
        assert_eq!(started[0]["sessionUpdate"], "tool_call");
        assert_eq!(started[0]["kind"], "edit");
        assert_eq!(started[0]["title"], "edit_file a.txt");
        let call = LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: "c1".into(),
                name: "edit_file".into(),
                arguments: json!({"path": "a.txt", "old_string": "x", "new_string": "y"}),
            }],
        };
        let update = &wire(updates.entry(&call, true, &ours()))[0];
        assert_eq!(update["sessionUpdate"], "tool_call_update");
        assert_eq!(update["locations"], json!([{"path": "a.txt"}]));
        assert_eq!(
            update["content"][0],
            json!({"type": "diff", "path": "a.txt", "oldText": "x", "newText": "y"})
        );
        let failed = LogEntry::ToolResults {
            results: vec![ToolResult {
                call_id: "c1".into(),
                output: "denied".into(),
                is_error: true,
            }],
        };
        assert_eq!(
            wire(updates.entry(&failed, true, &ours()))[0]["status"],
            "failed"
        );
    }

    #[test]
    fn a_replayed_call_is_announced_whole() {
        let call = LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: "c1".into(),
                name: "write_file".into(),
                arguments: json!({"path": "a.txt", "content": "new"}),
            }],
        };
        let update = &wire(Updates::default().entry(&call, false, &ours()))[0];
        assert_eq!(update["sessionUpdate"], "tool_call");
        assert_eq!(update["title"], "write_file a.txt");
        assert_eq!(update["kind"], "edit");
        assert_eq!(
            update["content"][0],
            // No `oldText`: a new file's whole content.
            json!({"type": "diff", "path": "a.txt", "newText": "new"})
        );
    }

    #[test]
    fn a_plan_call_is_the_plan() {
        let mut updates = Updates::default();
        let call = LogEntry::AssistantItems {
            items: vec![AssistantItem::ToolCall {
                call_id: "p".into(),
                name: "update_plan".into(),
                arguments: json!({"items": [{"text": "read", "status": "done"},
                                            {"text": "fix", "status": "in_progress"}]}),
            }],
        };
        let plan = &wire(updates.entry(&call, true, &ours()))[0];
        assert_eq!(plan["sessionUpdate"], "plan");
        assert_eq!(plan["entries"][0]["status"], "completed");
        assert_eq!(plan["entries"][1]["content"], "fix");
    }
}
