//! Assistant text as Markdown: headings, lists, quotes, tables, code blocks
//! (highlighted by language), inline code, emphasis and links with their
//! address, wrapped to the view's width.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight::highlight;
use super::table::Table;
use super::wrap::wrap;

const CODE: Style = Style::new().fg(Color::Yellow);
const QUOTE: Style = Style::new().fg(Color::DarkGray);
const LINK_URL: Style = Style::new().fg(Color::Blue).add_modifier(Modifier::DIM);

/// Renders `text` as Markdown into rows of at most `width` columns, every
/// style patched onto `base` (so reasoning can be dimmed as a whole).
pub fn render(text: &str, width: usize, base: Style, out: &mut Vec<Line<'static>>) {
    let mut r = Renderer {
        width,
        out,
        styles: vec![base],
        line: Vec::new(),
        lists: Vec::new(),
        bullet_used: true,
        quote_depth: 0,
        code: None,
        code_closed: true,
        link: None,
        table: None,
        need_blank: false,
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        if let Event::End(TagEnd::CodeBlock) = event {
            r.code_closed = text.get(range).is_some_and(closes_its_fence);
        }
        r.event(event);
    }
    r.flush();
    if r.out.is_empty() {
        r.out.push(Line::default());
    }
}

/// Whether a code block's source ends with its closing fence (an indented
/// block has none to wait for).
fn closes_its_fence(source: &str) -> bool {
    let source = source.trim_end();
    let opening = source.trim_start();
    let fence = if opening.starts_with("```") {
        "```"
    } else if opening.starts_with("~~~") {
        "~~~"
    } else {
        return true;
    };
    let mut lines = source.lines();
    lines.next();
    lines.last().is_some_and(|l| l.trim().starts_with(fence))
}

