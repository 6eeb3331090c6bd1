//! Answers typed per method: what each method's `response` carries.
//!
//! On the wire every answer is one `response` frame, [`Response`]: a
//! struct of optional fields with no name of the method it answers. A
//! client cannot tell one answer from another by reading it — an untagged
//! enum would take the first variant whose fields fit, and `{"ok":true}`
//! fits half of them — but it always knows what it asked. So the type
//! comes from the question: each method family has its answer here, which
//! the pod builds and turns into the wire struct (`From`), and which a
//! client reads back from it ([`Answer::read`], saying which field is
//! missing) instead of guessing from which fields are set.
//!
//! [`Response`] stays the one wire type, so the frames, the schema
//! (`docs/protocol.schema.json`) and the bytes of every answer are exactly
//! what they were (the tests below hold each kind to its bytes).

use uuid::Uuid;

use super::{
    AccessLevel, AgentInfo, AgentWorktree, CompletionItem, FileChange, JobInfo, LogLine,
    NotRestored, Response, RestoredFile, RuleInfo, SessionInfo, TokenInfo,
};

/// A typed view of a method's `response`.
pub trait Answer: Sized {
    /// The answer a `response` frame holds, or the field it lacks.
    fn read(response: Response) -> Result<Self, Missing>;
}

/// A `response` without a field its method's answer must have: the pod
/// answered another question, or is not this protocol's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pod's answer has no `{0}`")]
pub struct Missing(pub &'static str);

/// The wire struct is an answer too, for a client that wants every field.
impl Answer for Response {
    fn read(response: Response) -> Result<Self, Missing> {
        Ok(response)
    }
}

fn ok(response: &Response) -> Result<(), Missing> {
    match response.ok {
        Some(true) => Ok(()),
        _ => Err(Missing("ok")),
    }
}

/// Answers of one or more required fields, nothing else: the struct, its
/// wire form and its reading, from one list.
macro_rules! answers {
    ($(
        $(#[$doc:meta])*
        $name:ident { $( $(#[$fdoc:meta])* $field:ident: $ty:ty ),+ $(,)? }
    )+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: $ty, )+
        }

        impl From<$name> for Response {
            fn from(answer: $name) -> Response {
                Response {
                    $( $field: Some(answer.$field), )+
                    ..Response::default()
                }
            }
        }

        impl Answer for $name {
            fn read(response: Response) -> Result<Self, Missing> {
                Ok($name {
                    $( $field: response.$field.ok_or(Missing(stringify!($field)))?, )+
                })
            }
        }
    )+};
}

answers! {
    /// `run`: the run was taken.
    Queued {
        /// How many runs are ahead of it (0: it started at once).
        queued: usize,
    }
    /// `get_session`, `get_entries`: a session's log lines.
    Lines {
        session_id: Uuid,
        entries: Vec<LogLine>,
    }
    /// `list_sessions`: newest first.
    Sessions { sessions: Vec<SessionInfo> }
    /// `list_rules`: the conversation's allow and deny rules.
    Rules { rules: Vec<RuleInfo> }
    /// `list_jobs`: every background job, in start order.
    Jobs { jobs: Vec<JobInfo> }
    /// `get_job_output`: that one job (as `jobs`' only item) and what it
    /// printed so far, as kept.
    JobOutput {
        jobs: Vec<JobInfo>,
        output: String,
    }
    /// `list_agents`: this pod's children, in start order.
    Agents { agents: Vec<AgentInfo> }
    /// `get_diff`: the unified diff, the files it covers, whether it was cut.
    Diff {
        diff: String,
        files: Vec<FileChange>,
        truncated: bool,
    }
    /// `get_file`: the bytes (base64) and whether the path is a `file` or
    /// a `symlink`.
    File {
        content: String,
        file_type: String,
    }
    /// `put_blob`: the blob stored.
    BlobStored {
        blob: String,
        size: u64,
        media_type: String,
    }
    /// `get_blob`: the blob and its bytes (base64).
    Blob {
        blob: String,
        media_type: String,
        data: String,
    }
    /// `issue_token`: the new token, shown this once, its id and scope.
    Token {
        token: String,
        id: String,
        scope: AccessLevel,
    }
    /// `issue_pairing`: the web client's URL with its one-time code.
    Pairing { url: String }
    /// `list_tokens`: every token, oldest first.
    Tokens { tokens: Vec<TokenInfo> }
}

/// The method took effect and has nothing more to say (`{"ok":true}`):
/// `hello`, `approve`, `notify`, `pause`, `resume`, `compact`,
/// `shutdown`, `set_approval`, `set_model`, `revoke_rule`, `kill_job`,
/// `revoke_token`, `cancel` without `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack;

impl From<Ack> for Response {
    fn from(Ack: Ack) -> Response {
        Response {
            ok: Some(true),
            ..Response::default()
        }
    }
}

impl Answer for Ack {
    fn read(response: Response) -> Result<Self, Missing> {
        ok(&response).map(|()| Ack)
    }
}

/// `remove_agent`: the child is stopped and its log kept; for a child
/// that worked in its own git worktree, what became of that worktree
/// (removed when clean, kept with a note when not; the branch stays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRemoved {
    pub worktree: Option<AgentWorktree>,
}

impl From<AgentRemoved> for Response {
    fn from(answer: AgentRemoved) -> Response {
        Response {
            ok: Some(true),
            worktree: answer.worktree,
            ..Response::default()
        }
    }
}

impl Answer for AgentRemoved {
    fn read(response: Response) -> Result<Self, Missing> {
        ok(&response).map(|()| AgentRemoved {
            worktree: response.worktree,
        })
    }
}

/// `cancel` with `run`: the run was still queued and is removed
/// (`{"removed":true}`), or it was running and is cancelled (`{"ok":true}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled {
    pub removed: bool,
}

