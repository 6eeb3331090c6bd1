//! Client → pod methods, and the parsing that turns a raw frame into one.
//!
//! Parsing happens in two steps so that every failure gets the right error
//! code: first the frame must be a UTF-8 JSON object with a string `type`
//! (`bad_frame`), then the type must be known (`unknown_method`), then its
//! fields must fit (`invalid_params`). The `request_id` is read before any of
//! that can fail beyond `bad_frame`, so errors echo it whenever possible.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ApprovalMode, Decision, ErrorCode, Scope, Segment, MAX_JSON_DEPTH};

/// A method with the `request_id` every method may carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub request_id: Option<String>,
    pub method: Method,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Method {
    Run {
        /// At least one: an empty run would send the model an empty message.
        #[schemars(length(min = 1))]
        segments: Vec<Segment>,
    },
    Notify {
        message: String,
    },
    /// Without `run`: the running turn. With it: that run, queued or running.
    Cancel {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<String>,
    },
    Pause,
    Resume,
    Compact,
    Shutdown,
    ListCompletions {
        kind: CompletionKind,
        prefix: String,
    },
    GetSession {
        /// A full id or a unique prefix of at least 4 characters.
        session_id: String,
    },
    /// Older entries of a session, for a client that attached with a tail
    /// snapshot (a read method): the `limit` entries just before
    /// `before_seq`, in order.
    GetEntries {
        /// A full id or a unique prefix of at least 4 characters.
        session_id: String,
        before_seq: u64,
        #[schemars(range(max = 1000))]
        limit: u64,
    },
    /// Names this connection (`approval_decision.client`).
    Hello {
        client: String,
    },
    Approve {
        call_id: String,
        decision: Decision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<Scope>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    SetApproval {
        mode: ApprovalMode,
    },
    ListSessions,
    NewSession,
    Fork {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_seq: Option<u64>,
    },
    ResumeSession {
        session_id: String,
    },
    SetModel {
        model: String,
    },
    /// The conversation's rules, with where each came from (a read method).
    ListRules,
    /// Revokes an allow rule a decision of this conversation added.
    RevokeRule {
        rule: String,
    },
    /// Put files (and perhaps the conversation) back: exactly one of
    /// `before_seq` and `checkpoint`.
    Rewind {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before_seq: Option<u64>,
        /// The session `before_seq` is in: the current one by default, or
        /// one it was compacted from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        force: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill_jobs: Option<bool>,
        /// When a conflict would be left (and no `force`), change nothing —
        /// no file, no conversation — and answer with the conflicts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        abort_on_conflict: Option<bool>,
    },
    /// The unified diff between two checkpoints, or one and the workspace now.
    GetDiff {
        from: String,
        #[serde(default)]
        to: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// Binary files as git's binary patch (`git diff --binary`), so
        /// that `git apply` takes the diff whole; else only named.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        binary: bool,
    },
    /// One path's content in a checkpoint.
    GetFile {
        checkpoint: String,
        path: String,
    },
    /// Stores an image durably; answered with its id (`sha256:<hex>`).
    PutBlob {
        media_type: String,
        /// The bytes, base64 (standard alphabet, padded).
        data: String,
    },
    /// An image stored by `put_blob`, in base64.
    GetBlob {
        blob: String,
    },
    /// Mints a device token for remote clients (local socket only).
    IssueToken {
        #[serde(default)]
        read_only: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// Mints a one-time pairing link for the web client (local socket only).
    IssuePairing {
        #[serde(default)]
        read_only: bool,
        /// The host the link names, instead of the one the pod would pick.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    ListTokens,
    RevokeToken {
        id: String,
    },
    /// The pod's background jobs, ended ones included (a read method).
    ListJobs,
    /// Kills one background job's whole process group.
    KillJob {
        job: u64,
    },
    /// One background job and the output it has printed so far (a read
    /// method; the pod's own, beside the contract's `list_jobs`).
    GetJobOutput {
        job: u64,
    },
    /// This pod's child pods with their state, task and usage (a read method).
    ListAgents,
    /// Stops an idle child pod and forgets it; its log stays.
    RemoveAgent {
        name: String,
    },
}

impl Method {
    /// Whether this is one of the contract's *read methods*, the only ones
    /// a read-only connection (a pod's descendant, a read-only token) may
    /// send. `pod::access` is where that is decided.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Method::Hello { .. }
                | Method::GetSession { .. }
                | Method::GetEntries { .. }
                | Method::ListSessions
                | Method::ListCompletions { .. }
                | Method::ListRules
                | Method::ListJobs
                | Method::GetJobOutput { .. }
                | Method::ListAgents
                | Method::GetDiff { .. }
                | Method::GetFile { .. }
                | Method::GetBlob { .. }
        )
    }

    /// The token methods: over the local socket only, and never for a
    /// descendant — a credential is made by the user at their terminal.
    pub fn is_local_only(&self) -> bool {
        matches!(
            self,
            Method::IssueToken { .. }
                | Method::IssuePairing { .. }
                | Method::ListTokens
                | Method::RevokeToken { .. }
        )
    }
}

/// The most entries one `get_entries` may ask for.
pub const MAX_GET_ENTRIES: u64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompletionKind {
    File,
    Knowledge,
    Workflow,
}

/// The `type` of every [`Method`], in the enum's order. A test reads the
/// enum's own JSON Schema (each variant's `type` is a constant there) and
/// checks this list against it, so a method added to the enum and not here
/// fails the tests rather than being refused as unknown. The parser used
/// to read the list from the schema itself when it first needed it:
/// generating the schema took ~2.2 million instructions, which every pod
/// paid in its first request — a fresh pod's first `run` waited for it
/// before anything else (docs/performance.md, scenario 5).
const METHOD_TYPES: &[&str] = &[
    "run",
    "notify",
    "cancel",
    "pause",
    "resume",
    "compact",
    "shutdown",
    "list_completions",
    "get_session",
    "get_entries",
    "hello",
    "approve",
    "set_approval",
    "list_sessions",
    "new_session",
    "fork",
    "resume_session",
    "set_model",
    "list_rules",
    "revoke_rule",
    "rewind",
    "get_diff",
    "get_file",
    "put_blob",
    "get_blob",
    "issue_token",
    "issue_pairing",
    "list_tokens",
    "revoke_token",
    "list_jobs",
    "kill_job",
    "get_job_output",
    "list_agents",
    "remove_agent",
];

/// Why a frame could not become a [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub struct FrameError {
    pub code: ErrorCode,
    pub message: String,
    pub request_id: Option<String>,
}

