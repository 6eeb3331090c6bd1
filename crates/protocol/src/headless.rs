//! What `pod exec --json` prints besides the socket's frames: its last
//! line, the run's result (docs/headless.md). Not a frame of the socket,
//! but in `docs/protocol.schema.json` (`#/$defs/ExecResult`) so that a
//! harness can check what it parses.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{TurnEndReason, TurnError, Usage};

/// The last line of `pod exec --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecResult {
    /// Always `result`.
    #[serde(rename = "type")]
    pub kind: ExecResultType,
    /// How the run ended: its turn's `turn_end` reason, or `error` when
    /// `--timeout` or `--max-tokens` ended it, the pod refused the task, or
    /// the pod stopped before the turn ended.
    pub reason: TurnEndReason,
    /// Why, when `reason` is `error` or `interrupted`: the `turn_end`'s
    /// error, or `timeout` / `budget` for the run's own limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TurnError>,
    /// The run's session (`pod log SESSION` prints it).
    pub session_id: Uuid,
    /// The sum over the run's model calls, child pods' included.
    pub usage: Usage,
    /// From the start of `pod exec` to the end of the run.
    pub duration_ms: u64,
    /// The final assistant text: the text blocks after the run's last tool
    /// results (what stdout shows without `--json`).
    pub text: String,
    /// The file `--emit-patch` wrote, or null (not asked for, or no patch
    /// could be made: stderr says why).
    pub patch: Option<String>,
}

/// The `type` of [`ExecResult`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecResultType {
    Result,
}
