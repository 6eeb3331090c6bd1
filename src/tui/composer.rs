//! The input box: a multi-line buffer of atoms, input history and the state
//! of `@` path completion.
//!
//! The buffer holds atoms rather than a string so that a paste stays one
//! typed unit from the moment it arrives until it is sent as a `paste`
//! segment: flattening it into text (and parsing a label back out) is the bug
//! the segment protocol exists to prevent.

use crate::protocol::Segment;

/// One unit of the input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Atom {
    Char(char),
    /// A bracketed paste, shown as its label and sent as a `paste` segment.
    Paste {
        id: u64,
        text: String,
    },
    /// An accepted `@path` completion, sent as a `file_ref` segment.
    FileRef(String),
}

/// The `@` token being completed and the pod's answer for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Index of the `@` atom.
    pub start: usize,
    /// The text after `@` the candidates were asked for.
    pub prefix: String,
    /// The `request_id` of the `list_completions` in flight; answers to
    /// older requests are stale and dropped.
    pub request_id: String,
    pub items: Vec<String>,
    pub selected: usize,
}

#[derive(Debug, Default)]
pub struct Composer {
    atoms: Vec<Atom>,
    cursor: usize,
    next_paste_id: u64,
    history: Vec<Vec<Atom>>,
    history_pos: Option<usize>,
    stash: Vec<Atom>,
    completion: Option<Completion>,
    /// The `@` position whose popup the user closed with Esc; it stays
    /// closed until another `@` token is typed.
    dismissed: Option<usize>,
}

/// The label a paste is shown as, in the composer and in the conversation.
pub fn paste_label(id: u64, text: &str) -> String {
    let chars = text.chars().count();
    let lines = text.lines().count().max(1);
    format!("[Clipboard #{id} | {chars} chars, {lines} lines]")
}