impl Request {
    pub fn new(method: Method) -> Self {
        Self {
            request_id: None,
            method,
        }
    }

    pub fn with_id(method: Method, request_id: impl Into<String>) -> Self {
        Self {
            request_id: Some(request_id.into()),
            method,
        }
    }

    /// Parses one frame (without its trailing newline).
    pub fn parse(frame: &[u8]) -> Result<Request, FrameError> {
        let fail = |code, message: String, request_id| FrameError {
            code,
            message,
            request_id,
        };
        let text = std::str::from_utf8(frame).map_err(|e| {
            fail(
                ErrorCode::BadFrame,
                format!("frame is not valid UTF-8 ({e}); send one UTF-8 JSON object per line"),
                None,
            )
        })?;
        if super::limits::json_depth(frame) > MAX_JSON_DEPTH {
            return Err(fail(
                ErrorCode::BadFrame,
                format!(
                    "frame nests deeper than {MAX_JSON_DEPTH} levels; flatten the data you send"
                ),
                None,
            ));
        }
        let mut object: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            Ok(_) => {
                return Err(fail(
                    ErrorCode::BadFrame,
                    "frame is JSON but not an object; every frame is an object with a \"type\""
                        .into(),
                    None,
                ))
            }
            Err(e) => {
                return Err(fail(
                    ErrorCode::BadFrame,
                    format!("frame is not valid JSON: {e}"),
                    None,
                ))
            }
        };
        let request_id = match object.remove("request_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                return Err(fail(
                    ErrorCode::InvalidParams,
                    "`request_id` must be a string".into(),
                    None,
                ))
            }
        };
        let kind = match object.get("type") {
            Some(Value::String(k)) => k.clone(),
            _ => {
                return Err(fail(
                    ErrorCode::BadFrame,
                    "frame has no string \"type\" field".into(),
                    request_id,
                ))
            }
        };
        if !METHOD_TYPES.contains(&kind.as_str()) {
            return Err(fail(
                ErrorCode::UnknownMethod,
                format!(
                    "unknown method {kind:?}; known: {}",
                    METHOD_TYPES.join(", ")
                ),
                request_id,
            ));
        }
        // A run's segments are kept as the bytes sent, which `object` no
        // longer has: they are read from the frame's text.
        let method = if kind == "run" {
            super::segment::run_segments(text).map(|segments| Method::Run { segments })
        } else {
            serde_json::from_value::<Method>(Value::Object(object)).map_err(|e| e.to_string())
        };
        match method {
            Ok(Method::Run { segments }) if segments.is_empty() => Err(fail(
                ErrorCode::InvalidParams,
                "`run` has no segments; send at least one, such as \
                 [{\"type\":\"text\",\"text\":\"...\"}]"
                    .into(),
                request_id,
            )),
            // An answer the pod cannot read must not be committed as one.
            Ok(Method::Approve {
                decision: Decision::Unknown,
                ..
            }) => Err(fail(
                ErrorCode::InvalidParams,
                "`decision` must be \"allow\" or \"deny\"".into(),
                request_id,
            )),
            Ok(Method::Approve {
                scope: Some(Scope::Unknown),
                ..
            }) => Err(fail(
                ErrorCode::InvalidParams,
                "`scope` must be \"once\", \"session\" or \"always\"".into(),
                request_id,
            )),
            Ok(Method::Approve {
                decision: Decision::Deny,
                scope: Some(scope @ (Scope::Session | Scope::Always)),
                ..
            }) => Err(fail(
                ErrorCode::InvalidParams,
                format!(
                    "`deny` cannot have `scope: \"{}\"`: deny rules come from --deny or the \
                     config file",
                    if scope == Scope::Session {
                        "session"
                    } else {
                        "always"
                    }
                ),
                request_id,
            )),
            Ok(Method::GetEntries { limit, .. }) if limit > MAX_GET_ENTRIES => Err(fail(
                ErrorCode::InvalidParams,
                format!(
                    "`get_entries` asks for {limit} entries; ask for at most {MAX_GET_ENTRIES} \
                     and page on with `before_seq`"
                ),
                request_id,
            )),
            Ok(method) => Ok(Request { request_id, method }),
            Err(e) => Err(fail(
                ErrorCode::InvalidParams,
                format!("invalid `{kind}`: {e}"),
                request_id,
            )),
        }
    }

    /// The frame for this request, newline-terminated. Serialised directly
    /// (not through a `Value`), so segments go out as their own bytes.
    pub fn to_frame(&self) -> String {
        #[derive(Serialize)]
        struct Framed<'a> {
            #[serde(flatten)]
            method: &'a Method,
            #[serde(skip_serializing_if = "Option::is_none")]
            request_id: Option<&'a str>,
        }
        let framed = Framed {
            method: &self.method,
            request_id: self.request_id.as_deref(),
        };
        let mut frame = serde_json::to_string(&framed).unwrap_or_default();
        frame.push('\n');
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;

    fn parse(v: Value) -> Result<Request, FrameError> {
        Request::parse(v.to_string().as_bytes())
    }

    #[test]
    fn the_known_methods_are_the_enums_own() {
        let schema = serde_json::to_value(schemars::schema_for!(Method)).unwrap();
        let variants = schema["oneOf"].as_array().unwrap();
        let types: Vec<&str> = variants
            .iter()
            .map(|variant| {
                let kind = &variant["properties"]["type"];
                kind.get("const")
                    .or_else(|| kind.pointer("/enum/0"))
                    .and_then(Value::as_str)
                    .unwrap()
            })
            .collect();
        assert_eq!(types, METHOD_TYPES);
    }

    #[test]
    fn every_method_round_trips() {
        let methods = [
            Method::Run {
                segments: vec![Segment::text("hi"), Segment::paste(1, "a\nb")],
            },
            Method::Notify {
                message: "ci is green".into(),
            },
            Method::Cancel { run: None },
            Method::Cancel {
                run: Some("r1".into()),
            },
            Method::Pause,
            Method::Resume,
            Method::Compact,
            Method::Shutdown,
            Method::ListCompletions {
                kind: CompletionKind::File,
                prefix: "src/".into(),
            },
            Method::GetSession {
                session_id: Uuid::new_v4().to_string(),
            },
            Method::Hello {
                client: "tui@host".into(),
            },
            Method::Approve {
                call_id: "c1".into(),
                decision: Decision::Allow,
                scope: Some(Scope::Session),
                message: Some("go ahead".into()),
            },
            Method::SetApproval {
                mode: ApprovalMode::ReadOnly,
            },
            Method::ListSessions,
            Method::NewSession,
            Method::Fork { at_seq: Some(4) },
            Method::ResumeSession {
                session_id: "8bd5".into(),
            },
            Method::SetModel {
                model: "gpt-4o".into(),
            },
            Method::Rewind {
                before_seq: Some(3),
                session_id: None,
                checkpoint: None,
                files: Some(true),
                conversation: Some(false),
                force: None,
                kill_jobs: None,
                abort_on_conflict: Some(true),
            },
            Method::GetDiff {
                from: "ab".into(),
                to: None,
                path: Some("src".into()),
                binary: true,
            },
            Method::GetFile {
                checkpoint: "ab".into(),
                path: "a.txt".into(),
            },
            Method::PutBlob {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
            Method::GetBlob {
                blob: "sha256:ab".into(),
            },
        ];
        for method in methods {
            for req in [Request::new(method.clone()), Request::with_id(method, "r1")] {
                let frame = req.to_frame();
                assert!(frame.ends_with('\n'));
                assert_eq!(Request::parse(frame.trim_end().as_bytes()), Ok(req));
            }
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let req = parse(json!({"type":"cancel","request_id":"x","future":true})).unwrap();
        assert_eq!(req.method, Method::Cancel { run: None });
        assert_eq!(req.request_id.as_deref(), Some("x"));
    }

    #[test]
    fn error_codes_follow_the_contract() {
        let code = |r: Result<Request, FrameError>| r.unwrap_err().code;
        assert_eq!(code(Request::parse(b"not json")), ErrorCode::BadFrame);
        assert_eq!(code(Request::parse(b"[1,2]")), ErrorCode::BadFrame);
        assert_eq!(code(Request::parse(b"\xff\xfe{}")), ErrorCode::BadFrame);
        assert_eq!(code(parse(json!({"no":"type"}))), ErrorCode::BadFrame);
        assert_eq!(code(parse(json!({"type":"fly"}))), ErrorCode::UnknownMethod);
        assert_eq!(code(parse(json!({"type":"run"}))), ErrorCode::InvalidParams);
        assert_eq!(
            code(parse(json!({"type":"run","segments":[]}))),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(json!({"type":"run","segments":"hi"}))),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(json!({"type":"run","segments":[{"type":"text"}]}))),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(json!({"type":"get_session","session_id":7}))),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(
                json!({"type":"approve","call_id":"c","decision":"deny","scope":"session"})
            )),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(
                json!({"type":"approve","call_id":"c","decision":"maybe"})
            )),
            ErrorCode::InvalidParams
        );
        assert_eq!(
            code(parse(
                json!({"type":"approve","call_id":"c","decision":"allow","scope":"forever"})
            )),
            ErrorCode::InvalidParams
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let frame = format!(r#"{{"type":"run","segments":[{{"type":"x","v":{deep}}}]}}"#);
        assert_eq!(code(Request::parse(frame.as_bytes())), ErrorCode::BadFrame);
    }

    #[test]
    fn errors_echo_the_request_id() {
        let err = parse(json!({"type":"fly","request_id":"abc"})).unwrap_err();
        assert_eq!(err.request_id.as_deref(), Some("abc"));
        let err = parse(json!({"type":"notify","request_id":"q"})).unwrap_err();
        assert_eq!(err.request_id.as_deref(), Some("q"));
    }
}
