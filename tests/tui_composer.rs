//! The composer: what the input buffer sends as segments, history and
//! multi-line editing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use pod::tui::composer::{paste_label, Composer, MenuItem, Token, TokenKind};
use serde_json::json;

fn typed(c: &mut Composer, s: &str) {
    for ch in s.chars() {
        if ch == '\n' {
            c.insert_newline();
        } else {
            c.insert_char(ch);
        }
    }
}

/// Candidates as the pod lists them.
fn items(values: &[&str]) -> Vec<MenuItem> {
    values
        .iter()
        .map(|v| MenuItem {
            value: (*v).to_owned(),
            detail: None,
            builtin: false,
        })
        .collect()
}

/// The prefix of the token a refresh asks the pod about.
fn asked(c: &mut Composer, id: &str) -> Option<String> {
    c.refresh_completion(|| id.to_owned()).map(|t| t.prefix)
}

fn wire(c: &Composer) -> serde_json::Value {
    serde_json::to_value(c.segments()).unwrap()
}

#[test]
fn paste_becomes_one_paste_segment() {
    let mut c = Composer::new();
    typed(&mut c, "look: ");
    c.paste("a\r\nb\rc");
    typed(&mut c, " thanks");
    assert_eq!(
        wire(&c),
        json!([{"type":"text","text":"look: "},
               {"type":"paste","id":1,"text":"a\nb\nc"},
               {"type":"text","text":" thanks"}])
    );
    c.backspace();
    assert_eq!(c.atoms().len(), 6 + 1 + 6);
}

#[test]
fn backspace_removes_a_whole_paste() {
    let mut c = Composer::new();
    c.paste("long\ntext");
    c.backspace();
    assert!(c.is_empty());
}

#[test]
fn paste_label_counts_chars_and_lines() {
    assert_eq!(paste_label(1, "a\nb"), "[Clipboard #1 | 3 chars, 2 lines]");
    assert_eq!(paste_label(2, "x"), "[Clipboard #2 | 1 chars, 1 lines]");
}

#[test]
fn accepted_path_becomes_file_ref() {
    let mut c = Composer::new();
    typed(&mut c, "read @sr");
    assert_eq!(asked(&mut c, "r1"), Some("sr".into()));
    assert!(!c.set_completions("old", items(&["x"])));
    assert!(c.set_completions("r1", items(&["src/"])));
    c.accept_completion();
    assert_eq!(c.plain_text().as_deref(), Some("read @src/"));
    assert_eq!(asked(&mut c, "r2"), Some("src/".into()));
    c.set_completions("r2", items(&["src/lib.rs", "src/main.rs"]));
    c.move_completion(true);
    c.accept_completion();
    typed(&mut c, "please");
    assert_eq!(
        wire(&c),
        json!([{"type":"text","text":"read "},
               {"type":"file_ref","path":"src/main.rs"},
               {"type":"text","text":" please"}])
    );
}

#[test]
fn at_needs_a_word_boundary_and_can_be_dismissed() {
    let mut c = Composer::new();
    typed(&mut c, "me@host");
    assert_eq!(c.token(), None);
    typed(&mut c, " @a");
    assert!(c.refresh_completion(|| "r".into()).is_some());
    c.dismiss_completion();
    typed(&mut c, "b");
    assert_eq!(c.refresh_completion(|| "r".into()), None);
    typed(&mut c, " @");
    assert!(c.refresh_completion(|| "r".into()).is_some());
}

#[test]
fn history_walks_back_and_restores_the_draft() {
    let mut c = Composer::new();
    typed(&mut c, "first");
    c.finish_submit();
    typed(&mut c, "second");
    c.finish_submit();
    typed(&mut c, "draft");
    c.history_prev();
    assert_eq!(c.plain_text().as_deref(), Some("second"));
    c.history_prev();
    c.history_prev();
    assert_eq!(c.plain_text().as_deref(), Some("first"));
    c.history_next();
    c.history_next();
    assert_eq!(c.plain_text().as_deref(), Some("draft"));
}

#[test]
fn multi_line_editing() {
    let mut c = Composer::new();
    typed(&mut c, "ab\ncdef\ng");
    assert!(c.up());
    assert_eq!(c.cursor(), 4);
    assert!(c.up());
    assert_eq!(c.cursor(), 1);
    assert!(!c.up());
    c.line_end();
    c.insert_char('X');
    assert!(c.down());
    assert!(c.down());
    assert!(!c.down());
    assert_eq!(c.plain_text().as_deref(), Some("abX\ncdef\ng"));
    assert_eq!(wire(&c), json!([{"type":"text","text":"abX\ncdef\ng"}]));
    c.clear_draft();
    assert!(c.is_empty(), "Ctrl+U clears the whole draft");
}

