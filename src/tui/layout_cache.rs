//! Wrapped rows of each block, computed once per block content and width.
//!
//! A block's rows are recomputed only when its `rev` changes (new content,
//! a result arriving, expansion) or the width does, which is what keeps a
//! session of thousands of entries cheap to scroll and to stream into.

use ratatui::text::Line;

use super::conversation::Conversation;
use super::render::blocks;

#[derive(Debug, Default)]
pub struct LayoutCache {
    width: u16,
    blocks: Vec<Option<(u64, Vec<Line<'static>>)>>,
    live: Option<(u64, Vec<Line<'static>>)>,
}

/// The conversation as a list of laid-out items at one width: the blocks,
/// then the live item (the block in flight, a retry line) when there is one.
pub struct Rows<'a> {
    conversation: &'a Conversation,
    cache: &'a mut LayoutCache,
}

impl LayoutCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Views `conversation` at `width`, dropping every layout of another width.
    pub fn rows<'a>(&'a mut self, conversation: &'a Conversation, width: u16) -> Rows<'a> {
        if self.width != width {
            self.width = width;
            self.blocks.clear();
            self.live = None;
        }
        self.blocks.resize(conversation.blocks().len(), None);
        Rows {
            conversation,
            cache: self,
        }
    }
}

impl Rows<'_> {
    /// How many items there are.
    pub fn len(&self) -> usize {
        self.conversation.blocks().len() + usize::from(self.conversation.has_live_item())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of item `index` (at least one for any valid index).
    pub fn item(&mut self, index: usize) -> &[Line<'static>] {
        let width = self.cache.width;
        let conversation = self.conversation;
        if let Some(block) = conversation.blocks().get(index) {
            let slot = &mut self.cache.blocks[index];
            if slot.as_ref().is_none_or(|(rev, _)| *rev != block.rev) {
                let selected = conversation.selected() == Some(index);
                *slot = Some((block.rev, blocks::layout(&block.kind, width, selected)));
            }
            return slot.as_ref().map_or(&[], |(_, rows)| rows.as_slice());
        }
        if !conversation.has_live_item() {
            return &[];
        }
        let rev = conversation.live_rev();
        let slot = &mut self.cache.live;
        if slot.as_ref().is_none_or(|(r, _)| *r != rev) {
            *slot = Some((rev, blocks::layout_live(conversation, width)));
        }
        slot.as_ref().map_or(&[], |(_, rows)| rows.as_slice())
    }

    pub fn height(&mut self, index: usize) -> usize {
        self.item(index).len()
    }
}
