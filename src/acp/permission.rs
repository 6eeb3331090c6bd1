//! An `approval_request` as ACP's `session/request_permission`, and the
//! editor's choice as an `approve`.
//!
//! The four options are the pod's four answers. An answer another client
//! gives first withdraws the editor's request: the bridge drops it (the SDK
//! then sends `$/cancel_request`) and ignores a reply that comes anyway.

use serde_json::{json, Value};

use crate::protocol::{Decision, Method, Scope};

/// The option ids, each the `approve` it stands for.
const OPTIONS: [(&str, &str, &str, Decision, Option<Scope>); 4] = [
    (
        "allow_once",
        "Allow once",
        "allow_once",
        Decision::Allow,
        Some(Scope::Once),
    ),
    (
        "allow_session",
        "Allow for this session",
        "allow_always",
        Decision::Allow,
        Some(Scope::Session),
    ),
    (
        "allow_always",
        "Always allow (saved to the config file)",
        "allow_always",
        Decision::Allow,
        Some(Scope::Always),
    ),
    ("deny", "Deny", "reject_once", Decision::Deny, None),
];

/// The `session/request_permission` params for one approval request.
pub fn request(session_id: &str, call_id: &str, tool: &str, summary: &str, preview: &str) -> Value {
    let options: Vec<Value> = OPTIONS
        .iter()
        .map(|(id, name, kind, ..)| json!({"optionId": id, "name": name, "kind": kind}))
        .collect();
    json!({
        "sessionId": session_id,
        "toolCall": {
            "toolCallId": call_id,
            "title": summary,
            "kind": super::updates::kind(tool),
            "status": "pending",
            "content": [{"type": "content", "content": {"type": "text", "text": preview}}],
        },
        "options": options,
    })
}

/// The `approve` for the editor's reply (its `outcome`, as JSON), or `None`
/// when it chose nothing (`cancelled`: the request stays pending for any
/// other client to answer).
pub fn answer(call_id: &str, outcome: &Value) -> Option<Method> {
    if outcome.get("outcome").and_then(Value::as_str) != Some("selected") {
        return None;
    }
    let chosen = outcome.get("optionId").and_then(Value::as_str)?;
    let (.., decision, scope) = OPTIONS.iter().find(|(id, ..)| *id == chosen)?;
    Some(Method::Approve {
        call_id: call_id.to_owned(),
        decision: *decision,
        scope: *scope,
        message: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_is_the_approve_it_names() {
        let chosen = |id: &str| answer("c1", &json!({"outcome": "selected", "optionId": id}));
        let scope = |m: Option<Method>| match m {
            Some(Method::Approve {
                decision, scope, ..
            }) => (decision, scope),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            scope(chosen("allow_once")),
            (Decision::Allow, Some(Scope::Once))
        );
        assert_eq!(
            scope(chosen("allow_session")),
            (Decision::Allow, Some(Scope::Session))
        );
        assert_eq!(
            scope(chosen("allow_always")),
            (Decision::Allow, Some(Scope::Always))
        );
        assert_eq!(scope(chosen("deny")), (Decision::Deny, None));
        assert_eq!(chosen("other"), None);
        assert_eq!(answer("c1", &json!({"outcome": "cancelled"})), None);
    }
}