#[test]
fn whitespace_only_input_has_no_segments() {
    let mut c = Composer::new();
    typed(&mut c, "  \n ");
    assert!(c.segments().is_empty());
}

fn token(c: &Composer) -> Option<(TokenKind, String)> {
    c.token().map(|Token { kind, prefix, .. }| (kind, prefix))
}

#[test]
fn hash_is_a_knowledge_token_unless_after_a_word_or_in_code() {
    let mut c = Composer::new();
    typed(&mut c, "#st");
    assert_eq!(token(&c), Some((TokenKind::Knowledge, "st".into())));
    typed(&mut c, " see (#x");
    assert_eq!(token(&c), Some((TokenKind::Knowledge, "x".into())));
    for text in ["issue#3", "C#", "`a #b", "##", "#a/b", "```\n#in"] {
        let mut c = Composer::new();
        typed(&mut c, text);
        assert_eq!(token(&c), None, "{text:?}");
    }
    let mut c = Composer::new();
    typed(&mut c, "`code` #k");
    assert_eq!(token(&c), Some((TokenKind::Knowledge, "k".into())));
}

#[test]
fn slash_is_a_command_token_only_at_the_start() {
    let mut c = Composer::new();
    typed(&mut c, "/rev");
    assert_eq!(token(&c), Some((TokenKind::Command, "rev".into())));
    typed(&mut c, " src/");
    assert_eq!(token(&c), None);
    let mut c = Composer::new();
    typed(&mut c, "a /rev");
    assert_eq!(token(&c), None);
    let mut c = Composer::new();
    typed(&mut c, "/etc/ho");
    assert_eq!(token(&c), None);
}

#[test]
fn the_command_menu_lists_builtins_first_then_workflows() {
    let mut c = Composer::new();
    typed(&mut c, "/");
    assert_eq!(asked(&mut c, "r1"), Some(String::new()));
    let shown = |c: &Composer| -> Vec<String> {
        c.completion()
            .unwrap()
            .items
            .iter()
            .map(|i| i.value.clone())
            .collect()
    };
    assert_eq!(
        shown(&c)[0],
        "help",
        "built-ins show before the pod answers"
    );
    typed(&mut c, "s");
    assert_eq!(asked(&mut c, "r2"), Some("s".into()));
    assert_eq!(shown(&c), ["status", "sessions"]);
    c.set_completions("r2", items(&["security", "status"]));
    assert_eq!(
        shown(&c),
        ["status", "sessions", "security"],
        "a workflow named like a built-in is hidden"
    );
    c.move_completion(false);
    let (kind, item) = c.accept_completion().unwrap();
    assert_eq!(
        (kind, item.value.as_str(), item.builtin),
        (TokenKind::Command, "security", false)
    );
    assert_eq!(c.plain_text().as_deref(), Some("/security "));
}

#[test]
fn knowledge_becomes_one_atom_inside_a_line() {
    let mut c = Composer::new();
    typed(&mut c, "follow #sty");
    assert_eq!(asked(&mut c, "k"), Some("sty".into()));
    c.set_completions("k", items(&["style"]));
    c.accept_completion();
    typed(&mut c, "please");
    assert_eq!(
        wire(&c),
        json!([{"type":"text","text":"follow "},
               {"type":"knowledge_ref","slug":"style"},
               {"type":"text","text":" please"}])
    );
    for _ in 0.."please ".len() {
        c.backspace();
    }
    c.backspace();
    assert_eq!(
        c.plain_text().as_deref(),
        Some("follow "),
        "deleted as one unit"
    );
}

#[test]
fn command_line_splits_name_args_and_the_rest() {
    let mut c = Composer::new();
    typed(&mut c, "/review  src ");
    c.refresh_completion(|| "k".into());
    typed(&mut c, "#sty");
    c.refresh_completion(|| "k2".into());
    c.set_completions("k2", items(&["style"]));
    c.accept_completion();
    typed(&mut c, "\nmore");
    let line = c.command_line().unwrap();
    assert_eq!((line.name.as_str(), line.args.as_str()), ("review", "src"));
    assert_eq!(
        serde_json::to_value(&line.rest).unwrap(),
        json!([{"type":"knowledge_ref","slug":"style"},{"type":"text","text":" \nmore"}])
    );
    for text in ["//review x", "/etc/hosts is", "/", "hi /review"] {
        let mut c = Composer::new();
        typed(&mut c, text);
        assert!(c.command_line().is_none(), "{text:?}");
    }
}
