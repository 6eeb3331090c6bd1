//! What a connection may do: the one place that decides `forbidden`.
//!
//! Two things make a connection read-only: its peer is a pod or a pod's
//! descendant (a tool's process — over the Unix socket by `SO_PEERCRED`,
//! over TCP by the process that holds the client socket), or it showed a
//! read-only device token. A read-only connection gets the contract's read
//! methods ([`Method::is_read_only`]) and nothing else. The token methods
//! ([`Method::is_local_only`]) are for a person at the pod's own terminal:
//! never over the network, never for a descendant.

use std::net::IpAddr;

use crate::protocol::{AccessLevel, AccessReason, Method};

/// A connection's rights, fixed when it is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub level: AccessLevel,
    pub reason: Option<AccessReason>,
    /// The client's address when it came over the network
    /// (`approval_decision.remote`); `None` for the Unix socket.
    pub remote: Option<IpAddr>,
}

impl Access {
    /// A client of the Unix socket; `descendant` when its peer process is a
    /// pod or a pod's descendant.
    pub fn local(descendant: bool) -> Access {
        Access::new(descendant, false, None)
    }

    /// A client that came over the WebSocket from `ip`.
    pub fn remote(ip: IpAddr, descendant: bool, read_token: bool) -> Access {
        Access::new(descendant, read_token, Some(ip))
    }

    fn new(descendant: bool, read_token: bool, remote: Option<IpAddr>) -> Access {
        // A descendant is the stronger reason: the token it holds may have
        // been full, and it still may not approve.
        let reason = if descendant {
            Some(AccessReason::Descendant)
        } else if read_token {
            Some(AccessReason::ReadToken)
        } else {
            None
        };
        Access {
            level: match reason {
                Some(_) => AccessLevel::Read,
                None => AccessLevel::Full,
            },
            reason,
            remote,
        }
    }

    /// Whether this connection may see only what the conversation showed:
    /// no file listing (`list_completions` answers nothing), and of the
    /// checkpoints only the files their entries list as changed. That is a
    /// read-only device token's lot — a link shared to watch the live
    /// view. A descendant is not held to it: it runs inside the workspace
    /// and reads its files anyway.
    pub fn sees_only_the_conversation(&self) -> bool {
        self.reason == Some(AccessReason::ReadToken)
    }

    /// `Err` with the `forbidden` error's message when this read-only link
    /// may not read what a `get_file` or `get_diff` names: a file the
    /// conversation did not show (`shown` says which it did), or the
    /// workspace as it is now (`to` absent).
    pub fn check_read(
        &self,
        path: Option<&str>,
        live: bool,
        shown: impl Fn(&str) -> bool,
    ) -> Result<(), String> {
        if !self.sees_only_the_conversation() {
            return Ok(());
        }
        if live {
            return Err(
                "a read-only device token sees the checkpoints the conversation \
                        recorded, not the workspace as it is now: name `to`"
                    .into(),
            );
        }
        match path {
            Some(path) if !shown(path) => Err(format!(
                "a read-only device token reads only files the conversation showed (a \
                 checkpoint entry lists them), and it did not show {path:?}"
            )),
            _ => Ok(()),
        }
    }

    /// `Err` with the `forbidden` error's message when this connection may
    /// not send `method`.
    pub fn check(&self, method: &Method) -> Result<(), String> {
        if method.is_local_only() {
            if self.remote.is_some() {
                return Err(
                    "device tokens and pairing links are made over the pod's local \
                            socket only (`pod token`, `pod url` on the pod's machine)"
                        .into(),
                );
            }
            if self.reason == Some(AccessReason::Descendant) {
                return Err(
                    "a process the pod started (a tool or an MCP server) may not \
                            make or see device tokens"
                        .into(),
                );
            }
        }
        if self.level == AccessLevel::Full || method.is_read_only() {
            return Ok(());
        }
        let why = match self.reason {
            Some(AccessReason::ReadToken) => "this connection's device token is read-only",
            _ => {
                "this connection comes from a process the pod started (a tool or an MCP \
                 server), or one whose process could not be found"
            }
        };
        Err(format!(
            "{why}: it may only read (hello, get_session, get_entries, list_sessions, list_completions)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_connections_get_the_read_methods_and_tokens_stay_local() {
        let hello = Method::Hello { client: "t".into() };
        let shutdown = Method::Shutdown;
        let issue = Method::IssueToken {
            read_only: false,
            label: None,
        };
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let full_local = Access::local(false);
        assert!(full_local.check(&shutdown).is_ok() && full_local.check(&issue).is_ok());
        let descendant = Access::local(true);
        assert_eq!(descendant.level, AccessLevel::Read);
        assert!(descendant.check(&hello).is_ok());
        assert!(descendant.check(&shutdown).is_err() && descendant.check(&issue).is_err());
        let remote_full = Access::remote(ip, false, false);
        assert!(remote_full.check(&shutdown).is_ok());
        assert!(
            remote_full.check(&issue).is_err(),
            "tokens are minted locally only"
        );
        let read_token = Access::remote(ip, false, true);
        assert_eq!(read_token.reason, Some(AccessReason::ReadToken));
        assert!(read_token.check(&hello).is_ok() && read_token.check(&shutdown).is_err());
        let tool_with_full_token = Access::remote(ip, true, false);
        assert_eq!(tool_with_full_token.reason, Some(AccessReason::Descendant));
        assert!(tool_with_full_token.check(&shutdown).is_err());
    }
}
