//! Device tokens and pairing codes: never a usable secret on disk.
//!
//! A token is 256 random bits in unpadded base64url, shown once when it is
//! made. The pod keeps only its SHA-256, in `<data-dir>/pods/NAME.tokens`
//! (mode 0600), so a tool that reads every file under the data directory
//! still holds no credential. A presented token is hashed and compared with
//! every stored hash in constant time. Pairing codes (for the web client's
//! `#pair=` link) are as random, live in memory only, expire after ten
//! minutes and are good for one exchange.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::protocol::{AccessLevel, TokenInfo};

/// How long a pairing code may be exchanged.
pub const PAIRING_VALID: Duration = Duration::from_secs(600);

/// How often a token's `last_used` is written back at most.
const LAST_USED_EVERY: Duration = Duration::from_secs(60);

/// The pod's device tokens (shared by the HTTP server and the connections
/// that mint them).
pub struct Tokens {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tokens: Vec<Stored>,
    pairings: Vec<Pairing>,
    /// One cancellation per live remote connection, by token id: fired
    /// when that token is revoked.
    live: Vec<(String, CancellationToken)>,
    /// When `last_used` was last written to the file.
    saved_at: Option<Instant>,
}

/// One token as the file keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    id: String,
    /// SHA-256 of the token, lowercase hex.
    sha256: String,
    label: Option<String>,
    scope: AccessLevel,
    created_at: String,
    #[serde(default)]
    last_used: Option<String>,
}

#[derive(Serialize, Deserialize, Default)]
struct File {
    tokens: Vec<Stored>,
}

struct Pairing {
    sha256: [u8; 32],
    read_only: bool,
    expires: Instant,
}

/// A token that passed the check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub id: String,
    pub scope: AccessLevel,
}

/// A new token, shown once.
pub struct Issued {
    pub token: String,
    pub info: TokenInfo,
}

