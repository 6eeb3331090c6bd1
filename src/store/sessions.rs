//! Finding sessions in the data directory by id or by a short prefix.
//!
//! A session is named wherever a person types it — `pod log 8bd5`,
//! `resume_session`, `get_session` — by its full id or a unique prefix of at
//! least [`MIN_PREFIX`] characters, the short form every client shows.

use std::path::Path;

use uuid::Uuid;

use crate::protocol::ErrorCode;

/// The shortest prefix accepted for a session id.
pub const MIN_PREFIX: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("no session {0:?} in {1}")]
    NotFound(String, String),
    #[error("session prefix {query:?} matches {} sessions ({}); type more of the id", .matches.len(), short_list(.matches))]
    Ambiguous { query: String, matches: Vec<Uuid> },
    #[error("{0:?} is not a session id: give the full id or at least {MIN_PREFIX} of its first characters")]
    Invalid(String),
    #[error("cannot read {0}: {1}")]
    Unreadable(String, String),
}

impl LookupError {
    /// The protocol's error code for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            LookupError::Ambiguous { .. } => ErrorCode::SessionAmbiguous,
            LookupError::Unreadable(..) => ErrorCode::StorageError,
            LookupError::NotFound(..) | LookupError::Invalid(_) => ErrorCode::SessionNotFound,
        }
    }
}

fn short_list(ids: &[Uuid]) -> String {
    ids.iter()
        .take(5)
        .map(|id| id.to_string()[..8].to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every session id with a log in `sessions_dir`.
pub fn all(sessions_dir: &Path) -> std::io::Result<Vec<Uuid>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(sessions_dir)? {
        let name = entry?.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if let Ok(id) = Uuid::parse_str(stem) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Resolves a full id or a unique prefix to the session it names.
pub fn resolve(sessions_dir: &Path, query: &str) -> Result<Uuid, LookupError> {
    let query = query.trim();
    let not_found = || LookupError::NotFound(query.to_owned(), sessions_dir.display().to_string());
    if let Ok(id) = Uuid::parse_str(query) {
        return if sessions_dir.join(format!("{id}.jsonl")).exists() {
            Ok(id)
        } else {
            Err(not_found())
        };
    }
    let lower = query.to_ascii_lowercase();
    if lower.len() < MIN_PREFIX || !lower.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(LookupError::Invalid(query.to_owned()));
    }
    let ids = all(sessions_dir)
        .map_err(|e| LookupError::Unreadable(sessions_dir.display().to_string(), e.to_string()))?;
    let mut matches: Vec<Uuid> = ids
        .into_iter()
        .filter(|id| id.to_string().starts_with(&lower))
        .collect();
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches[0]),
        _ => {
            matches.sort();
            Err(LookupError::Ambiguous {
                query: query.to_owned(),
                matches,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_full_ids_and_unique_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let a = Uuid::parse_str("8bd5aaaa-0000-4000-8000-000000000000").unwrap();
        let b = Uuid::parse_str("8bd5bbbb-0000-4000-8000-000000000000").unwrap();
        for id in [a, b] {
            std::fs::write(dir.path().join(format!("{id}.jsonl")), "").unwrap();
        }
        assert_eq!(resolve(dir.path(), &a.to_string()), Ok(a));
        assert_eq!(resolve(dir.path(), "8bd5a"), Ok(a));
        assert_eq!(resolve(dir.path(), "8BD5B"), Ok(b));
        assert!(matches!(
            resolve(dir.path(), "8bd5"),
            Err(LookupError::Ambiguous { .. })
        ));
        assert!(matches!(
            resolve(dir.path(), "8bd"),
            Err(LookupError::Invalid(_))
        ));
        assert!(matches!(
            resolve(dir.path(), "ffff"),
            Err(LookupError::NotFound(..))
        ));
        let missing = Uuid::new_v4();
        assert!(matches!(
            resolve(dir.path(), &missing.to_string()),
            Err(LookupError::NotFound(..))
        ));
    }
}
