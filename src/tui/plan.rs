//! The model's plan, as the TUI shows it above the composer: the items of
//! the latest `update_plan` call in the view (the call is the record; see
//! `tools::plan`). Expanded it is a checklist; collapsed (Ctrl+T), one line
//! saying how far it got.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::conversation::{BlockKind, Conversation};
use crate::safe_text;

/// The most item rows drawn; the rest are counted on one more line.
const MAX_ROWS: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanItem {
    pub text: String,
    /// `pending`, `in_progress`, `done` (anything else shows as pending).
    pub status: String,
}

/// The latest plan in the view, if the model made one — until a message
/// after it once it is finished: a plan whose every item is done was for
/// the turn that did it, and would only crowd the next ones' composer.
pub fn latest(conversation: &Conversation) -> Option<Vec<PlanItem>> {
    let mut asked_since = false;
    for block in conversation.blocks().iter().rev() {
        match &block.kind {
            BlockKind::User { .. } => asked_since = true,
            BlockKind::Tool(tool) if tool.name == crate::protocol::tools::UPDATE_PLAN.name => {
                let refused = tool.result.as_ref().is_some_and(|r| r.is_error);
                let Some(items) = (!refused).then(|| items(&tool.arguments)).flatten() else {
                    continue;
                };
                let finished = items.iter().all(|i| i.status == "done");
                return (!(finished && asked_since)).then_some(items);
            }
            _ => {}
        }
    }
    None
}

fn items(arguments: &Value) -> Option<Vec<PlanItem>> {
    let items = arguments.get("items")?.as_array()?;
    Some(
        items
            .iter()
            .map(|item| PlanItem {
                text: item["text"].as_str().unwrap_or_default().to_owned(),
                status: item["status"].as_str().unwrap_or("pending").to_owned(),
            })
            .collect(),
    )
}

/// The plan's lines at `width`: a header, then (expanded) an item a row.
pub fn lines(items: &[PlanItem], expanded: bool, width: u16) -> Vec<Line<'static>> {
    let dim = Style::new().add_modifier(Modifier::DIM);
    let done = items.iter().filter(|i| i.status == "done").count();
    let hint = if expanded {
        "Ctrl+T hides it"
    } else {
        "Ctrl+T shows it"
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(
            format!("  Plan {done}/{} done", items.len()),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!(" · {hint}"), dim),
    ])];
    if !expanded {
        return lines;
    }
    // Start so that the item in progress is on screen.
    let current = items
        .iter()
        .position(|i| i.status == "in_progress")
        .unwrap_or(0);
    let start = current
        .saturating_sub(MAX_ROWS / 2)
        .min(items.len().saturating_sub(MAX_ROWS));
    let room = usize::from(width).saturating_sub(6);
    for item in items.iter().skip(start).take(MAX_ROWS) {
        let (mark, style) = match item.status.as_str() {
            "done" => ("✓", dim),
            "in_progress" => ("▸", Style::new().fg(Color::Cyan)),
            _ => ("○", Style::new()),
        };
        let text = safe_text::line(&item.text);
        let mut text: String = text.chars().take(room).collect();
        if text.chars().count() == room && room > 0 {
            text.pop();
            text.push('…');
        }
        lines.push(Line::styled(format!("  {mark} {text}"), style));
    }
    let hidden = items.len().saturating_sub(MAX_ROWS);
    if hidden > 0 {
        lines.push(Line::styled(format!("    … {hidden} more"), dim));
    }
    lines
}
