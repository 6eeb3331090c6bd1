//! Assistant text as Markdown: headings, lists, quotes, code blocks, inline
//! code, emphasis and links, wrapped to the view's width.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Parser, Tag, TagEnd};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::wrap::wrap;

const CODE: Style = Style::new().fg(Color::Yellow);
const QUOTE: Style = Style::new().fg(Color::DarkGray);

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
        need_blank: false,
    };
    for event in Parser::new(text) {
        r.event(event);
    }
    r.flush();
    if r.out.is_empty() {
        r.out.push(Line::default());
    }
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
    /// Inside a fenced or indented code block: its language, if any.
    code: Option<String>,
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
        if self.code.is_some() {
            let style = self.styles[0].patch(CODE);
            let mut lines = text.split('\n').peekable();
            while let Some(l) = lines.next() {
                let last = lines.peek().is_none();
                if last && l.is_empty() {
                    break;
                }
                self.line.push(Span::styled(format!("  {l}"), style));
                if !last {
                    self.flush_code_line();
                }
            }
        } else {
            let style = self.style();
            self.line.push(Span::styled(text.replace('\n', " "), style));
        }
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
                self.code = Some(lang);
            }
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
            Tag::Link { .. } => self.push_style(
                Style::new()
                    .fg(Color::Blue)
                    .add_modifier(Modifier::UNDERLINED),
            ),
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
                if !self.line.is_empty() {
                    self.flush_code_line();
                }
                self.code = None;
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
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.pop_style()
            }
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
    fn empty_text_is_one_row() {
        assert_eq!(rows("", 10), [""]);
    }
}