impl From<Cancelled> for Response {
    fn from(answer: Cancelled) -> Response {
        match answer.removed {
            true => Response {
                removed: Some(true),
                ..Response::default()
            },
            false => Ack.into(),
        }
    }
}

impl Answer for Cancelled {
    fn read(response: Response) -> Result<Self, Missing> {
        if response.removed == Some(true) {
            return Ok(Cancelled { removed: true });
        }
        ok(&response).map(|()| Cancelled { removed: false })
    }
}

/// `new_session`, `fork`, `resume_session`: the session now current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switched {
    pub session_id: Uuid,
}

impl From<Switched> for Response {
    fn from(answer: Switched) -> Response {
        Response {
            ok: Some(true),
            session_id: Some(answer.session_id),
            ..Response::default()
        }
    }
}

impl Answer for Switched {
    fn read(response: Response) -> Result<Self, Missing> {
        ok(&response)?;
        Ok(Switched {
            session_id: response.session_id.ok_or(Missing("session_id"))?,
        })
    }
}

/// `list_completions`: the matches with their kind and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    pub items: Vec<CompletionItem>,
}

impl From<Completions> for Response {
    /// `completions` repeats the values, for clients older than `items`.
    fn from(answer: Completions) -> Response {
        Response {
            completions: Some(answer.items.iter().map(|i| i.value.clone()).collect()),
            items: Some(answer.items),
            ..Response::default()
        }
    }
}

impl Answer for Completions {
    /// A pod older than `items` sends the bare values (`completions`).
    fn read(response: Response) -> Result<Self, Missing> {
        if let Some(items) = response.items {
            return Ok(Completions { items });
        }
        let values = response.completions.ok_or(Missing("items"))?;
        let items = values
            .into_iter()
            .map(|value| CompletionItem {
                value,
                kind: String::new(),
                detail: None,
            })
            .collect();
        Ok(Completions { items })
    }
}

