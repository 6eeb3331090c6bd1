//! Entry points for the `bash_split` fuzz target in `fuzz/` and the
//! differential test against `brush-parser`, not an API: how the splitter
//! that guards every `bash:` allow rule reads a line.

/// A command line as the splitter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The simple commands' texts, those inside substitutions included.
    pub commands: Vec<String>,
    /// A command or process substitution is in the line.
    pub substitution: bool,
    /// The splitter cannot vouch for its reading: no allow rule covers it.
    pub uncertain: bool,
}

/// Splits `line` as [`super::Policy::decide`] does before matching rules.
pub fn split(line: &str) -> Split {
    let parsed = super::bash::parse(line);
    Split {
        commands: parsed.commands.into_iter().map(|c| c.text).collect(),
        substitution: parsed.substitution,
        uncertain: parsed.uncertain,
    }
}
