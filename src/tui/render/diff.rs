//! Diffs as a person reads them: `+` lines green, `-` lines red, hunk
//! headers (`@@`) cyan. Used by the approval panel (the pod's unified diff
//! preview) and by `edit_file` / `write_file` calls in the transcript (a
//! diff made here from the call's arguments, so a file edit never shows as
//! raw JSON).

use ratatui::style::{Color, Modifier, Style};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use crate::tui::conversation::ToolBlock;

const ADDED: Style = Style::new().fg(Color::Green);
const REMOVED: Style = Style::new().fg(Color::Red);
const HUNK: Style = Style::new().fg(Color::Cyan);
const HEADER: Style = Style::new().add_modifier(Modifier::BOLD);

/// The style of one line of a unified diff, by its first characters.
pub fn line_style(line: &str) -> Style {
    if line.starts_with("+++") || line.starts_with("---") {
        HEADER
    } else if line.starts_with('+') {
        ADDED
    } else if line.starts_with('-') {
        REMOVED
    } else if line.starts_with("@@") {
        HUNK
    } else {
        Style::new()
    }
}

/// The diff a file-editing call makes, as the transcript shows it: the
/// pod's own diff from the approval request when there was one (the whole
/// lines, indentation included; its `---`/`+++` header left out, the call
/// already names the file), else one made from the call's arguments.
pub fn of_tool(tool: &ToolBlock) -> Option<Vec<String>> {
    if let Some(preview) = &tool.approval_diff {
        return Some(
            preview
                .lines()
                .skip_while(|l| l.starts_with("--- ") || l.starts_with("+++ "))
                .map(str::to_owned)
                .collect(),
        );
    }
    of_call(&tool.name, &tool.arguments)
}

/// The diff a file-editing call would make, from its arguments: for
/// `edit_file` the lines of `old_string` against `new_string` (unchanged
/// lines kept as context), for `write_file` the new content as added
/// lines. `None` for any other call, or arguments of another shape.
/// `old_string` need only be unique in the file, so it may be part of a
/// line (`return a - b` of `    return a - b`): this diff then shows that
/// part only, which is why the approval's diff is preferred.
pub fn of_call(tool: &str, arguments: &Value) -> Option<Vec<String>> {
    let field = |name: &str| arguments.get(name).and_then(Value::as_str);
    match tool {
        "edit_file" => {
            let (old, new) = (field("old_string")?, field("new_string")?);
            let diff = TextDiff::from_lines(old, new);
            Some(
                diff.iter_all_changes()
                    .map(|change| {
                        let sign = match change.tag() {
                            ChangeTag::Delete => '-',
                            ChangeTag::Insert => '+',
                            ChangeTag::Equal => ' ',
                        };
                        let text = change.value();
                        format!("{sign}{}", text.strip_suffix('\n').unwrap_or(text))
                    })
                    .collect(),
            )
        }
        "write_file" => Some(field("content")?.lines().map(|l| format!("+{l}")).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_edit_keeps_unchanged_lines_as_context() {
        let args = json!({"path":"a.rs","old_string":"a\nb\nc\n","new_string":"a\nB\nc\n"});
        assert_eq!(
            of_call("edit_file", &args).unwrap(),
            [" a", "-b", "+B", " c"]
        );
        let args = json!({"path":"n.md","content":"one\ntwo"});
        assert_eq!(of_call("write_file", &args).unwrap(), ["+one", "+two"]);
        assert_eq!(of_call("bash", &json!({"command":"ls"})), None);
    }

    #[test]
    fn lines_are_coloured_by_their_sign() {
        assert_eq!(line_style("+x").fg, Some(Color::Green));
        assert_eq!(line_style("-x").fg, Some(Color::Red));
        assert_eq!(line_style("@@ -1 +1 @@").fg, Some(Color::Cyan));
        assert_eq!(line_style("+++ b/x"), HEADER);
        assert_eq!(line_style(" x"), Style::new());
    }
}