/// `rewind`: what was put back, in which session the conversation goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewound {
    pub session_id: Uuid,
    pub files_restored: Vec<RestoredFile>,
    /// Paths left alone: changed outside a turn since.
    pub conflicts: Vec<String>,
    pub not_restored: Vec<NotRestored>,
    /// Processes tools left running that were killed first (absent on the
    /// wire when none were).
    pub processes_stopped: Vec<u32>,
}

impl From<Rewound> for Response {
    fn from(answer: Rewound) -> Response {
        Response {
            ok: Some(true),
            session_id: Some(answer.session_id),
            files_restored: Some(answer.files_restored),
            conflicts: Some(answer.conflicts),
            not_restored: Some(answer.not_restored),
            processes_stopped: (!answer.processes_stopped.is_empty())
                .then_some(answer.processes_stopped),
            ..Response::default()
        }
    }
}

impl Answer for Rewound {
    fn read(response: Response) -> Result<Self, Missing> {
        ok(&response)?;
        Ok(Rewound {
            session_id: response.session_id.ok_or(Missing("session_id"))?,
            files_restored: response.files_restored.ok_or(Missing("files_restored"))?,
            conflicts: response.conflicts.ok_or(Missing("conflicts"))?,
            not_restored: response.not_restored.ok_or(Missing("not_restored"))?,
            processes_stopped: response.processes_stopped.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;

    /// The frame an answer makes, as the pod sends it.
    fn frame(answer: impl Into<Response>) -> String {
        let response = Response {
            request_id: Some("r".into()),
            ..answer.into()
        };
        String::from_utf8(Event::Response(response).to_frame().to_vec()).unwrap()
    }

    /// Each kind's bytes, written out: what the pod sent before answers
    /// were typed, and what clients parse.
    #[test]
    fn every_answer_keeps_its_bytes_on_the_wire() {
        let id = Uuid::nil();
        let cases: Vec<(String, &str)> = vec![
            (
                frame(Ack),
                r#"{"type":"response","request_id":"r","ok":true}"#,
            ),
            (
                frame(Queued { queued: 2 }),
                r#"{"type":"response","request_id":"r","queued":2}"#,
            ),
            (
                frame(Cancelled { removed: true }),
                r#"{"type":"response","request_id":"r","removed":true}"#,
            ),
            (
                frame(Cancelled { removed: false }),
                r#"{"type":"response","request_id":"r","ok":true}"#,
            ),
            (
                frame(Switched { session_id: id }),
                r#"{"type":"response","request_id":"r","session_id":"00000000-0000-0000-0000-000000000000","ok":true}"#,
            ),
            (
                frame(Completions {
                    items: vec![CompletionItem {
                        value: "src/".into(),
                        kind: "dir".into(),
                        detail: None,
                    }],
                }),
                r#"{"type":"response","request_id":"r","completions":["src/"],"items":[{"value":"src/","kind":"dir","detail":null}]}"#,
            ),
            (
                frame(Rules { rules: Vec::new() }),
                r#"{"type":"response","request_id":"r","rules":[]}"#,
            ),
            (
                frame(Rewound {
                    session_id: id,
                    files_restored: Vec::new(),
                    conflicts: vec!["a".into()],
                    not_restored: Vec::new(),
                    processes_stopped: Vec::new(),
                }),
                r#"{"type":"response","request_id":"r","session_id":"00000000-0000-0000-0000-000000000000","ok":true,"files_restored":[],"conflicts":["a"],"not_restored":[]}"#,
            ),
            (
                frame(Rewound {
                    session_id: id,
                    files_restored: Vec::new(),
                    conflicts: Vec::new(),
                    not_restored: Vec::new(),
                    processes_stopped: vec![7],
                }),
                r#"{"type":"response","request_id":"r","session_id":"00000000-0000-0000-0000-000000000000","ok":true,"files_restored":[],"conflicts":[],"not_restored":[],"processes_stopped":[7]}"#,
            ),
            (
                frame(Diff {
                    diff: "d".into(),
                    files: Vec::new(),
                    truncated: false,
                }),
                r#"{"type":"response","request_id":"r","diff":"d","files":[],"truncated":false}"#,
            ),
            (
                frame(File {
                    content: "eA==".into(),
                    file_type: "file".into(),
                }),
                r#"{"type":"response","request_id":"r","content":"eA==","file_type":"file"}"#,
            ),
            (
                frame(BlobStored {
                    blob: "sha256:ab".into(),
                    size: 3,
                    media_type: "image/png".into(),
                }),
                r#"{"type":"response","request_id":"r","blob":"sha256:ab","size":3,"media_type":"image/png"}"#,
            ),
            (
                frame(Blob {
                    blob: "sha256:ab".into(),
                    media_type: "image/png".into(),
                    data: "eA==".into(),
                }),
                r#"{"type":"response","request_id":"r","blob":"sha256:ab","media_type":"image/png","data":"eA=="}"#,
            ),
            (
                frame(Token {
                    token: "t".into(),
                    id: "i".into(),
                    scope: AccessLevel::Read,
                }),
                r#"{"type":"response","request_id":"r","token":"t","id":"i","scope":"read"}"#,
            ),
            (
                frame(Pairing { url: "u".into() }),
                r#"{"type":"response","request_id":"r","url":"u"}"#,
            ),
            (
                frame(Tokens { tokens: Vec::new() }),
                r#"{"type":"response","request_id":"r","tokens":[]}"#,
            ),
            (
                frame(Jobs { jobs: Vec::new() }),
                r#"{"type":"response","request_id":"r","jobs":[]}"#,
            ),
            (
                frame(JobOutput {
                    jobs: Vec::new(),
                    output: "o".into(),
                }),
                r#"{"type":"response","request_id":"r","jobs":[],"output":"o"}"#,
            ),
            (
                frame(Agents { agents: Vec::new() }),
                r#"{"type":"response","request_id":"r","agents":[]}"#,
            ),
            (
                frame(Sessions {
                    sessions: Vec::new(),
                }),
                r#"{"type":"response","request_id":"r","sessions":[]}"#,
            ),
            (
                frame(Lines {
                    session_id: id,
                    entries: Vec::new(),
                }),
                r#"{"type":"response","request_id":"r","session_id":"00000000-0000-0000-0000-000000000000","entries":[]}"#,
            ),
        ];
        for (made, wire) in cases {
            assert_eq!(made.trim_end(), wire);
        }
    }

    fn wire(json: &str) -> Response {
        match serde_json::from_str::<Event>(json).unwrap() {
            Event::Response(response) => response,
            other => panic!("not a response: {other:?}"),
        }
    }

    #[test]
    fn an_answer_reads_back_what_it_wrote_and_names_what_is_missing() {
        let rewound = Rewound {
            session_id: Uuid::new_v4(),
            files_restored: Vec::new(),
            conflicts: vec!["a".into()],
            not_restored: Vec::new(),
            processes_stopped: vec![3],
        };
        assert_eq!(Rewound::read(rewound.clone().into()), Ok(rewound));
        for removed in [true, false] {
            let cancelled = Cancelled { removed };
            assert_eq!(Cancelled::read(cancelled.into()), Ok(cancelled));
        }
        assert_eq!(
            Diff::read(wire(r#"{"type":"response","request_id":"r","ok":true}"#)),
            Err(Missing("diff"))
        );
        assert_eq!(
            Ack::read(wire(r#"{"type":"response","request_id":"r","queued":0}"#)),
            Err(Missing("ok"))
        );
        assert_eq!(
            Ack::read(wire(r#"{"type":"response","ok":false}"#)),
            Err(Missing("ok"))
        );
        // A pod older than `items`.
        let old = Completions::read(wire(r#"{"type":"response","completions":["src/"]}"#));
        assert_eq!(old.unwrap().items[0].value, "src/");
    }
}
