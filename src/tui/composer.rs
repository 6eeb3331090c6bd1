//! The input box: a multi-line buffer of atoms, input history, and the menu
//! completing the `/`, `@` and `#` token under the cursor.
//!
//! The buffer holds atoms rather than a string so that a paste stays one
//! typed unit from the moment it arrives until it is sent as a `paste`
//! segment: flattening it into text (and parsing a label back out) is the bug
//! the segment protocol exists to prevent.

use crate::protocol::Segment;
use crate::tui::images::Attachment;

mod menu;

pub use menu::{CommandLine, Completion, MenuItem, Token, TokenKind};

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
    /// A pasted or dropped image file, shown as its chip and sent as an
    /// `image` segment (uploaded with `put_blob` first).
    Image(Attachment),
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

    /// The images attached to the message, in order.
    pub fn images(&self) -> impl Iterator<Item = &Attachment> {
        self.atoms.iter().filter_map(|a| match a {
            Atom::Image(image) => Some(image),
            _ => None,
        })
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
    ///
    /// A paste that is the path of an image file (a terminal sends a file
    /// dropped on it as its path) attaches the image instead.
    pub fn paste(&mut self, text: &str) {
        let number = self.images().count() as u64 + 1;
        if let Some(image) = Attachment::from_pasted(text, number) {
            self.insert(Atom::Image(image));
            return;
        }
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

    /// Attaches the clipboard's image (PNG bytes) at the cursor; false when
    /// the bytes are not an image the pod takes.
    pub fn attach_clipboard_image(&mut self, png: Vec<u8>) -> bool {
        let number = self.images().count() as u64 + 1;
        match Attachment::from_clipboard(png, number) {
            Some(image) => {
                self.insert(Atom::Image(image));
                true
            }
            None => false,
        }
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

    /// Deletes the whole draft (Ctrl+U, and Ctrl+C on a draft).
    pub fn clear_draft(&mut self) {
        self.atoms.clear();
        self.cursor = 0;
        self.completion = None;
        self.history_pos = None;
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
            Atom::Image(image) => {
                flush_text(&mut out, &mut text);
                out.push(Segment::image(
                    image.blob.clone(),
                    image.media_type,
                    Some(image.name.clone()),
                ));
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
