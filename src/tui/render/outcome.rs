//! What a finished tool call's one-line summary says: its outcome first,
//! then the one line of its output that matters.
//!
//! The summary used to be the output's first line and its line count, with
//! `error:` in front of a failure. That misled: a command cancelled with
//! Esc read `error: compiling (2 lines)`, as if `compiling` had failed; a
//! test run read `test_a ... ok`, its first test, when the last line said
//! `FAILED (failures=1)`. The rules here, on the output with its escape
//! sequences removed:
//!
//! - the pod's own notes at the end of a command's output (`[exit code:
//!   1]`, `[cancelled: …]`, `[timed out after 30s: …]`, a sandbox note) say
//!   the outcome and are not counted as output;
//! - a test run's summary (`test result: …`, `FAILED (failures=1)`, `=== 3
//!   passed in 0.1s ===`, …) is the line that matters, the last one if
//!   there are several (each test binary of `cargo test` has one);
//! - else a failure's last line (where compilers and tracebacks say what
//!   went wrong), and a success's first line (a file's start, the first
//!   match);
//! - `read_file`'s `cat -n` numbers are taken off: they are for the model.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

/// How a call ended, as its output says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It completed (`[exit code: 0]`, or a tool that is not a command).
    Succeeded,
    /// Cancelled (Esc, Ctrl+C, a turn's cancel) while it ran.
    Cancelled,
    /// `[timed out after 30s: …]`: the `30s`.
    TimedOut(String),
    /// A command's non-zero exit code.
    Exit(i64),
    /// `[killed by signal 9]`: the `signal 9`.
    Killed(String),
    /// `[interrupted: the pod stopped]` and the like.
    Interrupted,
    /// Any other error (a refusal, a denial, a missing file).
    Failed,
}

/// A finished call's summary, before it is styled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub outcome: Outcome,
    /// The index, among the output's lines, of the line to show.
    pub line: Option<usize>,
    /// That line's text to skip at its start (`read_file`'s number).
    pub skip: usize,
    /// Lines of output, the pod's notes not counted.
    pub lines: usize,
}

/// The pod's notes that end a command's output, by how they begin.
const NOTES: &[&str] = &[
    "[exit code: ",
    "[cancelled",
    "[timed out after ",
    "[killed by signal ",
    "[exit status unknown]",
    "[could not wait for the command",
    "[sandbox: ",
    "[interrupted: ",
];

static TEST_SUMMARY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:",
        r"test result: ",                                         // cargo test
        r"|(?:OK|FAILED)(?: \(.*\))?$",                           // unittest
        r"|=+ .*\b(?:passed|failed|errors?|no tests ran)\b.*=+$", // pytest
        r"|Tests?:\s+\d",                                         // jest, vitest
        r"|(?:ok|FAIL)\s+\S+\s+[\d.]+s$",                         // go test
        r"|\d+ (?:passing|failing)\b",                            // mocha
        r")"
    ))
    .ok()
});

fn is_test_summary(line: &str) -> bool {
    TEST_SUMMARY
        .as_ref()
        .is_some_and(|re| re.is_match(line.trim()))
}

/// The outcome of a call whose output (escape sequences removed) is
/// `lines`, and the line to show.
pub fn summarise(tool: &str, lines: &[&str], is_error: bool) -> Summary {
    let mut end = lines.len();
    let mut outcome = None;
    while end > 0 {
        let line = lines[end - 1].trim();
        if line.is_empty() {
            end -= 1;
            continue;
        }
        if !NOTES.iter().any(|n| line.starts_with(n)) || !line.ends_with(']') {
            break;
        }
        // Read from the end, so the note nearest the output — how the
        // command ended — wins over one added after it (`[sandbox: …]`).
        if let Some(found) = note_outcome(line) {
            outcome = Some(found);
        }
        end -= 1;
    }
    let body = &lines[..end];
    let outcome = match outcome {
        Some(Outcome::Exit(0)) => Outcome::Succeeded,
        Some(Outcome::Succeeded) | None if is_error => Outcome::Failed,
        Some(o) => o,
        None => Outcome::Succeeded,
    };
    let non_empty = |i: &usize| !body[*i].trim().is_empty();
    let test = (0..body.len()).rev().find(|&i| is_test_summary(body[i]));
    let line = test.or_else(|| match outcome {
        Outcome::Succeeded | Outcome::Failed => (0..body.len()).find(non_empty),
        _ => (0..body.len()).rev().find(non_empty),
    });
    let skip = match (tool, line) {
        ("read_file", Some(i)) => line_number_width(body[i]),
        _ => 0,
    };
    Summary {
        outcome,
        line,
        skip,
        lines: body.len(),
    }
}

