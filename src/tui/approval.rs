//! The approval panel's state: which pending request it shows, how far its
//! preview is scrolled, the message being typed for `N`, and the answers
//! sent and not yet confirmed.
//!
//! What is pending comes from the log (the conversation's
//! [`PendingApproval`]s); this only remembers what this client did about
//! it, so every attached client shows the same requests and one answered
//! anywhere disappears everywhere when its `approval_decision` arrives.

use std::collections::HashSet;

use crossterm::event::{KeyCode, KeyEvent};

use crate::protocol::{ApprovalMode, Decision, Method, Scope};
use crate::tui::conversation::PendingApproval;

#[derive(Debug, Default)]
pub struct ApprovalPanel {
    /// First preview row shown.
    pub scroll: usize,
    /// Preview rows on screen at the last draw, for paging.
    pub preview_rows: usize,
    /// The message for the model while `N` is being answered.
    pub message: Option<String>,
    /// Still arming (just appeared): its keys are drawn dim, and typing
    /// goes into the message.
    pub arming: bool,
    /// The pod would refuse `always` from this client (one over the
    /// network, the pod started without `--allow-remote-always`): `A` is
    /// neither offered nor taken, rather than offered and then refused.
    pub always_refused: bool,
    /// Calls this client answered whose decision has not arrived yet:
    /// hidden, so the next request shows at once.
    answered: HashSet<String>,
}

/// What a key did in the panel.
#[derive(Debug, Clone, PartialEq)]
pub enum PanelAction {
    None,
    /// Send this `approve`.
    Answer(Method),
}

impl ApprovalPanel {
    /// The request to show, and how many are waiting (this one included).
    pub fn current<'a>(
        &self,
        pending: &'a [PendingApproval],
    ) -> Option<(&'a PendingApproval, usize)> {
        let mut waiting = pending
            .iter()
            .filter(|p| !self.answered.contains(&p.call_id));
        let first = waiting.next()?;
        Some((first, 1 + waiting.count()))
    }

    /// Forgets everything: the view was rebuilt from a snapshot, which says
    /// afresh what is pending.
    pub fn reset(&mut self) {
        *self = Self {
            always_refused: self.always_refused,
            ..Self::default()
        };
    }

    /// Remembers that `call_id` was answered (the client waits for the
    /// pod's answer to that `approve`).
    pub fn sent(&mut self, call_id: String) {
        self.answered.insert(call_id);
        self.scroll = 0;
        self.message = None;
    }

    /// Forgets the answers whose calls are no longer pending (decided, or
    /// their turn ended): a later turn may reuse the call id (some
    /// providers number calls from `call_0` every turn), and its request
    /// must show, not pass for the one answered before.
    pub fn forget_settled(&mut self, pending: &[PendingApproval]) {
        self.answered
            .retain(|call_id| pending.iter().any(|p| &p.call_id == call_id));
    }

    /// Shows a call again whose answer the pod refused for a reason other
    /// than it not being pending.
    pub fn unanswer(&mut self, call_id: &str) {
        self.answered.remove(call_id);
    }

    /// A key pressed while `request` is shown.
    pub fn on_key(&mut self, key: KeyEvent, request: &PendingApproval) -> PanelAction {
        let page = self.preview_rows.saturating_sub(1).max(1);
        if let Some(message) = &mut self.message {
            match key.code {
                KeyCode::Enter => {
                    let message = std::mem::take(message);
                    self.message = None;
                    return PanelAction::Answer(answer(
                        request,
                        Decision::Deny,
                        None,
                        Some(message).filter(|m| !m.trim().is_empty()),
                    ));
                }
                KeyCode::Esc => self.message = None,
                KeyCode::Backspace => {
                    message.pop();
                }
                KeyCode::Char(c) => message.push(c),
                _ => {}
            }
            return PanelAction::None;
        }
        match key.code {
            KeyCode::Char('y') => {
                return PanelAction::Answer(answer(request, Decision::Allow, None, None))
            }
            KeyCode::Char('a') => {
                return PanelAction::Answer(answer(
                    request,
                    Decision::Allow,
                    Some(Scope::Session),
                    None,
                ))
            }
            KeyCode::Char('A') if !self.always_refused => {
                return PanelAction::Answer(answer(
                    request,
                    Decision::Allow,
                    Some(Scope::Always),
                    None,
                ))
            }
            // Esc is how every other prompt is dismissed: here it denies.
            KeyCode::Char('n') | KeyCode::Esc => {
                return PanelAction::Answer(answer(request, Decision::Deny, None, None))
            }
            KeyCode::Char('N') => self.message = Some(String::new()),
            KeyCode::Up => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::Down => self.scroll += 1,
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(page),
            KeyCode::PageDown => self.scroll += page,
            KeyCode::Home => self.scroll = 0,
            _ => {}
        }
        PanelAction::None
    }
}

fn answer(
    request: &PendingApproval,
    decision: Decision,
    scope: Option<Scope>,
    message: Option<String>,
) -> Method {
    Method::Approve {
        call_id: request.call_id.clone(),
        decision,
        scope,
        message,
    }
}

/// The mode Shift+Tab moves to: ask → edits → auto → read-only → ask.
pub fn next_mode(mode: ApprovalMode) -> ApprovalMode {
    match mode {
        ApprovalMode::Ask => ApprovalMode::Edits,
        ApprovalMode::Edits => ApprovalMode::Auto,
        ApprovalMode::Auto => ApprovalMode::ReadOnly,
        ApprovalMode::ReadOnly | ApprovalMode::Unknown => ApprovalMode::Ask,
    }
}

/// This client's name in `approval_decision.client`: `tui@HOSTNAME#PID`,
/// so that two TUIs on one machine are told apart in the transcript.
pub fn client_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("tui@{host}#{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_cycle_through_all_four() {
        let mut mode = ApprovalMode::Ask;
        let mut seen = vec![mode];
        for _ in 0..4 {
            mode = next_mode(mode);
            seen.push(mode);
        }
        assert_eq!(
            seen,
            [
                ApprovalMode::Ask,
                ApprovalMode::Edits,
                ApprovalMode::Auto,
                ApprovalMode::ReadOnly,
                ApprovalMode::Ask
            ]
        );
    }
}
