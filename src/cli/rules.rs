//! `pod rules` and `pod rules revoke RULE`: the conversation's rules, where
//! each came from, and revoking one a decision added (`list_rules`,
//! `revoke_rule`).

use std::process::ExitCode;

use crate::protocol::answer::{Ack, Rules};
use crate::protocol::{Method, Request, RuleInfo};

use super::args::RulesAction;
use super::connect::{ask, connect, exit, snapshot};
use super::Paths;

pub fn run(paths: &Paths, action: Option<RulesAction>) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        snapshot(&mut events, &paths.endpoint).await?;
        match action {
            None => match ask::<Rules>(&mut events, &mut sink, Method::ListRules).await? {
                Ok(answer) => {
                    print!("{}", table(&answer.rules));
                    Ok(ExitCode::SUCCESS)
                }
                Err(why) => refused(&why),
            },
            Some(RulesAction::Revoke { rule }) => {
                sink.send(&Request::new(Method::Hello {
                    client: "pod rules".into(),
                }))
                .await?;
                match ask::<Ack>(
                    &mut events,
                    &mut sink,
                    Method::RevokeRule { rule: rule.clone() },
                )
                .await?
                {
                    Ok(_) => {
                        println!("revoked: {rule}");
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(why) => refused(&why),
                }
            }
        }
    })
}

fn refused(why: &crate::client::Refusal) -> anyhow::Result<ExitCode> {
    eprintln!("pod: {why}");
    Ok(ExitCode::from(exit::FAILED))
}

/// One line a rule: kind, source, the rule (a decision's also says where
/// in the log it was made).
fn table(rules: &[RuleInfo]) -> String {
    if rules.is_empty() {
        return "no rules: every call is decided by the approval mode\n".into();
    }
    let mut out = String::new();
    for r in rules {
        let origin = match (&r.session_id, r.seq) {
            (Some(session), Some(seq)) => {
                let short: String = session.to_string().chars().take(8).collect();
                format!("decision {short}#{seq}")
            }
            _ => r.source.clone(),
        };
        out.push_str(&format!("{:<5}  {:<17}  {}\n", r.kind, origin, r.rule));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_listed_one_a_line_with_where_they_came_from() {
        let id = uuid::Uuid::parse_str("0123abcd-0000-0000-0000-000000000000").unwrap();
        let rules = [
            RuleInfo {
                rule: "bash:rm *".into(),
                kind: "deny".into(),
                source: "config".into(),
                session_id: None,
                seq: None,
            },
            RuleInfo {
                rule: "bash:git status *".into(),
                kind: "allow".into(),
                source: "decision".into(),
                session_id: Some(id),
                seq: Some(7),
            },
        ];
        assert_eq!(
            table(&rules),
            "deny   config             bash:rm *\nallow  decision 0123abcd#7  bash:git status *\n"
        );
        assert!(table(&[]).starts_with("no rules"));
    }
}
