//! The composer: what the input buffer sends as segments, history and
//! multi-line editing.

use pod::tui::composer::{paste_label, Composer};
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
    assert_eq!(c.refresh_completion(|| "r1".into()), Some("sr".into()));
    assert!(!c.set_completions("old", vec!["x".into()]));
    assert!(c.set_completions("r1", vec!["src/".into()]));
    c.accept_completion();
    assert_eq!(c.plain_text().as_deref(), Some("read @src/"));
    assert_eq!(c.refresh_completion(|| "r2".into()), Some("src/".into()));
    c.set_completions("r2", vec!["src/lib.rs".into(), "src/main.rs".into()]);
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
    assert_eq!(c.at_token(), None);
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
    c.kill_to_line_start();
    assert_eq!(c.plain_text().as_deref(), Some("abX\ncdef\n"));
}

#[test]
fn whitespace_only_input_has_no_segments() {
    let mut c = Composer::new();
    typed(&mut c, "  \n ");
    assert!(c.segments().is_empty());
}
