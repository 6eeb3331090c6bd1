//! Allow and deny rules: `TOOL:PATTERN`, parsed once when the pod starts (or
//! when a session decision is replayed from the log) and matched per call.
//!
//! The grammar, from `docs/approvals.md`:
//! - `bash:COMMAND` — a command pattern, `*` the only wildcard;
//! - `write:GLOB` — the workspace-relative path of `write_file`/`edit_file`;
//! - `read:GLOB` — the path argument of the read-only tools;
//! - `TOOL:*` — a tool by name, glob allowed (`mcp__git__*:*`);
//! - a bare `TOOL` means `TOOL:*`.

use std::fmt;
use std::str::FromStr;

use globset::{GlobBuilder, GlobMatcher};

use super::bash::collapse;
use crate::tools::registry;

/// The rule grammar, quoted in every parse error so a user sees what a
/// valid rule looks like.
const GRAMMAR: &str = "rules are TOOL:PATTERN: `bash:COMMAND` (`*` matches anything, \
                       e.g. `bash:git status*`), `write:GLOB` or `read:GLOB` (a \
                       workspace-relative path glob, e.g. `write:docs/**`), or `TOOL:*` \
                       for a tool by name (glob allowed, e.g. `mcp__git__*:*`)";

/// A rule the user wrote that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rule `{rule}`: {reason}; {GRAMMAR}")]
pub struct RuleError {
    pub rule: String,
    pub reason: String,
}

/// An allow or deny rule.
#[derive(Debug, Clone)]
pub struct Rule {
    tool: String,
    pattern: String,
    kind: RuleKind,
}

#[derive(Debug, Clone)]
pub(crate) enum RuleKind {
    /// `bash:PATTERN`, matched by [`super::bash::wildcard_match`].
    Bash,
    Write(GlobMatcher),
    Read(GlobMatcher),
    /// A tool name glob; its pattern is always `*`.
    Tool(GlobMatcher),
    /// `web_fetch:PATTERN`, matched against the serialised URL with the
    /// same `*` wildcard as `bash:` rules.
    Fetch,
}

impl Rule {
    pub(crate) fn kind(&self) -> &RuleKind {
        &self.kind
    }

    /// The command pattern of a `bash:` rule.
    pub(crate) fn bash_pattern(&self) -> Option<&str> {
        matches!(self.kind, RuleKind::Bash).then_some(self.pattern.as_str())
    }

    /// The URL pattern of a `web_fetch:` rule.
    pub(crate) fn fetch_pattern(&self) -> Option<&str> {
        matches!(self.kind, RuleKind::Fetch).then_some(self.pattern.as_str())
    }

    /// Whether this is a tool-name rule naming `tool`.
    pub(crate) fn names_tool(&self, tool: &str) -> bool {
        matches!(&self.kind, RuleKind::Tool(glob) if glob.is_match(tool))
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool && self.pattern == other.pattern
    }
}

impl Eq for Rule {}

/// The canonical text: what `FromStr` reads back to an equal rule.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.tool, self.pattern)
    }
}

fn path_glob(text: &str, pattern: &str) -> Result<(String, GlobMatcher), RuleError> {
    let error = |reason: String| RuleError {
        rule: text.to_owned(),
        reason,
    };
    let pattern = pattern.trim_start_matches("./");
    if pattern.starts_with('/') {
        return Err(error(
            "paths in rules are relative to the workspace root, not absolute".into(),
        ));
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err(error(
            "`..` cannot appear in a path rule: rules only cover the workspace".into(),
        ));
    }
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| error(format!("bad glob: {}", e.kind())))?;
    Ok((pattern.to_owned(), glob.compile_matcher()))
}