impl Tokens {
    /// The tokens of pod `name` (none yet when the file does not exist).
    pub fn open(pods_dir: &Path, name: &str) -> anyhow::Result<Tokens> {
        let path = pods_dir.join(format!("{name}.tokens"));
        let tokens = match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice::<File>(&bytes)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "{} is damaged ({e}); remove it to start without device tokens",
                            path.display()
                        )
                    })?
                    .tokens
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        Ok(Tokens {
            path,
            state: Mutex::new(State {
                tokens,
                ..State::default()
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves whole values behind.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a token and stores its hash durably before it is shown.
    pub fn issue(&self, read_only: bool, label: Option<String>) -> std::io::Result<Issued> {
        let token = random_text();
        let stored = Stored {
            id: random_id(),
            sha256: hex(&sha256(&token)),
            label,
            scope: scope(read_only),
            created_at: crate::protocol::LogEntry::now(),
            last_used: None,
        };
        let info = info(&stored);
        let mut state = self.state();
        state.tokens.push(stored);
        if let Err(e) = self.save(&state.tokens) {
            state.tokens.pop();
            return Err(e);
        }
        Ok(Issued { token, info })
    }

    pub fn list(&self) -> Vec<TokenInfo> {
        self.state().tokens.iter().map(info).collect()
    }

    /// Revokes token `id` and fires the cancellation of each of its live
    /// connections; `false` when there is no such token.
    pub fn revoke(&self, id: &str) -> std::io::Result<bool> {
        let mut state = self.state();
        let Some(at) = state.tokens.iter().position(|t| t.id == id) else {
            return Ok(false);
        };
        let removed = state.tokens.remove(at);
        if let Err(e) = self.save(&state.tokens) {
            state.tokens.insert(at, removed);
            return Err(e);
        }
        state.live.retain(|(of, cancel)| {
            if of == id {
                cancel.cancel();
            }
            of != id && !cancel.is_cancelled()
        });
        Ok(true)
    }

    /// The token `presented` names, checked in constant time against
    /// every stored hash; records its use.
    pub fn check(&self, presented: &str) -> Option<Granted> {
        let hash = hex(&sha256(presented));
        let mut state = self.state();
        let mut found = None;
        for (i, stored) in state.tokens.iter().enumerate() {
            if bool::from(stored.sha256.as_bytes().ct_eq(hash.as_bytes())) {
                found = Some(i);
            }
        }
        let i = found?;
        state.tokens[i].last_used = Some(crate::protocol::LogEntry::now());
        let granted = Granted {
            id: state.tokens[i].id.clone(),
            scope: state.tokens[i].scope,
        };
        if state
            .saved_at
            .is_none_or(|at| at.elapsed() >= LAST_USED_EVERY)
        {
            state.saved_at = Some(Instant::now());
            if let Err(e) = self.save(&state.tokens) {
                tracing::warn!("cannot record when a device token was used: {e}");
            }
        }
        Some(granted)
    }

    /// A cancellation fired when token `id` is revoked; `None` when it is
    /// gone already (revoked between its check and now).
    pub fn watch(&self, id: &str) -> Option<CancellationToken> {
        let mut state = self.state();
        if !state.tokens.iter().any(|t| t.id == id) {
            return None;
        }
        state.live.retain(|(_, cancel)| !cancel.is_cancelled());
        let cancel = CancellationToken::new();
        state.live.push((id.to_owned(), cancel.clone()));
        Some(cancel)
    }

    /// Makes a one-time pairing code, valid for [`PAIRING_VALID`].
    pub fn issue_pairing(&self, read_only: bool) -> String {
        let code = random_text();
        let mut state = self.state();
        let now = Instant::now();
        state.pairings.retain(|p| p.expires > now);
        state.pairings.push(Pairing {
            sha256: sha256(&code),
            read_only,
            expires: now + PAIRING_VALID,
        });
        code
    }

    /// Exchanges a pairing code for a new device token, labelled with when
    /// and, from the pairing client's `User-Agent`, on what it was paired
    /// (`pod token list` tells devices apart by it); `Ok(None)` for a code
    /// that is unknown, used or expired.
    pub fn redeem_pairing(
        &self,
        code: &str,
        user_agent: Option<&str>,
    ) -> std::io::Result<Option<Issued>> {
        let hash = sha256(code);
        let read_only = {
            let mut state = self.state();
            let now = Instant::now();
            state.pairings.retain(|p| p.expires > now);
            let mut found = None;
            for (i, pairing) in state.pairings.iter().enumerate() {
                if bool::from(pairing.sha256.ct_eq(&hash)) {
                    found = Some(i);
                }
            }
            match found {
                Some(i) => state.pairings.remove(i).read_only,
                None => return Ok(None),
            }
        };
        let mut label = format!(
            "paired {}",
            humantime::format_rfc3339_seconds(SystemTime::now())
        );
        if let Some(device) = user_agent.and_then(device_of) {
            label = format!("{label} · {device}");
        }
        self.issue(read_only, Some(label)).map(Some)
    }

    /// Replaces the file through a fresh temporary one (0600), synced.
    fn save(&self, tokens: &[Stored]) -> std::io::Result<()> {
        use std::io::Write as _;
        let bytes = serde_json::to_vec_pretty(&File {
            tokens: tokens.to_vec(),
        })?;
        let tmp = self
            .path
            .with_extension(format!("tokens.{}.tmp", uuid::Uuid::new_v4()));
        let written = crate::private::file_options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut file| {
                file.write_all(&bytes)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

fn scope(read_only: bool) -> AccessLevel {
    if read_only {
        AccessLevel::Read
    } else {
        AccessLevel::Full
    }
}

fn info(stored: &Stored) -> TokenInfo {
    TokenInfo {
        id: stored.id.clone(),
        label: stored.label.clone(),
        scope: stored.scope,
        created_at: stored.created_at.clone(),
        last_used: stored.last_used.clone(),
    }
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0; N];
    // The kernel's generator; without it no secret could be made at all.
    if let Err(e) = getrandom::fill(&mut bytes) {
        panic!("the system's random number generator failed: {e}");
    }
    bytes
}

/// 256 random bits as unpadded base64url (43 characters).
fn random_text() -> String {
    URL_SAFE_NO_PAD.encode(random_bytes::<32>())
}

/// A short id to name a token by (not a secret).
fn random_id() -> String {
    hex(&random_bytes::<4>())
}

fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a `User-Agent` says the device is, in a few words (`iPhone ·
/// Safari`): enough to tell a phone from a laptop in `pod token list`.
/// `None` when it names neither a system nor a browser this knows.
fn device_of(user_agent: &str) -> Option<String> {
    let has = |needle: &str| user_agent.contains(needle);
    let system = [
        ("iPhone", "iPhone"),
        ("iPad", "iPad"),
        ("Android", "Android"),
        ("CrOS", "ChromeOS"),
        ("Macintosh", "Mac"),
        ("Windows", "Windows"),
        ("Linux", "Linux"),
    ]
    .into_iter()
    .find(|(needle, _)| has(needle))
    .map(|(_, name)| name);
    let browser = [
        ("Edg", "Edge"),
        ("Firefox", "Firefox"),
        ("FxiOS", "Firefox"),
        ("CriOS", "Chrome"),
        ("Chrome", "Chrome"),
        ("Safari", "Safari"),
    ]
    .into_iter()
    .find(|(needle, _)| has(needle))
    .map(|(_, name)| name);
    match (system, browser) {
        (None, None) => None,
        (system, browser) => Some(
            [system, browser]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" · "),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_the_hash_is_stored_and_a_revoked_token_no_longer_passes() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::open(dir.path(), "p").unwrap();
        let issued = tokens.issue(true, Some("phone".into())).unwrap();
        assert_eq!(issued.token.len(), 43);
        assert!(issued
            .token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let file = dir.path().join("p.tokens");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&issued.token), "{text}");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let granted = tokens.check(&issued.token).unwrap();
        assert_eq!(granted.scope, AccessLevel::Read);
        assert!(tokens.check("not-it").is_none());
        // A second start reads the same tokens back.
        let again = Tokens::open(dir.path(), "p").unwrap();
        assert_eq!(again.check(&issued.token).unwrap().id, issued.info.id);
        let live = tokens.watch(&granted.id).unwrap();
        assert!(tokens.revoke(&granted.id).unwrap());
        assert!(live.is_cancelled());
        assert!(tokens.check(&issued.token).is_none());
        assert!(!tokens.revoke(&granted.id).unwrap());
    }

    #[test]
    fn a_pairing_code_is_good_for_one_exchange() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens::open(dir.path(), "p").unwrap();
        let code = tokens.issue_pairing(false);
        let issued = tokens.redeem_pairing(&code, None).unwrap().unwrap();
        assert_eq!(
            tokens.check(&issued.token).unwrap().scope,
            AccessLevel::Full
        );
        assert!(tokens.redeem_pairing(&code, None).unwrap().is_none());
    }
}