impl Composer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn atoms(&self) -> &[Atom] {
        &self.atoms
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.atoms.is_empty()
    }

    pub fn completion(&self) -> Option<&Completion> {
        self.completion.as_ref()
    }

    pub fn insert_char(&mut self, c: char) {
        self.insert(Atom::Char(c));
    }

    pub fn insert_newline(&mut self) {
        self.insert(Atom::Char('\n'));
    }

    /// Inserts a bracketed paste as one atom. Terminals send line breaks
    /// inside a paste as `\r`; they are normalised to `\n`.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        if text.is_empty() {
            return;
        }
        self.next_paste_id += 1;
        self.insert(Atom::Paste {
            id: self.next_paste_id,
            text,
        });
    }

    fn insert(&mut self, atom: Atom) {
        self.atoms.insert(self.cursor, atom);
        self.cursor += 1;
        self.history_pos = None;
    }

    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.atoms.remove(self.cursor);
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.atoms.len() {
            self.atoms.remove(self.cursor);
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.atoms.len());
    }

    fn line_start_of(&self, pos: usize) -> usize {
        self.atoms[..pos]
            .iter()
            .rposition(|a| *a == Atom::Char('\n'))
            .map_or(0, |i| i + 1)
    }

    fn line_end_of(&self, pos: usize) -> usize {
        self.atoms[pos..]
            .iter()
            .position(|a| *a == Atom::Char('\n'))
            .map_or(self.atoms.len(), |i| pos + i)
    }

    pub fn line_start(&mut self) {
        self.cursor = self.line_start_of(self.cursor);
    }

    pub fn line_end(&mut self) {
        self.cursor = self.line_end_of(self.cursor);
    }

    /// Deletes from the start of the line to the cursor.
    pub fn kill_to_line_start(&mut self) {
        let start = self.line_start_of(self.cursor);
        self.atoms.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Moves to the previous line; `false` when already on the first one
    /// (the caller then walks the history instead).
    pub fn up(&mut self) -> bool {
        let start = self.line_start_of(self.cursor);
        if start == 0 {
            return false;
        }
        let col = self.cursor - start;
        let prev_start = self.line_start_of(start - 1);
        self.cursor = (prev_start + col).min(start - 1);
        true
    }

    /// Moves to the next line; `false` when already on the last one.
    pub fn down(&mut self) -> bool {
        let end = self.line_end_of(self.cursor);
        if end == self.atoms.len() {
            return false;
        }
        let col = self.cursor - self.line_start_of(self.cursor);
        let next_end = self.line_end_of(end + 1);
        self.cursor = (end + 1 + col).min(next_end);
        true
    }

    /// Replaces the buffer with the previous history entry, keeping what was
    /// being typed so that walking back down restores it.
    pub fn history_prev(&mut self) {
        let pos = match self.history_pos {
            None if self.history.is_empty() => return,
            None => {
                self.stash = std::mem::take(&mut self.atoms);
                self.history.len() - 1
            }
            Some(0) => return,
            Some(p) => p - 1,
        };
        self.history_pos = Some(pos);
        self.atoms = self.history[pos].clone();
        self.cursor = self.atoms.len();
    }

    pub fn history_next(&mut self) {
        let Some(pos) = self.history_pos else { return };
        if pos + 1 < self.history.len() {
            self.history_pos = Some(pos + 1);
            self.atoms = self.history[pos + 1].clone();
        } else {
            self.history_pos = None;
            self.atoms = std::mem::take(&mut self.stash);
        }
        self.cursor = self.atoms.len();
    }

    /// Puts a message back (one the pod refused), cursor at its end.
    pub fn restore(&mut self, atoms: Vec<Atom>) {
        self.next_paste_id = atoms
            .iter()
            .filter_map(|a| match a {
                Atom::Paste { id, .. } => Some(*id),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        self.atoms = atoms;
        self.cursor = self.atoms.len();
        self.history_pos = None;
    }

    /// The buffer as plain text when it holds nothing but characters
    /// (commands like `/quit` are recognised from this).
    pub fn plain_text(&self) -> Option<String> {
        self.atoms
            .iter()
            .map(|a| match a {
                Atom::Char(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// The buffer as segments: runs of characters become `text` segments,
    /// pastes `paste`, accepted paths `file_ref`. Whitespace around the whole
    /// message is trimmed.
    pub fn segments(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut text = String::new();
        for atom in &self.atoms {
            match atom {
                Atom::Char(c) => text.push(*c),
                Atom::Paste { id, text: pasted } => {
                    flush_text(&mut out, &mut text);
                    out.push(Segment::paste(*id, pasted.clone()));
                }
                Atom::FileRef(path) => {
                    flush_text(&mut out, &mut text);
                    out.push(Segment::file_ref(path.clone()));
                }
            }
        }
        flush_text(&mut out, &mut text);
        trim_ends(&mut out);
        out
    }

    /// Clears the buffer after a send, remembering it in the history.
    pub fn finish_submit(&mut self) {
        let atoms = std::mem::take(&mut self.atoms);
        if self.history.last() != Some(&atoms) {
            self.history.push(atoms);
        }
        self.cursor = 0;
        self.next_paste_id = 0;
        self.history_pos = None;
        self.stash.clear();
        self.completion = None;
        self.dismissed = None;
    }

    /// The `@` token under the cursor: its position and the text after `@`.
    /// An `@` counts only at the start or after whitespace, so an e-mail
    /// address does not open the popup.
    pub fn at_token(&self) -> Option<(usize, String)> {
        let mut i = self.cursor;
        let mut prefix = Vec::new();
        while i > 0 {
            i -= 1;
            match &self.atoms[i] {
                Atom::Char('@') => {
                    let boundary =
                        i == 0 || matches!(&self.atoms[i - 1], Atom::Char(c) if c.is_whitespace());
                    if !boundary {
                        return None;
                    }
                    prefix.reverse();
                    return Some((i, prefix.into_iter().collect()));
                }
                Atom::Char(c) if !c.is_whitespace() => prefix.push(*c),
                _ => return None,
            }
        }
        None
    }

    /// Brings the completion state in line with the buffer. Returns the
    /// prefix to ask the pod about when it changed (the caller sends
    /// `list_completions` with `request_id`).
    pub fn refresh_completion(&mut self, request_id: impl FnOnce() -> String) -> Option<String> {
        let Some((start, prefix)) = self.at_token() else {
            self.completion = None;
            self.dismissed = None;
            return None;
        };
        if self.dismissed == Some(start) {
            return None;
        }
        if let Some(c) = &self.completion {
            if c.start == start && c.prefix == prefix {
                return None;
            }
        }
        self.completion = Some(Completion {
            start,
            prefix: prefix.clone(),
            request_id: request_id(),
            items: Vec::new(),
            selected: 0,
        });
        Some(prefix)
    }

    /// Takes the pod's candidates if they answer the current request.
    pub fn set_completions(&mut self, request_id: &str, items: Vec<String>) -> bool {
        match &mut self.completion {
            Some(c) if c.request_id == request_id => {
                c.items = items;
                c.selected = 0;
                true
            }
            _ => false,
        }
    }

    /// True when a popup with candidates is showing.
    pub fn completion_open(&self) -> bool {
        self.completion
            .as_ref()
            .is_some_and(|c| !c.items.is_empty())
    }

    pub fn dismiss_completion(&mut self) {
        if let Some(c) = self.completion.take() {
            self.dismissed = Some(c.start);
        }
    }

    pub fn move_completion(&mut self, down: bool) {
        if let Some(c) = &mut self.completion {
            let n = c.items.len();
            if n > 0 {
                c.selected = if down {
                    (c.selected + 1) % n
                } else {
                    (c.selected + n - 1) % n
                };
            }
        }
    }

    /// Accepts the selected candidate. A directory (ending in `/`) stays
    /// text so that completion goes on inside it; a file becomes a
    /// `file_ref` atom followed by a space.
    pub fn accept_completion(&mut self) {
        let Some(c) = self.completion.take() else {
            return;
        };
        let Some(path) = c.items.get(c.selected) else {
            return;
        };
        let mut replacement = Vec::new();
        if path.ends_with('/') {
            replacement.push(Atom::Char('@'));
            replacement.extend(path.chars().map(Atom::Char));
        } else {
            replacement.push(Atom::FileRef(path.clone()));
            replacement.push(Atom::Char(' '));
        }
        let added = replacement.len();
        self.atoms.splice(c.start..self.cursor, replacement);
        self.cursor = c.start + added;
    }
}

fn flush_text(out: &mut Vec<Segment>, text: &mut String) {
    if !text.is_empty() {
        out.push(Segment::text(std::mem::take(text)));
    }
}

/// Trims leading whitespace of a leading text segment and trailing
/// whitespace of a trailing one, dropping them if nothing is left.
fn trim_ends(segments: &mut Vec<Segment>) {
    use crate::protocol::SegmentView;
    if let Some(SegmentView::Text { text }) = segments.first().map(Segment::view) {
        let trimmed = text.trim_start().to_owned();
        if trimmed.is_empty() {
            segments.remove(0);
        } else {
            segments[0] = Segment::text(trimmed);
        }
    }
    if let Some(SegmentView::Text { text }) = segments.last().map(Segment::view) {
        let trimmed = text.trim_end().to_owned();
        let last = segments.len() - 1;
        if trimmed.is_empty() {
            segments.pop();
        } else {
            segments[last] = Segment::text(trimmed);
        }
    }
}