/// A rule naming a tool must be able to name one: a rule that can never
/// match is a guard the user believes in and that does nothing. Tool names
/// are built-in ones or `mcp__SERVER__TOOL`, in `[A-Za-z0-9_-]`; a glob may
/// add `*?[]{},`. The usual slip, a space for the colon (`bash rm *`), is
/// answered with the rule that was meant.
fn check_tool_name(tool: &str) -> Result<(), String> {
    const GLOB: &[char] = &['*', '?', '[', ']', '{', '}', ','];
    if let Some(bad) = tool
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-' || GLOB.contains(c)))
    {
        let meant = match tool.split_once(char::is_whitespace) {
            Some((first @ ("bash" | "write" | "read"), rest)) => {
                format!(" (did you mean `{first}:{}`?)", rest.trim())
            }
            _ => String::new(),
        };
        return Err(format!("`{bad}` cannot be part of a tool name{meant}"));
    }
    let known = registry::lookup(tool).is_some();
    if !tool.contains(GLOB) && !known && !tool.starts_with("mcp__") {
        return Err(format!(
            "no tool is called `{tool}` (the tools are {} and the MCP servers' \
             mcp__SERVER__TOOL)",
            registry::TOOLS
                .iter()
                .map(|def| def.facts.name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

impl FromStr for Rule {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let error = |reason: &str| RuleError {
            rule: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (tool, pattern) = match text.split_once(':') {
            Some((tool, pattern)) => (tool.trim(), pattern.trim()),
            None => (text, "*"),
        };
        if tool.is_empty() {
            return Err(error("the tool name before `:` is missing"));
        }
        if pattern.is_empty() {
            return Err(error("the pattern after `:` is empty"));
        }
        let (pattern, kind) = match tool {
            registry::BASH_RULE => (collapse(pattern), RuleKind::Bash),
            registry::FETCH_RULE => (pattern.to_owned(), RuleKind::Fetch),
            "write" => {
                let (pattern, glob) = path_glob(text, pattern)?;
                (pattern, RuleKind::Write(glob))
            }
            "read" => {
                let (pattern, glob) = path_glob(text, pattern)?;
                (pattern, RuleKind::Read(glob))
            }
            _ => {
                if pattern != "*" {
                    return Err(error(&format!(
                        "a rule naming the tool `{tool}` takes only `*` as its pattern \
                         (use bash:, write: or read: to match commands and paths)"
                    )));
                }
                check_tool_name(tool).map_err(|reason| error(&reason))?;
                let glob = GlobBuilder::new(tool)
                    .build()
                    .map_err(|e| error(&format!("bad tool name glob: {}", e.kind())))?;
                (pattern.to_owned(), RuleKind::Tool(glob.compile_matcher()))
            }
        };
        Ok(Rule {
            tool: tool.to_owned(),
            pattern,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> Rule {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn error(s: &str) -> String {
        match s.parse::<Rule>() {
            Ok(r) => panic!("{s} parsed as {r}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn canonical_text_round_trips() {
        for (input, canonical) in [
            ("bash:git status*", "bash:git status*"),
            ("  bash :  git   status *  ", "bash:git status *"),
            ("bash", "bash:*"),
            ("mcp__git__*", "mcp__git__*:*"),
            ("mcp__git__*:*", "mcp__git__*:*"),
            ("write:./docs/**", "write:docs/**"),
            ("read:src/*.rs", "read:src/*.rs"),
            ("bash:echo a:b", "bash:echo a:b"),
            ("write_file:*", "write_file:*"),
        ] {
            let parsed = rule(input);
            assert_eq!(parsed.to_string(), canonical, "{input}");
            assert_eq!(rule(canonical), parsed, "{canonical}");
        }
    }

    #[test]
    fn bad_rules_name_the_rule_and_the_grammar() {
        for (input, reason) in [
            ("", "tool name before `:` is missing"),
            (":x", "tool name before `:` is missing"),
            ("bash:", "pattern after `:` is empty"),
            ("write:  ", "pattern after `:` is empty"),
            ("write:/etc/*", "relative to the workspace root"),
            ("read:../x", "`..` cannot appear"),
            ("write:src/[a", "bad glob"),
            ("write_file:src/*", "takes only `*`"),
            ("mcp__x:do it", "takes only `*`"),
            ("bash rm *", "did you mean `bash:rm *`?"),
            ("write docs/**", "did you mean `write:docs/**`?"),
            ("frobnicate:*", "no tool is called `frobnicate`"),
            ("rm -rf", "` ` cannot be part of a tool name"),
            ("mcp__[:*", "bad tool name glob"),
        ] {
            let message = error(input);
            assert!(message.contains(reason), "{input}: {message}");
            assert!(
                message.contains(&format!("`{}`", input.trim())),
                "{message}"
            );
            assert!(message.contains("rules are TOOL:PATTERN"), "{message}");
        }
    }

    #[test]
    fn path_globs_keep_star_within_a_directory() {
        let Rule {
            kind: RuleKind::Write(docs_star),
            ..
        } = rule("write:docs/*")
        else {
            panic!("not a write rule")
        };
        assert!(docs_star.is_match("docs/a.md"));
        assert!(!docs_star.is_match("docs/a/b.md"));
        let Rule {
            kind: RuleKind::Write(docs_all),
            ..
        } = rule("write:docs/**")
        else {
            panic!("not a write rule")
        };
        assert!(docs_all.is_match("docs/a/b.md"));
        assert!(docs_all.is_match("docs/a.md"));
        assert!(!docs_all.is_match("src/docs/a.md"));
    }

    #[test]
    fn tool_rules_match_names_by_glob() {
        let git = rule("mcp__git__*");
        assert!(git.names_tool("mcp__git__status"));
        assert!(!git.names_tool("mcp__github__issues"));
        assert!(rule("*").names_tool("bash"));
        assert!(
            !rule("bash").names_tool("bash"),
            "bash rules are command rules"
        );
    }
}
