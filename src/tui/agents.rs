//! Child pods as the TUI shows them (protocol.md "Child pods"): a band
//! above the composer with each child's state, waiting approvals and usage,
//! and the tree's usage, from the parent's `status.agents`; and the picker
//! `/agents` opens, which switches the view into a child and back.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::protocol::{AgentStatus, PodState, Status};
use crate::safe_text;

/// The most children drawn a row each; the rest are counted on one line.
const MAX_ROWS: usize = 4;

/// The band's lines: none while the pod has no children.
pub fn lines(status: &Status, width: u16) -> Vec<Line<'static>> {
    if status.agents.is_empty() {
        return Vec::new();
    }
    let dim = Style::new().add_modifier(Modifier::DIM);
    let mut lines = vec![Line::from(vec![
        Span::styled(
            format!("  Agents {}", status.agents.len()),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                " · tree {} · /agents opens one",
                crate::protocol::tokens::usage_line(&status.tree_usage)
            ),
            dim,
        ),
    ])];
    let room = usize::from(width).saturating_sub(4);
    for agent in status.agents.iter().take(MAX_ROWS) {
        let (state, style) = state(agent);
        let text = format!(
            "{} {state} · {}",
            safe_text::line(&agent.name),
            crate::protocol::tokens::usage_line(&agent.usage)
        );
        let mut text: String = text.chars().take(room).collect();
        if text.chars().count() == room && room > 0 {
            text.pop();
            text.push('…');
        }
        lines.push(Line::styled(format!("  ⎇ {text}"), style));
    }
    let hidden = status.agents.len().saturating_sub(MAX_ROWS);
    if hidden > 0 {
        lines.push(Line::styled(format!("    … {hidden} more"), dim));
    }
    lines
}

/// A child's state in words, and how it stands out: one waiting for an
/// approval says how many, and is the one to look at.
pub fn state(agent: &AgentStatus) -> (String, Style) {
    match (agent.state, agent.pending_approvals.len()) {
        (_, n) if n > 0 => (
            format!("waiting for {n} approval{}", if n == 1 { "" } else { "s" }),
            Style::new().fg(Color::Yellow),
        ),
        (PodState::Idle, _) => ("idle".into(), Style::new().add_modifier(Modifier::DIM)),
        (state, _) => (state.as_str().into(), Style::new().fg(Color::Cyan)),
    }
}

/// One row of the `/agents` picker.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// Back to the pod this view came from.
    Back(String),
    Child(AgentStatus),
}

/// What `/agents` shows: the pod the view came from (when it is a child's),
/// then the children of the pod in view.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPicker {
    pub rows: Vec<Row>,
    pub selected: usize,
}

impl AgentPicker {
    pub fn new(parent: Option<&str>, children: &[AgentStatus]) -> AgentPicker {
        let mut rows: Vec<Row> = parent
            .map(|p| Row::Back(p.to_owned()))
            .into_iter()
            .collect();
        rows.extend(children.iter().cloned().map(Row::Child));
        AgentPicker { rows, selected: 0 }
    }
}

/// The child of `children` that `given` names: its full name, or its slug
/// (`tests` for `calc-3f2a9c.tests`).
pub fn find<'a>(children: &'a [AgentStatus], given: &str) -> Option<&'a AgentStatus> {
    children.iter().find(|a| a.name == given).or_else(|| {
        children.iter().find(|a| {
            a.name
                .rsplit_once('.')
                .is_some_and(|(_, slug)| slug == given)
        })
    })
}
