//! Screens drawn over the conversation that take the keys while they are
//! open: the help, the session picker, the rewind picker. Each says what a key did; the app
//! carries it out, so an overlay never talks to the pod itself.

use crossterm::event::{KeyCode, KeyEvent};

use crate::protocol::{in_tree_order, SessionInfo, TreeRow};
use crate::tui::conversation::InputMark;

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// Every key, command and token; `scroll` is the first row shown.
    Help {
        scroll: usize,
    },
    Sessions(SessionPicker),
    Rewind(RewindPicker),
    /// `/agents`: the child pods, and the way back to the parent.
    Agents(crate::tui::agents::AgentPicker),
}

/// The session's user messages, newest first (Esc Esc): choose one, then
/// what to take back to just before it.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindPicker {
    pub inputs: Vec<InputMark>,
    pub selected: usize,
    /// A message is chosen; the keys now pick files, conversation or both.
    pub choosing: bool,
}

/// The earlier sessions, newest first, as `list_sessions` gave them.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionPicker {
    /// In the order the picker draws them: each rewind and fork under the
    /// session it came from.
    pub sessions: Vec<SessionInfo>,
    /// One per session, in the same order: where it sits in the tree.
    pub rows: Vec<TreeRow>,
    pub selected: usize,
    /// The pod's workspace: a session of another one is resumed only once
    /// the user has seen that and pressed the key again.
    pub workspace: Option<String>,
    /// The selected session is another workspace's and the user was told.
    pub confirming: bool,
}

impl SessionPicker {
    pub fn new(sessions: Vec<SessionInfo>, workspace: Option<String>) -> SessionPicker {
        let (sessions, rows) = in_tree_order(sessions);
        let selected = sessions.iter().position(|s| s.current).unwrap_or(0);
        SessionPicker {
            sessions,
            rows,
            selected,
            workspace,
            confirming: false,
        }
    }

    /// The selected session's workspace when it is not the pod's.
    pub fn foreign<'a>(&self, s: &'a SessionInfo) -> Option<&'a str> {
        let theirs = s.workspace.as_deref()?;
        (Some(theirs) != self.workspace.as_deref()).then_some(theirs)
    }
}

/// What a key did to an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing for the app to do (a move, a scroll, an unbound key).
    None,
    Close,
    /// Make this session current.
    Resume(String),
    /// Make this session current, then fork it.
    Fork(String),
    /// Switch the view into this child pod (its full name).
    OpenAgent(String),
    /// Switch the view back to the pod it came from.
    BackToParent,
    /// Rewind to just before the message at `seq`.
    Rewind {
        seq: u64,
        files: bool,
        conversation: bool,
    },
}

impl Overlay {
    pub fn on_key(&mut self, key: KeyEvent, page: usize) -> Action {
        match self {
            Overlay::Help { scroll } => {
                match key.code {
                    KeyCode::Esc | KeyCode::Char('q' | '?') | KeyCode::Enter => {
                        return Action::Close
                    }
                    KeyCode::Up => *scroll = scroll.saturating_sub(1),
                    KeyCode::Down => *scroll += 1,
                    KeyCode::PageUp => *scroll = scroll.saturating_sub(page),
                    KeyCode::PageDown => *scroll += page,
                    KeyCode::Home => *scroll = 0,
                    _ => {}
                }
                Action::None
            }
            Overlay::Sessions(picker) => picker.on_key(key),
            Overlay::Rewind(picker) => picker.on_key(key),
            Overlay::Agents(picker) => {
                if move_selection(&mut picker.selected, picker.rows.len(), key.code) {
                    return Action::None;
                }
                match key.code {
                    KeyCode::Esc | KeyCode::Char('q') => Action::Close,
                    KeyCode::Enter => match picker.rows.get(picker.selected) {
                        Some(crate::tui::agents::Row::Back(_)) => Action::BackToParent,
                        Some(crate::tui::agents::Row::Child(agent)) => {
                            Action::OpenAgent(agent.name.clone())
                        }
                        None => Action::Close,
                    },
                    _ => Action::None,
                }
            }
        }
    }
}

/// Moves a list's selection (of `n` rows) for ↑, ↓, Home and End; `false`
/// for any other key.
fn move_selection(selected: &mut usize, n: usize, code: KeyCode) -> bool {
    match code {
        KeyCode::Up => *selected = selected.saturating_sub(1),
        KeyCode::Down => *selected = (*selected + 1).min(n.saturating_sub(1)),
        KeyCode::Home => *selected = 0,
        KeyCode::End => *selected = n.saturating_sub(1),
        _ => return false,
    }
    true
}

impl RewindPicker {
    /// The picker over `inputs` (oldest first, as the conversation keeps
    /// them), showing the newest first.
    pub fn new(inputs: &[InputMark]) -> Self {
        Self {
            inputs: inputs.iter().rev().cloned().collect(),
            selected: 0,
            choosing: false,
        }
    }

    fn on_key(&mut self, key: KeyEvent) -> Action {
        let n = self.inputs.len();
        if self.choosing {
            let (files, conversation) = match key.code {
                KeyCode::Char('f') => (true, false),
                KeyCode::Char('c') => (false, true),
                KeyCode::Char('b') | KeyCode::Enter => (true, true),
                KeyCode::Esc => {
                    self.choosing = false;
                    return Action::None;
                }
                _ => return Action::None,
            };
            return match self.inputs.get(self.selected) {
                Some(mark) => Action::Rewind {
                    seq: mark.seq,
                    files,
                    conversation,
                },
                None => Action::Close,
            };
        }
        if move_selection(&mut self.selected, n, key.code) {
            return Action::None;
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return Action::Close,
            KeyCode::Enter if n > 0 => self.choosing = true,
            _ => {}
        }
        Action::None
    }
}

impl SessionPicker {
    fn on_key(&mut self, key: KeyEvent) -> Action {
        let confirmed = std::mem::take(&mut self.confirming);
        if move_selection(&mut self.selected, self.sessions.len(), key.code) {
            return Action::None;
        }
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return Action::Close,
            KeyCode::Enter | KeyCode::Char('f') => {
                let Some(s) = self.sessions.get(self.selected) else {
                    return Action::Close;
                };
                if self.foreign(s).is_some() && !confirmed {
                    self.confirming = true;
                    return Action::None;
                }
                let id = s.session_id.to_string();
                return if key.code == KeyCode::Enter {
                    Action::Resume(id)
                } else {
                    Action::Fork(id)
                };
            }
            _ => {}
        }
        Action::None
    }
}
