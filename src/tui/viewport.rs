//! Which rows of the conversation are on screen.
//!
//! The position is an anchor — the item and row at the top of the screen —
//! rather than a row count, so that only the items on screen are ever laid
//! out, and the view stays put while new content arrives below. Following
//! the bottom is a mode of its own, left when the user scrolls up and
//! resumed when they scroll back to the end.

use ratatui::text::Line;

use super::layout_cache::Rows;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewport {
    follow: bool,
    /// Item index and row within it of the top row, when not following.
    top: (usize, usize),
}

impl Default for Viewport {
    fn default() -> Self {
        Self {
            follow: true,
            top: (0, 0),
        }
    }
}

impl Viewport {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_following(&self) -> bool {
        self.follow
    }

    /// The anchor that shows the last `height` rows.
    fn bottom_top(rows: &mut Rows<'_>, height: usize) -> (usize, usize) {
        let mut acc = 0;
        for i in (0..rows.len()).rev() {
            acc += rows.height(i);
            if acc >= height {
                return (i, acc - height);
            }
        }
        (0, 0)
    }

    /// The current anchor, made valid for the current content.
    fn anchor(&mut self, rows: &mut Rows<'_>, height: usize) -> (usize, usize) {
        if self.follow || rows.is_empty() {
            return Self::bottom_top(rows, height);
        }
        let (mut item, mut row) = self.top;
        if item >= rows.len() {
            item = rows.len() - 1;
            row = 0;
        }
        row = row.min(rows.height(item).saturating_sub(1));
        self.top = (item, row);
        self.top
    }

    /// The rows to draw in a view `height` rows tall.
    pub fn visible(&mut self, rows: &mut Rows<'_>, height: usize) -> Vec<Line<'static>> {
        let (mut item, mut row) = self.anchor(rows, height);
        let mut out = Vec::with_capacity(height);
        while out.len() < height && item < rows.len() {
            let lines = rows.item(item);
            let take = (height - out.len()).min(lines.len().saturating_sub(row));
            out.extend_from_slice(&lines[row..row + take]);
            item += 1;
            row = 0;
        }
        out
    }

    pub fn scroll_up(&mut self, rows: &mut Rows<'_>, height: usize, n: usize) {
        let (mut item, mut row) = self.anchor(rows, height);
        self.follow = false;
        let mut n = n;
        while n > 0 {
            if row >= n {
                row -= n;
                break;
            }
            n -= row;
            if item == 0 {
                row = 0;
                break;
            }
            item -= 1;
            row = rows.height(item);
        }
        self.top = (item, row);
        self.follow_if_at_bottom(rows, height);
    }

    pub fn scroll_down(&mut self, rows: &mut Rows<'_>, height: usize, n: usize) {
        if self.follow {
            return;
        }
        let (mut item, mut row) = self.anchor(rows, height);
        let mut n = n;
        while n > 0 {
            let h = rows.height(item);
            if row + n < h {
                row += n;
                break;
            }
            n -= h - row;
            item += 1;
            row = 0;
            if item >= rows.len() {
                self.follow = true;
                return;
            }
        }
        self.top = (item, row);
        self.follow_if_at_bottom(rows, height);
    }

    /// Resumes following when the anchor shows the end of the content.
    fn follow_if_at_bottom(&mut self, rows: &mut Rows<'_>, height: usize) {
        let (item, row) = self.top;
        let mut below = rows.height(item).saturating_sub(row);
        let mut i = item + 1;
        while below <= height && i < rows.len() {
            below += rows.height(i);
            i += 1;
        }
        if below <= height {
            self.follow = true;
        }
    }

    pub fn home(&mut self, rows: &mut Rows<'_>, height: usize) {
        self.follow = false;
        self.top = (0, 0);
        self.follow_if_at_bottom(rows, height);
    }

    pub fn end(&mut self) {
        self.follow = true;
    }

    /// Scrolls so that item `index` starts on screen, if it is not visible.
    pub fn reveal(&mut self, rows: &mut Rows<'_>, height: usize, index: usize) {
        let (item, row) = self.anchor(rows, height);
        let mut used = rows.height(item).saturating_sub(row);
        let mut last = item;
        while used < height && last + 1 < rows.len() {
            last += 1;
            used += rows.height(last);
        }
        let visible = (index > item || (index == item && row == 0)) && index <= last;
        if !visible {
            self.follow = false;
            self.top = (index, 0);
            self.follow_if_at_bottom(rows, height);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Level;
    use crate::tui::conversation::Conversation;
    use crate::tui::layout_cache::LayoutCache;

    fn conversation(n: usize) -> Conversation {
        let mut c = Conversation::new();
        for i in 0..n {
            c.push_notice(Level::Info, format!("notice {i}"));
        }
        c
    }

    fn first(lines: &[Line<'static>]) -> String {
        lines.first().map(|l| l.to_string()).unwrap_or_default()
    }

    #[test]
    fn follows_then_scrolls_then_follows_again() {
        let mut c = conversation(10);
        let mut cache = LayoutCache::new();
        let mut v = Viewport::new();
        {
            let mut rows = cache.rows(&c, 20);
            assert_eq!(first(&v.visible(&mut rows, 4)), "notice 8");
            v.scroll_up(&mut rows, 4, 3);
            assert!(!v.is_following());
            assert_eq!(first(&v.visible(&mut rows, 4)), "");
            v.scroll_up(&mut rows, 4, 100);
            assert_eq!(first(&v.visible(&mut rows, 4)), "notice 0");
        }
        c.push_notice(Level::Info, "more");
        let mut rows = cache.rows(&c, 20);
        assert_eq!(first(&v.visible(&mut rows, 4)), "notice 0");
        v.scroll_down(&mut rows, 4, 100);
        assert!(v.is_following());
        let shown = v.visible(&mut rows, 4);
        assert_eq!(shown[2].to_string(), "more");
    }

    #[test]
    fn short_content_keeps_following() {
        let c = conversation(1);
        let mut cache = LayoutCache::new();
        let mut v = Viewport::new();
        let mut rows = cache.rows(&c, 20);
        v.scroll_up(&mut rows, 10, 1);
        assert!(v.is_following());
        v.home(&mut rows, 10);
        assert!(v.is_following());
    }
}
