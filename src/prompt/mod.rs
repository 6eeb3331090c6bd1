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
pub fn render(limits: &ToolLimits) -> String {
    TEMPLATE
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to the prompt shows up as a reviewed snapshot diff.
    #[test]
    fn the_default_prompt() {
        let prompt = render(&ToolLimits::default());
        assert!(!prompt.contains('{'), "every placeholder is filled");
        insta::assert_snapshot!(prompt);
    }
}
