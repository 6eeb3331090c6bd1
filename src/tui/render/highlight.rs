//! Syntax highlighting of code blocks, with `syntect`'s default syntaxes.
//!
//! The colours are the terminal's own sixteen, chosen by scope through a
//! small theme of our own: a theme of fixed RGB colours is made for one
//! background and is unreadable on the other, while the terminal's palette
//! is whatever its user made readable on their background.

use std::cell::RefCell;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::OnceLock;

use ratatui::style::{Color, Style};
use syntect::easy::HighlightLines;
use syntect::highlighting::{
    Color as SynColor, ScopeSelectors, StyleModifier, Theme, ThemeItem, ThemeSettings,
};
use syntect::parsing::SyntaxSet;

/// Scopes and the ANSI colour (0–15) they are drawn in, `None` for the
/// terminal's foreground; the most specific matching selector wins, as in
/// any TextMate theme. No entry uses white or black, which one of the two
/// kinds of background would swallow.
const PALETTE: &[(&str, Option<u8>)] = &[
    ("comment, punctuation.definition.comment", Some(8)),
    (
        "string, constant.character, markup.inserted, punctuation.definition.string",
        Some(2),
    ),
    (
        "constant.numeric, constant.language, constant.other",
        Some(3),
    ),
    ("keyword, storage", Some(5)),
    ("keyword.operator, punctuation", None),
    (
        "entity.name.function, support.function, meta.function-call.identifier, support.macro",
        Some(4),
    ),
    (
        "entity.name.type, entity.name.class, entity.name.struct, entity.name.enum, \
         support.type, support.class, entity.other.inherited-class",
        Some(6),
    ),
    ("entity.name.tag", Some(4)),
    (
        "entity.other.attribute-name, variable.other.member",
        Some(6),
    ),
    ("markup.heading", Some(6)),
    ("markup.deleted, invalid", Some(1)),
    ("variable.language, variable.parameter", Some(9)),
];

/// A colour meaning "the terminal's own foreground": `alpha` 1 marks it,
/// `alpha` 0 marks an ANSI index in `r`.
const DEFAULT_FG: SynColor = SynColor {
    r: 0,
    g: 0,
    b: 0,
    a: 1,
};

fn ansi(index: u8) -> SynColor {
    SynColor {
        r: index,
        g: 0,
        b: 0,
        a: 0,
    }
}

/// Loads the syntaxes and the theme now, on a thread of its own, so that
/// the first code block on screen does not wait for them.
pub fn preload() {
    std::thread::spawn(|| {
        syntaxes();
        theme();
    });
}

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn theme() -> &'static Theme {
    static THEME: OnceLock<Theme> = OnceLock::new();
    THEME.get_or_init(|| Theme {
        settings: ThemeSettings {
            foreground: Some(DEFAULT_FG),
            ..ThemeSettings::default()
        },
        scopes: PALETTE
            .iter()
            .filter_map(|(selectors, index)| {
                Some(ThemeItem {
                    scope: ScopeSelectors::from_str(selectors).ok()?,
                    style: StyleModifier {
                        foreground: Some(index.map_or(DEFAULT_FG, ansi)),
                        ..StyleModifier::default()
                    },
                })
            })
            .collect(),
        ..Theme::default()
    })
}

fn to_color(c: SynColor) -> Option<Color> {
    if c.a != 0 {
        return None;
    }
    Some(match c.r {
        0 => Color::Black,
        1 => Color::Red,
        2 => Color::Green,
        3 => Color::Yellow,
        4 => Color::Blue,
        5 => Color::Magenta,
        6 => Color::Cyan,
        7 => Color::Gray,
        8 => Color::DarkGray,
        9 => Color::LightRed,
        10 => Color::LightGreen,
        11 => Color::LightYellow,
        12 => Color::LightBlue,
        13 => Color::LightMagenta,
        14 => Color::LightCyan,
        _ => Color::White,
    })
}

/// Lines of (style, text) pieces.
pub type Highlighted = Vec<Vec<(Style, String)>>;

/// Highlighted blocks kept, by language, code and base style: highlighting
/// is slow (a few milliseconds per hundred lines, and far more in debug
/// builds), while the same block is laid out again on every resize, and
/// every finished block of a streaming answer on every frame.
const CACHED_BLOCKS: usize = 64;

type CacheKey = (String, String, Style);

thread_local! {
    static CACHE: RefCell<HashMap<CacheKey, Option<Highlighted>>> = RefCell::new(HashMap::new());
}

/// [`highlight_uncached`], remembered for the last blocks asked for.
pub fn highlight(lang: &str, code: &str, base: Style) -> Option<Highlighted> {
    let key = (lang.to_owned(), code.to_owned(), base);
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return hit;
    }
    let result = highlight_uncached(lang, code, base);
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= CACHED_BLOCKS {
            cache.clear();
        }
        cache.insert(key, result.clone());
    });
    result
}

/// `code` in the language named `lang` (a fence's info string: `rust`,
/// `rs`, `py`, `sh`, …) as lines of (style, text) pieces, each style
/// patched onto `base`. `None` when no syntax knows the language (or the
/// highlighter fails): the caller draws the code plainly.
fn highlight_uncached(lang: &str, code: &str, base: Style) -> Option<Highlighted> {
    let token = lang.split([',', ' ', '{']).next().unwrap_or("").trim();
    if token.is_empty() {
        return None;
    }
    let set = syntaxes();
    let syntax = set
        .find_syntax_by_token(token)
        .or_else(|| set.find_syntax_by_token(&token.to_lowercase()))?;
    let mut h = HighlightLines::new(syntax, theme());
    let mut out = Vec::new();
    for line in code.split_inclusive('\n') {
        let pieces = h.highlight_line(line, set).ok()?;
        out.push(
            pieces
                .into_iter()
                .map(|(style, text)| {
                    let s = match to_color(style.foreground) {
                        Some(fg) => base.fg(fg),
                        None => base,
                    };
                    (s, text.trim_end_matches('\n').to_owned())
                })
                .filter(|(_, t)| !t.is_empty())
                .collect(),
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn color_of(lines: &Highlighted, needle: &str) -> Option<Color> {
        lines
            .iter()
            .flatten()
            .find(|(_, t)| t.contains(needle))
            .and_then(|(s, _)| s.fg)
    }

    #[test]
    fn every_palette_selector_parses() {
        assert_eq!(theme().scopes.len(), PALETTE.len());
    }

    #[test]
    fn rust_is_coloured_by_scope() {
        let code = "// note\nfn main() { let s = \"hi\"; }\n";
        let lines = highlight("rust", code, Style::new()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(color_of(&lines, "note"), Some(Color::DarkGray));
        assert_eq!(color_of(&lines, "fn"), Some(Color::Magenta));
        assert_eq!(color_of(&lines, "hi"), Some(Color::Green));
        assert_eq!(
            color_of(&lines, "="),
            None,
            "operators keep the terminal's colour"
        );
        assert_eq!(color_of(&lines, "main"), Some(Color::Blue));
        let same = highlight("rs", code, Style::new()).unwrap();
        assert_eq!(lines, same, "extensions name languages too");
    }

    #[test]
    fn unknown_languages_are_left_plain() {
        assert!(highlight("klingon", "x", Style::new()).is_none());
        assert!(highlight("", "x", Style::new()).is_none());
    }
}
