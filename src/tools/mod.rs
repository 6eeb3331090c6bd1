//! The tools the model can call, all confined to the workspace.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::provider::ToolSpec;
use crate::workspace::Workspace;

/// Limits every tool call obeys.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    pub bash_timeout: Duration,
    /// Output longer than this is cut to its head and tail, with a marker.
    pub output_cap_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self {
            bash_timeout: Duration::from_secs(120),
            output_cap_bytes: 32 * 1024,
        }
    }
}

/// What a tool call produced, as the model will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub output: String,
    pub is_error: bool,
}

pub struct Toolbox {
    #[allow(dead_code)]
    workspace: Workspace,
    #[allow(dead_code)]
    limits: ToolLimits,
}

impl Toolbox {
    pub fn new(workspace: Workspace, limits: ToolLimits) -> Self {
        Self { workspace, limits }
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    pub async fn call(
        &self,
        name: &str,
        _arguments: &Value,
        _cancel: CancellationToken,
    ) -> ToolOutcome {
        ToolOutcome {
            output: format!("unknown tool {name:?}"),
            is_error: true,
        }
    }
}
