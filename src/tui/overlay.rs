//! Screens drawn over the conversation that take the keys while they are
//! open: the help, the session picker. Each says what a key did; the app
//! carries it out, so an overlay never talks to the pod itself.

use crossterm::event::{KeyCode, KeyEvent};

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// Every key, command and token; `scroll` is the first row shown.
    Help { scroll: usize },
}

/// What a key did to an overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing for the app to do (a move, a scroll, an unbound key).
    None,
    Close,
}

impl Overlay {
    pub fn on_key(&mut self, key: KeyEvent, page: usize) -> Action {
        let Overlay::Help { scroll } = self;
        match key.code {
            KeyCode::Esc | KeyCode::Char('q' | '?') | KeyCode::Enter => return Action::Close,
            KeyCode::Up => *scroll = scroll.saturating_sub(1),
            KeyCode::Down => *scroll += 1,
            KeyCode::PageUp => *scroll = scroll.saturating_sub(page),
            KeyCode::PageDown => *scroll += page,
            KeyCode::Home => *scroll = 0,
            _ => {}
        }
        Action::None
    }
}