/// The outcome one of the pod's notes states, if it states one.
fn note_outcome(note: &str) -> Option<Outcome> {
    let inner = note.strip_prefix('[')?.strip_suffix(']')?;
    if let Some(code) = inner.strip_prefix("exit code: ") {
        return code.trim().parse().ok().map(Outcome::Exit);
    }
    if inner.starts_with("cancelled") {
        return Some(Outcome::Cancelled);
    }
    if let Some(rest) = inner.strip_prefix("timed out after ") {
        let after = rest.split(':').next().unwrap_or(rest).trim();
        return Some(Outcome::TimedOut(after.to_owned()));
    }
    if let Some(rest) = inner.strip_prefix("killed by ") {
        return Some(Outcome::Killed(rest.to_owned()));
    }
    if inner.starts_with("interrupted") {
        return Some(Outcome::Interrupted);
    }
    if inner.starts_with("exit status unknown") || inner.starts_with("could not wait") {
        return Some(Outcome::Failed);
    }
    None
}

/// The bytes of a `cat -n` style number at the start of `line` (`    12\t`),
/// or 0 when it has none.
fn line_number_width(line: &str) -> usize {
    let digits = line.trim_start_matches(' ');
    let spaces = line.len() - digits.len();
    let number = digits.len()
        - digits
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len();
    if number > 0 && digits[number..].starts_with('\t') {
        spaces + number + 1
    } else {
        0
    }
}

/// `cancelled after 4s`, `exit 1`, `timed out after 30s`: the outcome in
/// words, `None` for a success (whose summary is its output).
pub fn describe(outcome: &Outcome, ran_for: Option<Duration>) -> Option<String> {
    Some(match outcome {
        Outcome::Succeeded => return None,
        Outcome::Cancelled => match ran_for {
            Some(d) => format!("cancelled after {}", super::blocks::short_duration(d)),
            None => "cancelled".to_owned(),
        },
        Outcome::TimedOut(after) => format!("timed out after {after}"),
        Outcome::Exit(code) => format!("exit {code}"),
        Outcome::Killed(by) => format!("killed by {by}"),
        Outcome::Interrupted => "interrupted: the pod stopped".to_owned(),
        Outcome::Failed => "error".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(tool: &str, output: &str, is_error: bool) -> (Outcome, Option<String>, usize) {
        let lines: Vec<&str> = output.lines().collect();
        let s = summarise(tool, &lines, is_error);
        let line = s.line.map(|i| lines[i][s.skip..].to_owned());
        (s.outcome, line, s.lines)
    }

    #[test]
    fn a_cancelled_command_says_so_not_error() {
        let (outcome, _, lines) = summary(
            "bash",
            "compiling\n[cancelled: the command was killed]",
            true,
        );
        assert_eq!(outcome, Outcome::Cancelled);
        assert_eq!(lines, 1);
        assert_eq!(
            describe(&outcome, Some(Duration::from_secs(4))).as_deref(),
            Some("cancelled after 4s")
        );
    }

    #[test]
    fn a_failure_shows_its_exit_code_and_last_line() {
        let out = "   Compiling x\nerror[E0308]: mismatched types\nerror: could not compile `x`\n[exit code: 101]";
        assert_eq!(
            summary("bash", out, true),
            (
                Outcome::Exit(101),
                Some("error: could not compile `x`".into()),
                3
            )
        );
        assert_eq!(
            summary("bash", "[exit code: 1]", true),
            (Outcome::Exit(1), None, 0)
        );
        let out = "x\n[timed out after 30s: the command was killed]";
        assert_eq!(
            summary("bash", out, true).0,
            Outcome::TimedOut("30s".into())
        );
    }

    #[test]
    fn test_runs_show_their_summary_line() {
        let unittest = "test_a (t.T) ... ok\ntest_b (t.T) ... FAIL\n\n\
                        ======\nFAIL: test_b\n------\nRan 2 tests in 0.001s\n\nFAILED (failures=1)\n[exit code: 1]";
        assert_eq!(
            summary("bash", unittest, true).1.as_deref(),
            Some("FAILED (failures=1)")
        );
        let cargo = "running 3 tests\ntest a ... ok\ntest b ... ok\ntest c ... ok\n\n\
                     test result: ok. 3 passed; 0 failed; 0 ignored\n\n[exit code: 0]";
        let (outcome, line, _) = summary("bash", cargo, false);
        assert_eq!(outcome, Outcome::Succeeded);
        assert_eq!(
            line.as_deref(),
            Some("test result: ok. 3 passed; 0 failed; 0 ignored")
        );
        let pytest =
            "collected 2 items\n\nt.py .F\n==== 1 failed, 1 passed in 0.02s ====\n[exit code: 1]";
        assert_eq!(
            summary("bash", pytest, true).1.as_deref(),
            Some("==== 1 failed, 1 passed in 0.02s ====")
        );
    }

    #[test]
    fn successes_count_lines_without_the_notes() {
        assert_eq!(
            summary("bash", "a\nb\n[exit code: 0]", false),
            (Outcome::Succeeded, Some("a".into()), 2)
        );
        assert_eq!(
            summary("read_file", "     1\tuse std::io;\n     2\t\n", false),
            (Outcome::Succeeded, Some("use std::io;".into()), 2)
        );
        assert_eq!(
            summary("read_file", "no such file: a.rs", true),
            (Outcome::Failed, Some("no such file: a.rs".into()), 1)
        );
    }
}
