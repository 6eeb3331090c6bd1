//! `mcp__SERVER__TOOL`: the names MCP tools are offered to the model under.
//!
//! Model APIs accept tool names of `[A-Za-z0-9_-]{1,64}`; MCP allows more
//! (dots, slashes, any length). Other characters become `_`, and a name over
//! 64 characters is cut and ends with a hash of the original server and tool
//! names, so two long names sharing a prefix still differ.

/// The longest tool name the model APIs accept.
const MAX_LEN: usize = 64;
/// `_` and 8 hex digits.
const HASH_LEN: usize = 9;

/// `mcp__SERVER__`: what every tool of this server starts with.
pub(super) fn prefix(server: &str) -> String {
    format!("mcp__{}__", sanitize(server))
}

/// Whether `mcp__SERVER__` ends where the server's name does: with no `__`
/// in it and no `_` at its end, the first `__` after `mcp__` is the
/// separator, so server `x` tool `y__z` and server `x__y` tool `z` cannot
/// both be `mcp__x__y__z`. Config names that fail this are refused.
pub(super) fn separates(server: &str) -> bool {
    let name = sanitize(server);
    !name.contains("__") && !name.ends_with('_')
}

/// The name the model calls `tool` of `server` by.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("{}{}", prefix(server), sanitize(tool));
    if name.len() <= MAX_LEN {
        return name;
    }
    let hash = fnv1a(format!("{server}\0{tool}").as_bytes());
    format!("{}_{:08x}", &name[..MAX_LEN - HASH_LEN], hash as u32)
}

fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a: stable across builds and platforms, unlike `std`'s hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_that_would_blur_the_separator_are_told() {
        assert!(separates("git"));
        assert!(separates("_a"));
        assert!(!separates("x__y"));
        assert!(!separates("x."));
        assert!(!separates("a_"));
    }

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(tool_name("git", "status"), "mcp__git__status");
        assert_eq!(tool_name("my-db", "run_query"), "mcp__my-db__run_query");
    }

    #[test]
    fn other_characters_become_underscores() {
        assert_eq!(tool_name("gh.com", "repo/list"), "mcp__gh_com__repo_list");
        assert_eq!(tool_name("é", "a b"), "mcp_____a_b");
    }

    #[test]
    fn long_names_are_cut_to_64_and_end_with_a_stable_hash() {
        let a = tool_name("server", &"x".repeat(100));
        let b = tool_name("server", &format!("{}y", "x".repeat(99)));
        assert_eq!(a.len(), 64);
        assert_eq!(b.len(), 64);
        assert_ne!(a, b);
        assert!(a.starts_with("mcp__server__xxx"));
        assert_eq!(a, tool_name("server", &"x".repeat(100)));
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
}