struct Renderer<'o> {
    width: usize,
    out: &'o mut Vec<Line<'static>>,
    styles: Vec<Style>,
    line: Vec<Span<'static>>,
    /// One entry per open list: the next number (ordered) and the bullet of
    /// the current item.
    lists: Vec<(Option<u64>, String)>,
    /// Whether the innermost item's bullet has been drawn; its further rows
    /// are indented by the bullet's width instead.
    bullet_used: bool,
    quote_depth: usize,
    /// Inside a fenced or indented code block: its language (empty if
    /// none) and its text so far, highlighted as a whole at its end.
    code: Option<(String, String)>,
    /// Whether the code block ending now has its closing fence: one still
    /// streaming in is drawn plainly, and highlighted once it is complete
    /// (highlighting is too slow to redo on every frame as it grows).
    code_closed: bool,
    /// Inside a link: its address and the text shown so far, to tell
    /// whether the address needs showing after the text.
    link: Option<(String, String)>,
    /// Inside a table: the rows so far; drawn at its end, when every
    /// column's width is known.
    table: Option<Table>,
    need_blank: bool,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, patch: Style) {
        let s = self.style().patch(patch);
        self.styles.push(s);
    }

    fn pop_style(&mut self) {
        if self.styles.len() > 1 {
            self.styles.pop();
        }
    }

    /// Starts a block-level element: a blank row separates it from the
    /// previous top-level one.
    fn start_block(&mut self) {
        self.flush();
        if self.need_blank && !self.out.is_empty() {
            self.out.push(Line::default());
        }
        self.need_blank = false;
    }

    fn end_block(&mut self) {
        self.flush();
        if self.lists.is_empty() {
            self.need_blank = true;
        }
    }

    fn prefixes(&self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let mut first = Vec::new();
        for _ in 0..self.quote_depth {
            first.push(Span::styled("│ ", QUOTE));
        }
        let mut rest = first.clone();
        let n = self.lists.len();
        for (i, (_, bullet)) in self.lists.iter().enumerate() {
            let pad = " ".repeat(bullet.chars().count());
            if i + 1 == n && !self.bullet_used {
                first.push(Span::styled(bullet.clone(), self.styles[0]));
            } else {
                first.push(Span::raw(pad.clone()));
            }
            rest.push(Span::raw(pad));
        }
        (first, rest)
    }

    fn flush(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let (first, rest) = self.prefixes();
        let spans = std::mem::take(&mut self.line);
        wrap(&spans, self.width, &first, &rest, self.out);
        self.bullet_used = true;
    }

    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        if let Some((_, shown)) = &mut self.link {
            shown.push_str(text);
        }
        let style = self.style();
        self.line.push(Span::styled(text.replace('\n', " "), style));
    }

    /// Draws the finished code block, highlighted when its language is
    /// known, else in the plain code colour.
    fn code_block(&mut self, lang: &str, code: &str) {
        let base = self.styles[0];
        let code = code.strip_suffix('\n').unwrap_or(code);
        let highlighted = if self.code_closed {
            highlight(lang, code, base)
        } else {
            None
        };
        let lines: Vec<Vec<(Style, String)>> = match highlighted {
            Some(lines) => lines,
            None => code
                .split('\n')
                .map(|l| vec![(base.patch(CODE), l.to_owned())])
                .collect(),
        };
        for pieces in lines {
            self.line.push(Span::raw("  "));
            for (style, text) in pieces {
                self.line.push(Span::styled(text, style));
            }
            self.flush_code_line();
        }
    }

    /// Draws a finished table inside the current quotes and list items.
    fn table_rows(&mut self, table: &Table) {
        let (first, rest) = self.prefixes();
        let prefix_width: usize = rest.iter().map(Span::width).sum();
        let mut rows = Vec::new();
        table.render(self.width.saturating_sub(prefix_width).max(1), &mut rows);
        for (i, row) in rows.into_iter().enumerate() {
            let mut spans = if i == 0 { first.clone() } else { rest.clone() };
            spans.extend(row.spans);
            self.out.push(Line::from(spans));
        }
        self.bullet_used = true;
    }

    /// Code rows are flushed even when empty: blank lines inside code matter.
    fn flush_code_line(&mut self) {
        if self.line.is_empty() {
            self.line.push(Span::raw(""));
        }
        self.flush();
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                if let Some((_, shown)) = &mut self.link {
                    shown.push_str(&t);
                }
                let style = self.style().patch(CODE);
                self.line.push(Span::styled(t.into_string(), style));
            }
            Event::SoftBreak => self.line.push(Span::styled(" ", self.style())),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.start_block();
                let w = self.width.clamp(1, 40);
                self.out.push(Line::styled("─".repeat(w), QUOTE));
                self.need_blank = true;
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                let style = self.style().add_modifier(Modifier::DIM);
                for (i, part) in t.split('\n').enumerate() {
                    if i > 0 {
                        self.flush();
                    }
                    if !part.is_empty() {
                        self.line.push(Span::styled(part.to_owned(), style));
                    }
                }
            }
            Event::TaskListMarker(done) => {
                let mark = if done { "[x] " } else { "[ ] " };
                self.line.push(Span::styled(mark, self.style()));
            }
            Event::FootnoteReference(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                self.text(&t)
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                if self.lists.is_empty() {
                    self.start_block();
                } else {
                    self.flush();
                }
            }
            Tag::Heading { level, .. } => {
                self.start_block();
                let mut style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
                if level == HeadingLevel::H1 {
                    style = style.add_modifier(Modifier::UNDERLINED);
                }
                self.push_style(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.quote_depth += 1;
                self.push_style(QUOTE);
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(lang) => lang.into_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                if !lang.is_empty() {
                    let style = self.styles[0].fg(Color::DarkGray);
                    self.line.push(Span::styled(format!("  {lang}"), style));
                    self.flush();
                }
                self.code = Some((lang, String::new()));
            }
            Tag::Table(alignments) => {
                self.start_block();
                self.table = Some(Table {
                    alignments,
                    ..Table::default()
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => self.line.clear(),
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.start_block();
                } else {
                    self.flush();
                }
                self.lists.push((start, String::new()));
            }
            Tag::Item => {
                self.flush();
                if let Some((next, bullet)) = self.lists.last_mut() {
                    *bullet = match next {
                        Some(n) => {
                            let b = format!("{n}. ");
                            *n += 1;
                            b
                        }
                        None => "• ".into(),
                    };
                }
                self.bullet_used = false;
            }
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.link = Some((dest_url.into_string(), String::new()));
                self.push_style(
                    Style::new()
                        .fg(Color::Blue)
                        .add_modifier(Modifier::UNDERLINED),
                );
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.end_block(),
            TagEnd::Heading(_) => {
                self.end_block();
                self.pop_style();
            }
            TagEnd::BlockQuote(_) => {
                self.end_block();
                self.quote_depth = self.quote_depth.saturating_sub(1);
                self.pop_style();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    self.code_block(&lang, &code);
                }
                self.end_block();
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.line);
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(cell);
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.head = t.rows.pop().unwrap_or_default();
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table_rows(&table);
                }
                self.end_block();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.bullet_used = true;
                if self.lists.is_empty() {
                    self.need_blank = true;
                }
            }
            TagEnd::Item => self.flush(),
            TagEnd::Link | TagEnd::Image => {
                self.pop_style();
                if let Some((url, shown)) = self.link.take() {
                    let bare = url.strip_prefix("mailto:").unwrap_or(&url);
                    if !url.is_empty() && shown != url && shown != bare {
                        let style = self.styles[0].patch(LINK_URL);
                        self.line.push(Span::styled(format!(" ({url})"), style));
                    }
                }
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(md: &str, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        render(md, width, Style::new(), &mut out);
        out.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn lists_hang_and_nest() {
        assert_eq!(
            rows("- one two three\n- b\n  1. x\n  2. y", 10),
            ["• one two ", "  three", "• b", "  1. x", "  2. y"]
        );
    }

    #[test]
    fn paragraphs_headings_and_code_are_separated() {
        assert_eq!(
            rows("# T\n\npara `x`\n\n```rs\nfn a() {}\n\n}\n```\nafter", 40),
            [
                "T",
                "",
                "para x",
                "",
                "  rs",
                "  fn a() {}",
                "  ",
                "  }",
                "",
                "after"
            ]
        );
    }

    #[test]
    fn fences_are_closed_or_still_open() {
        assert!(closes_its_fence("```rust\nfn a() {}\n```\n"));
        assert!(closes_its_fence("~~~\nx\n~~~~"));
        assert!(!closes_its_fence("```rust\nfn a() {}\n"));
        assert!(!closes_its_fence("```rust"));
        assert!(closes_its_fence("    indented code\n"));
    }

    #[test]
    fn empty_text_is_one_row() {
        assert_eq!(rows("", 10), [""]);
    }
}
