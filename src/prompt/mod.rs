//! The system prompt: what the model is told once, before the conversation.
//!
//! The text lives in `system.md` (docs/prompt.md says what it says and why)
//! so it can be read and reviewed as prose. It is the same for every call of
//! a pod — the changing facts (date, git state, modes) go to the model as
//! the log's `environment` entries instead, so the prompt stays cacheable
//! by providers and a restarted pod tells the model exactly what the log
//! says it was told. Only the tool limits the pod was started with are
//! filled in here.

use crate::tools::ToolLimits;

/// The prompt's text, with `{name}` placeholders for [`render`].
const TEMPLATE: &str = include_str!("system.md");

/// The system prompt for a pod whose tools have these limits.
///
/// `agents`: whether the agent tools are offered (`--max-agents` above 0).
/// Without them the paragraph on delegating goes: it would only cost every
/// request its tokens, which a model with a small window cannot spare.
pub fn render(limits: &ToolLimits, agents: bool) -> String {
    let template: String = if agents {
        TEMPLATE.to_owned()
    } else {
        TEMPLATE
            .lines()
            .filter(|line| !line.starts_with(DELEGATING))
            .map(|line| format!("{line}\n"))
            .collect()
    };
    template
        .replace(
            "{bash_timeout_s}",
            &limits.bash_timeout.as_secs().to_string(),
        )
        .replace(
            "{output_cap_kib}",
            &(limits.output_cap_bytes / 1024).max(1).to_string(),
        )
        .replace("{max_jobs}", &limits.max_jobs.to_string())
}

/// How the paragraph on delegating starts in `system.md`.
const DELEGATING: &str = "- Delegating:";

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to the prompt shows up as a reviewed snapshot diff.
    #[test]
    fn the_default_prompt() {
        let prompt = render(&ToolLimits::default(), true);
        assert!(!prompt.contains('{'), "every placeholder is filled");
        insta::assert_snapshot!(prompt);
    }

    #[test]
    fn without_agent_tools_the_prompt_says_nothing_of_delegating() {
        let with = render(&ToolLimits::default(), true);
        let without = render(&ToolLimits::default(), false);
        assert!(with.contains("spawn_agent"));
        assert!(!without.contains("spawn_agent"), "{without}");
        assert_eq!(with.lines().count(), without.lines().count() + 1);
    }
}
