//! The approval panel, drawn in the input box's place while a tool call
//! waits for an answer: what the call would do, why the pod asks, its
//! preview (a diff in colour for file edits, scrollable when long) and
//! the keys that answer it.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::diff;
use super::wrap::{wrap, wrap_text};
use crate::tui::approval::ApprovalPanel;
use crate::tui::conversation::PendingApproval;

const TITLE: Style = Style::new()
    .fg(Color::Black)
    .bg(Color::Yellow)
    .add_modifier(Modifier::BOLD);
const ACCENT: Style = Style::new().fg(Color::Yellow);
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const KEY: Style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);

/// The panel's rows at `width`, at most `max_rows` of them, and the
/// cursor's row and column while a message is typed. Clamps the panel's
/// scroll to its preview and records how many preview rows fit.
pub fn lines(
    panel: &mut ApprovalPanel,
    request: &PendingApproval,
    waiting: usize,
    width: u16,
    max_rows: usize,
) -> (Vec<Line<'static>>, Option<(usize, usize)>) {
    let width = usize::from(width).max(1);
    let mut header = Vec::new();
    let mut title = vec![Span::styled(
        format!(" {} wants to run ", request.tool),
        TITLE,
    )];
    if waiting > 1 {
        title.push(Span::styled(format!(" 1 of {waiting}"), ACCENT));
    }
    header.push(Line::from(title));
    wrap_text(
        &request.summary,
        Style::new().add_modifier(Modifier::BOLD),
        width,
        &[Span::raw(" ")],
        &[Span::raw(" ")],
        &mut header,
    );
    wrap_text(
        &request.reason,
        DIM,
        width,
        &[Span::styled(" asked because: ", DIM)],
        &[Span::raw("   ")],
        &mut header,
    );

    let mut preview = Vec::new();
    if request.preview.trim() != request.summary.trim() {
        let is_diff = crate::protocol::tools::effect(&request.tool)
            == crate::protocol::tools::Effect::WritesFile
            || request.preview.starts_with("---")
            || request.preview.starts_with("@@");
        let gutter = [Span::styled(" │ ", DIM)];
        for line in request.preview.lines() {
            let style = if is_diff {
                diff::line_style(line)
            } else {
                Style::new()
            };
            wrap(
                &[Span::styled(line, style)],
                width,
                &gutter,
                &gutter,
                &mut preview,
            );
        }
    }

    let mut footer = Vec::new();
    let mut cursor = None;
    match &panel.message {
        Some(message) => {
            let prompt = " message for the model › ";
            let first = [Span::styled(prompt, ACCENT)];
            wrap(
                &[Span::raw(message.clone())],
                width,
                &first,
                &[],
                &mut footer,
            );
            let last = footer.len() - 1;
            let col = footer[last].width().min(width.saturating_sub(1));
            cursor = Some((last, col));
            footer.push(Line::styled(
                " Enter denies with this message · Esc goes back",
                DIM,
            ));
        }
        None => {
            let mut spans = vec![Span::raw(" ")];
            // What `a` adds is shown before it is chosen: the rule
            // decides what else runs unasked.
            let session = match &request.session_rule {
                Some(rule) => format!("allow for this session: {rule}"),
                None => "allow for this session".to_owned(),
            };
            let always = (!panel.always_refused).then(|| ("A", "always (config file)".to_owned()));
            for (i, (key, what)) in [
                Some(("y", "allow once".to_owned())),
                Some(("a", session)),
                always,
                Some(("n", "deny".to_owned())),
                Some(("N", "deny with a message".to_owned())),
            ]
            .into_iter()
            .flatten()
            .enumerate()
            {
                if i > 0 {
                    spans.push(Span::styled(" · ", DIM));
                }
                // Dim while arming: the keys do not answer yet.
                spans.push(Span::styled(key, if panel.arming { DIM } else { KEY }));
                spans.push(Span::raw(format!(" {what}")));
            }
            wrap(&spans, width, &[], &[Span::raw(" ")], &mut footer);
        }
    }

    let fixed = header.len() + footer.len();
    let room = max_rows.saturating_sub(fixed);
    let shown = preview.len().min(room);
    panel.preview_rows = shown;
    panel.scroll = panel.scroll.min(preview.len() - shown);
    if shown < preview.len() {
        let end = panel.scroll + shown;
        header[0].spans.push(Span::styled(
            format!(
                "  lines {}–{end} of {} · ↑↓ PgUp PgDn",
                panel.scroll + 1,
                preview.len()
            ),
            DIM,
        ));
    }
    let mut out = header;
    out.extend(preview.into_iter().skip(panel.scroll).take(shown));
    let footer_at = out.len();
    out.extend(footer);
    // On a terminal too short for all of it, the keys stay, the top goes.
    let cut = out.len().saturating_sub(max_rows);
    let out: Vec<Line<'static>> = out.into_iter().skip(cut).collect();
    let cursor = cursor.and_then(|(row, col)| (footer_at + row).checked_sub(cut).map(|r| (r, col)));
    (out, cursor)
}
