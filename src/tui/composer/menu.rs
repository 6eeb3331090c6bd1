//! The menu completing the token under the cursor — `/` commands and
//! workflows, `@` paths, `#` knowledge — and the reading of a message as a
//! `/name args` command line.

use super::{segments_of, Atom, Composer};
use crate::protocol::Segment;
use crate::tui::commands;

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

impl Composer {
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

    /// The `@path` words typed out rather than chosen from the menu (so
    /// still text), outside code spans: what Enter asks the pod about
    /// before sending, so that a typed `@src/main.rs` is a file reference
    /// however fast it was typed. Sentence punctuation after the path is
    /// not part of it (`see @a.py.` names `a.py`).
    pub fn typed_file_refs(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut backticks = 0;
        let mut i = 0;
        while i < self.atoms.len() {
            let at_word_start =
                i == 0 || !matches!(self.atoms[i - 1], Atom::Char(c) if !c.is_whitespace());
            match self.atoms[i] {
                Atom::Char('`') => backticks += 1,
                Atom::Char('@') if at_word_start && backticks % 2 == 0 => {
                    let word: String = self.atoms[i + 1..]
                        .iter()
                        .map_while(|a| match a {
                            Atom::Char(c) if !c.is_whitespace() && *c != '`' => Some(*c),
                            _ => None,
                        })
                        .collect();
                    i += word.chars().count();
                    let path = word.trim_end_matches(TRAILING_PUNCTUATION);
                    if !path.is_empty() && !found.iter().any(|f| f == path) {
                        found.push(path.to_owned());
                    }
                }
                _ => {}
            }
            i += 1;
        }
        found
    }

    /// Turns each typed `@path` (as [`Self::typed_file_refs`] finds it) into
    /// a file reference, keeping what follows the path.
    pub fn make_file_ref(&mut self, path: &str) {
        let needle: Vec<Atom> = std::iter::once('@')
            .chain(path.chars())
            .map(Atom::Char)
            .collect();
        let mut i = 0;
        while i + needle.len() <= self.atoms.len() {
            let at_word_start =
                i == 0 || !matches!(self.atoms[i - 1], Atom::Char(c) if !c.is_whitespace());
            // Only sentence punctuation may follow the path in its word.
            let ends_word = self.atoms[(i + needle.len()).min(self.atoms.len())..]
                .iter()
                .map_while(|a| match a {
                    Atom::Char(c) if !c.is_whitespace() => Some(*c),
                    _ => None,
                })
                .all(|c| TRAILING_PUNCTUATION.contains(&c));
            if at_word_start && ends_word && self.atoms[i..i + needle.len()] == needle[..] {
                self.atoms
                    .splice(i..i + needle.len(), [Atom::FileRef(path.to_owned())]);
                if self.cursor > i {
                    self.cursor = self.cursor.saturating_sub(needle.len() - 1).max(i + 1);
                }
            }
            i += 1;
        }
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

/// What may end a sentence right after a typed `@path`.
const TRAILING_PUNCTUATION: &[char] = &['.', ',', ';', ':', '!', '?', ')', '"', '\''];

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

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> Composer {
        let mut c = Composer::new();
        for ch in text.chars() {
            c.insert_char(ch);
        }
        c
    }

    #[test]
    fn typed_file_references_are_found_outside_code_and_resolved_in_place() {
        let c = typed("see @calc/ops.py, not `@decorator` nor me@host; @a.py.");
        assert_eq!(c.typed_file_refs(), ["calc/ops.py", "a.py"]);
        let mut c = typed("explain @main.py and @main.py.bak");
        c.make_file_ref("main.py");
        assert_eq!(
            c.segments(),
            [
                Segment::text("explain "),
                Segment::file_ref("main.py"),
                Segment::text(" and @main.py.bak")
            ]
        );
    }
}
