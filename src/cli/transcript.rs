//! How `pod send` prints a turn as plain text: the answer on one stream,
//! the tool calls and notices on another, laid out so that blocks of
//! different model calls do not run together.

use std::io::{self, Write};

use serde_json::Value;

use crate::tools::registry;

/// Longest argument summary on a tool-call line.
const MAX_SUMMARY: usize = 100;

/// The text view of one turn.
///
/// `out` gets the assistant's text. Tool-call lines go to `out` too when it
/// is a terminal (`tools_inline`), else to `err`, so that a script that
/// captures stdout gets the answer alone.
pub struct Transcript<O: Write, E: Write> {
    out: O,
    err: E,
    tools_inline: bool,
    /// Something was written to `out`.
    started: bool,
    /// `out` ends with a newline (or nothing was written).
    at_line_start: bool,
    /// A text block is being streamed; the next text continues it.
    in_text: bool,
}

impl<O: Write, E: Write> Transcript<O, E> {
    pub fn new(out: O, err: E, tools_inline: bool) -> Self {
        Self {
            out,
            err,
            tools_inline,
            started: false,
            at_line_start: true,
            in_text: false,
        }
    }

    /// A piece of the assistant's text. The first piece of a new block is
    /// set off from what came before by a blank line.
    pub fn text(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        if !self.in_text && self.started {
            self.end_line()?;
            self.out.write_all(b"\n")?;
        }
        self.in_text = true;
        self.write_out(&crate::safe_text::lines(text))
    }

    /// The block being streamed is over (committed, or another kind began).
    pub fn end_block(&mut self) {
        self.in_text = false;
    }

    /// A tool call, on a line of its own.
    pub fn tool_call(&mut self, name: &str, arguments: &Value) -> io::Result<()> {
        self.in_text = false;
        let line = tool_line(name, arguments);
        if self.tools_inline {
            self.end_line()?;
            self.write_out(&line)?;
            self.write_out("\n")
        } else {
            self.notice(&line)
        }
    }

    /// A line on `err` (a tool call, a notice). When both streams end up in
    /// one place (`2>&1`), the answer's open line is ended first, so the two
    /// never glue together; the answer's bytes are the same either way, as
    /// a block after this one starts on a line of its own anyway.
    pub fn notice(&mut self, line: &str) -> io::Result<()> {
        self.end_line()?;
        writeln!(self.err, "{line}")?;
        self.err.flush()
    }

    /// Ends the answer with a newline, so a shell prompt starts on its own
    /// line.
    pub fn finish(&mut self) -> io::Result<()> {
        self.end_line()
    }

    fn end_line(&mut self) -> io::Result<()> {
        if !self.at_line_start {
            self.write_out("\n")?;
        }
        Ok(())
    }

    fn write_out(&mut self, text: &str) -> io::Result<()> {
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        self.started = true;
        self.at_line_start = text.ends_with('\n');
        Ok(())
    }
}

/// `⚙ bash cargo test`, `⚙ grep TODO in src`: the tool and what it is
/// called with, on one line, every control character shown as a visible
/// escape.
pub fn tool_line(name: &str, arguments: &Value) -> String {
    let summary = crate::safe_text::line(&argument_summary(name, arguments)).into_owned();
    let name = crate::safe_text::line(name);
    if summary.is_empty() {
        format!("⚙ {name}")
    } else {
        format!("⚙ {name} {summary}")
    }
}

/// The argument a person recognises a call by, as every client shows it
/// ([`registry::or_arguments`]), cut to one line of at most
/// [`MAX_SUMMARY`] characters.
fn argument_summary(name: &str, arguments: &Value) -> String {
    registry::one_line(&registry::or_arguments(name, arguments), MAX_SUMMARY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(
        tools_inline: bool,
        steps: impl Fn(&mut Transcript<&mut Vec<u8>, &mut Vec<u8>>),
    ) -> (String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        {
            let mut transcript = Transcript::new(&mut out, &mut err, tools_inline);
            steps(&mut transcript);
            transcript.finish().unwrap();
        }
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn blocks_are_separated_and_tool_lines_go_to_stderr_when_piped() {
        let (out, err) = render(false, |t| {
            t.text("Let me look ").unwrap();
            t.text("first.").unwrap();
            t.tool_call("bash", &json!({"command": "cargo test"}))
                .unwrap();
            t.text("Now I'll fix it.\n").unwrap();
            t.end_block();
            t.text("Done.").unwrap();
        });
        assert_eq!(out, "Let me look first.\n\nNow I'll fix it.\n\nDone.\n");
        assert_eq!(err, "⚙ bash cargo test\n");
    }

    #[test]
    fn tool_lines_stay_inline_on_a_terminal() {
        let (out, err) = render(true, |t| {
            t.text("Looking.").unwrap();
            t.tool_call("grep", &json!({"pattern": "TODO", "path": "src"}))
                .unwrap();
            t.tool_call("list_dir", &json!({})).unwrap();
            t.text("Found it.").unwrap();
        });
        // The search's directory too, as the TUI and the web page show it.
        assert_eq!(
            out,
            "Looking.\n⚙ grep TODO in src\n⚙ list_dir\n\nFound it.\n"
        );
        assert_eq!(err, "");
    }

    #[test]
    fn summaries_are_one_short_line() {
        assert_eq!(
            tool_line("bash", &json!({"command": "echo a\necho b"})),
            "⚙ bash echo a …"
        );
        assert_eq!(
            tool_line("mcp__git__log", &json!({"limit": 3, "branch": "main"})),
            "⚙ mcp__git__log main"
        );
        assert_eq!(tool_line("x", &json!({"n": 1})), "⚙ x {\"n\":1}");
        let long = tool_line("read_file", &json!({"path": "a".repeat(300)}));
        assert_eq!(
            long.chars().count(),
            "⚙ read_file ".chars().count() + MAX_SUMMARY + 1
        );
    }
}
