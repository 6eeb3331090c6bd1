//! `update_plan`: the checklist the model keeps for the user.
//!
//! The tool does nothing but check its arguments: the call itself, in the
//! log, is the record, and every client shows the latest valid call's
//! items (`tui::plan`, the web client). So a restarted pod, a client that
//! attaches later and `pod log` all see the same plan, with nothing kept
//! anywhere else.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::registry::{Args, Run, Runner, ToolDef};
use super::ToolOutcome;
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;

pub const UPDATE_PLAN: &str = builtin::UPDATE_PLAN.name;

pub const UPDATE_PLAN_TOOL: ToolDef = ToolDef {
    facts: builtin::UPDATE_PLAN,
    spec: |_| spec(),
    args: Args::of::<PlanArgs>(),
    runner: Runner::Toolbox,
    run: Run::Own,
};

/// The most items a plan may have.
pub const MAX_ITEMS: usize = 100;

/// The longest item text, in bytes: a checklist line, not a document.
pub const MAX_TEXT_BYTES: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Done,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub text: String,
    pub status: Status,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct PlanArgs {
    pub items: Vec<Item>,
}

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: UPDATE_PLAN.into(),
        description: format!(
            "Show the user your plan as a checklist, replacing the previous one. Send every \
             item each time, with its status; keep exactly one item in_progress while you \
             work. At most {MAX_ITEMS} items of at most {MAX_TEXT_BYTES} bytes each."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "maxItems": MAX_ITEMS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "One step, in a short sentence."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["text", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["items"],
            "additionalProperties": false
        }),
    }
}

/// Checks a plan; the model reads what is wrong with one it must resend.
pub fn check(args: &PlanArgs) -> Result<(), ToolOutcome> {
    if args.items.len() > MAX_ITEMS {
        return Err(ToolOutcome::error(format!(
            "the plan has {} items; at most {MAX_ITEMS} are shown. Merge steps and send it again.",
            args.items.len()
        )));
    }
    if let Some(at) = args
        .items
        .iter()
        .position(|i| i.text.len() > MAX_TEXT_BYTES)
    {
        return Err(ToolOutcome::error(format!(
            "item {} is longer than {MAX_TEXT_BYTES} bytes; shorten it and send the plan again.",
            at + 1
        )));
    }
    Ok(())
}

/// The call's result: what the user now sees, counted.
pub fn update(args: &PlanArgs) -> ToolOutcome {
    if let Err(e) = check(args) {
        return e;
    }
    let done = args
        .items
        .iter()
        .filter(|i| i.status == Status::Done)
        .count();
    ToolOutcome::ok(format!(
        "plan updated: {done} of {} done; the user sees it.",
        args.items.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(n: usize, text: &str) -> PlanArgs {
        PlanArgs {
            items: (0..n)
                .map(|_| Item {
                    text: text.into(),
                    status: Status::Pending,
                })
                .collect(),
        }
    }

    #[test]
    fn a_plan_is_counted_and_an_oversized_one_refused() {
        assert_eq!(
            update(&plan(3, "step")).output,
            "plan updated: 0 of 3 done; the user sees it."
        );
        let huge = update(&plan(10_000, "step"));
        assert!(
            huge.is_error && huge.output.contains("10000 items"),
            "{huge:?}"
        );
        let long = update(&plan(1, &"x".repeat(MAX_TEXT_BYTES + 1)));
        assert!(long.is_error && long.output.contains("item 1"), "{long:?}");
    }
}
