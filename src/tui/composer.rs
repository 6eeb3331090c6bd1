//! The input box: a multi-line buffer of atoms, input history, and the menu
//! completing the `/`, `@` and `#` token under the cursor.
//!
//! The buffer holds atoms rather than a string so that a paste stays one
//! typed unit from the moment it arrives until it is sent as a `paste`
//! segment: flattening it into text (and parsing a label back out) is the bug
//! the segment protocol exists to prevent.

use super::commands;
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
    /// An accepted `#name` completion, sent as a `knowledge_ref` segment.
    KnowledgeRef(String),
}

/// The token being completed and the candidates for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub token: Token,
    /// The `request_id` of the `list_completions` in flight; answers to
    /// older requests are stale and dropped.
    pub request_id: String,
    pub items: Vec<MenuItem>,
    pub selected: usize,
}

/// One candidate of a menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuItem {
    pub value: String,
    /// One line about it: a workflow's first line, a command's help.
    pub detail: Option<String>,
    /// A built-in command rather than something the pod listed.
    pub builtin: bool,
}

impl Completion {
    /// Sets the candidates: for a `/` token, the matching built-in commands
    /// first, then what the pod listed (workflows); for the others, what the
    /// pod listed. The selection stays on the same value when it can.
    fn set_items(&mut self, listed: Vec<MenuItem>) {
        let previous = self.items.get(self.selected).map(|i| i.value.clone());
        self.items = match self.token.kind {
            TokenKind::Command => commands::matching(&self.token.prefix)
                .map(|b| MenuItem {
                    value: b.name.to_owned(),
                    detail: Some(b.help.to_owned()),
                    builtin: true,
                })
                .chain(
                    listed
                        .into_iter()
                        .filter(|i| commands::builtin(&i.value).is_none()),
                )
                .collect(),
            TokenKind::File | TokenKind::Knowledge => listed,
        };
        self.selected = previous
            .and_then(|v| self.items.iter().position(|i| i.value == v))
            .unwrap_or(0);
    }
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
    /// The token position whose menu the user closed with Esc; it stays
    /// closed until another token is typed.
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
    /// pastes `paste`, accepted paths `file_ref`, accepted knowledge names
    /// `knowledge_ref`. Whitespace around the whole message is trimmed.
    pub fn segments(&self) -> Vec<Segment> {
        segments_of(&self.atoms)
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

    /// The token under the cursor that a menu completes, if any:
    ///
    /// - `/name` at the very start of the message: a command or workflow;
    /// - `@path` at the start of a word: a workspace path;
    /// - `#name` not after a word character (so `issue#3` and `C#` stay
    ///   text): a knowledge file.
    ///
    /// Inside a code span (after an odd number of backticks) nothing is a
    /// token, so `` `#include` `` and `` `@decorator` `` stay text.
    pub fn token(&self) -> Option<Token> {
        let word_start = self.atoms[..self.cursor]
            .iter()
            .rposition(|a| !matches!(a, Atom::Char(c) if !c.is_whitespace()))
            .map_or(0, |i| i + 1);
        let word: Vec<char> = self.atoms[word_start..self.cursor]
            .iter()
            .filter_map(|a| match a {
                Atom::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        let (offset, kind) = match word.first() {
            Some('/') if word_start == 0 => (0, TokenKind::Command),
            Some('@') => (0, TokenKind::File),
            _ => {
                let hash = word.iter().rposition(|c| *c == '#')?;
                let after_word_char = match hash.checked_sub(1) {
                    Some(prev) => is_word_char(word[prev]) || word[prev] == '#',
                    None => false,
                };
                if after_word_char {
                    return None;
                }
                (hash, TokenKind::Knowledge)
            }
        };
        let prefix: String = word[offset + 1..].iter().collect();
        if kind != TokenKind::File && !prefix.chars().all(commands::is_name_char) {
            return None;
        }
        let start = word_start + offset;
        let backticks = self.atoms[..start]
            .iter()
            .filter(|a| **a == Atom::Char('`'))
            .count();
        if backticks % 2 == 1 {
            return None;
        }
        Some(Token {
            kind,
            start,
            prefix,
        })
    }

    /// Brings the completion state in line with the buffer. Returns the
    /// token to ask the pod about when it changed (the caller sends
    /// `list_completions` with the new completion's `request_id`). The
    /// built-in commands matching a `/` token are listed at once.
    pub fn refresh_completion(&mut self, request_id: impl FnOnce() -> String) -> Option<Token> {
        let Some(token) = self.token() else {
            self.completion = None;
            self.dismissed = None;
            return None;
        };
        if self.dismissed == Some(token.start) {
            return None;
        }
        if let Some(c) = &self.completion {
            if c.token == token {
                return None;
            }
        }
        let mut completion = Completion {
            token: token.clone(),
            request_id: request_id(),
            items: Vec::new(),
            selected: 0,
        };
        completion.set_items(Vec::new());
        self.completion = Some(completion);
        Some(token)
    }

    /// Takes the pod's candidates if they answer the current request.
    pub fn set_completions(&mut self, request_id: &str, items: Vec<MenuItem>) -> bool {
        match &mut self.completion {
            Some(c) if c.request_id == request_id => {
                c.set_items(items);
                true
            }
            _ => false,
        }
    }

    /// True when a menu with candidates is showing.
    pub fn completion_open(&self) -> bool {
        self.completion
            .as_ref()
            .is_some_and(|c| !c.items.is_empty())
    }

    pub fn dismiss_completion(&mut self) {
        if let Some(c) = self.completion.take() {
            self.dismissed = Some(c.token.start);
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

    /// Accepts the selected candidate and says what it was.
    ///
    /// A directory (ending in `/`) stays text so that completion goes on
    /// inside it; a file becomes a `file_ref` atom and a knowledge name a
    /// `knowledge_ref` atom, each followed by a space; a command or workflow
    /// is written out as `/name ` for its arguments to follow.
    pub fn accept_completion(&mut self) -> Option<(TokenKind, MenuItem)> {
        let c = self.completion.take()?;
        let item = c.items.get(c.selected)?.clone();
        let chars = |sigil: char, s: &str| {
            std::iter::once(Atom::Char(sigil))
                .chain(s.chars().map(Atom::Char))
                .collect::<Vec<_>>()
        };
        let mut replacement = match c.token.kind {
            TokenKind::File if item.value.ends_with('/') => chars('@', &item.value),
            TokenKind::File => vec![Atom::FileRef(item.value.clone())],
            TokenKind::Knowledge => vec![Atom::KnowledgeRef(item.value.clone())],
            TokenKind::Command => chars('/', &item.value),
        };
        let continues = c.token.kind == TokenKind::File && item.value.ends_with('/');
        let next_is_space = matches!(self.atoms.get(self.cursor), Some(Atom::Char(' ')));
        if !continues && !next_is_space {
            replacement.push(Atom::Char(' '));
        }
        let added = replacement.len();
        self.atoms.splice(c.token.start..self.cursor, replacement);
        self.cursor = c.token.start + added;
        Some((c.token.kind, item))
    }

    /// The message as a command line when it starts with `/name` (a name of
    /// command characters, followed by whitespace or nothing): the name,
    /// its arguments (the rest of the first line up to anything that is not
    /// typed text, trimmed) and the segments of everything after them.
    /// `//…` and `/etc/hosts …` are not command lines.
    pub fn command_line(&self) -> Option<CommandLine> {
        if self.atoms.first() != Some(&Atom::Char('/')) {
            return None;
        }
        let mut i = 1;
        let mut name = String::new();
        while let Some(Atom::Char(c)) = self.atoms.get(i) {
            if c.is_whitespace() {
                break;
            }
            if !commands::is_name_char(*c) {
                return None;
            }
            name.push(*c);
            i += 1;
        }
        if name.is_empty() {
            return None;
        }
        let mut args = String::new();
        while let Some(Atom::Char(c)) = self.atoms.get(i) {
            if *c == '\n' {
                break;
            }
            args.push(*c);
            i += 1;
        }
        Some(CommandLine {
            name,
            args: args.trim().to_owned(),
            rest: segments_of(&self.atoms[i..]),
        })
    }
}

/// What kind of name a token completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// `/`: a built-in command or a workflow.
    Command,
    /// `@`: a workspace path.
    File,
    /// `#`: a knowledge file.
    Knowledge,
}

/// A token being typed: its kind, the index of its sigil and the text after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub prefix: String,
}

/// A message that starts with `/name`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandLine {
    pub name: String,
    pub args: String,
    /// The segments after the first line's text (further lines, pastes,
    /// references).
    pub rest: Vec<Segment>,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn segments_of(atoms: &[Atom]) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut text = String::new();
    for atom in atoms {
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
            Atom::KnowledgeRef(slug) => {
                flush_text(&mut out, &mut text);
                out.push(Segment::knowledge_ref(slug.clone()));
            }
        }
    }
    flush_text(&mut out, &mut text);
    trim_ends(&mut out);
    out
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
