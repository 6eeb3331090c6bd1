//! The checks every request passes before its token is looked at: `Host`
//! (DNS rebinding → 421), `Origin` (another site's page → 403), and the
//! lockout of an address that keeps presenting bad tokens (→ 429).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed token checks from one address that start a lockout…
const MAX_FAILURES: usize = 10;
/// …when they fall within this window; the lockout lasts as long.
const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most; beyond it, those with nothing recent go.
const MAX_TRACKED: usize = 10_000;

pub struct Checks {
    listen: SocketAddr,
    tls: bool,
    /// Host names accepted besides IP literals and loopback names: this
    /// machine's names, the certificate's, `--allow-host`; lowercase.
    names: Vec<String>,
    /// `--allow-origin`, without a trailing slash.
    origins: Vec<String>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Default)]
struct Failures {
    recent: VecDeque<Instant>,
    locked_until: Option<Instant>,
}

impl Checks {
    pub fn new(
        listen: SocketAddr,
        tls: bool,
        mut names: Vec<String>,
        origins: Vec<String>,
    ) -> Checks {
        names.extend(machine_names());
        let names = names.iter().map(|n| normal_name(n)).collect();
        let origins = origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Checks {
            listen,
            tls,
            names,
            origins,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the `Host` header names this server: the listen address, a
    /// loopback name, an address of this machine when listening on a
    /// wildcard, one of this machine's or the certificate's names, or a
    /// name given with `--allow-host`. (A rebinding attacker's page can
    /// only send its own name.)
    pub fn host_ok(&self, host: Option<&str>) -> bool {
        let Some(name) = host.map(host_part).filter(|n| !n.is_empty()) else {
            return false;
        };
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            let ip = super::peer::unmapped(ip);
            return ip == super::peer::unmapped(self.listen.ip())
                || ip.is_loopback()
                || (self.listen.ip().is_unspecified() && super::peer::is_local(ip));
        }
        let name = normal_name(&name);
        name == "localhost" || name.ends_with(".localhost") || self.names.contains(&name)
    }

    /// Whether a request's `Origin` (when present) is this server's own
    /// origin, as the browser saw it (`scheme://` + the `Host` it sent), or
    /// one given with `--allow-origin`. `null` (sandboxed frames, files) is
    /// never accepted.
    pub fn origin_ok(&self, origin: Option<&str>, host: &str) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let scheme = if self.tls { "https" } else { "http" };
        origin == format!("{scheme}://{}", host.to_ascii_lowercase())
            || self.origins.contains(&origin)
    }

    /// Whether `ip` is locked out after too many failed token checks.
    pub fn locked(&self, ip: IpAddr) -> bool {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .get(&ip)
            .and_then(|f| f.locked_until)
            .is_some_and(|until| until > Instant::now())
    }

    /// Counts a failed token (or pairing code) check from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_TRACKED {
            failures.retain(|_, f| {
                f.locked_until.is_some_and(|until| until > now)
                    || f.recent.back().is_some_and(|at| now - *at < WINDOW)
            });
        }
        let entry = failures.entry(ip).or_default();
        while entry.recent.front().is_some_and(|at| now - *at >= WINDOW) {
            entry.recent.pop_front();
        }
        entry.recent.push_back(now);
        if entry.recent.len() >= MAX_FAILURES {
            entry.recent.clear();
            entry.locked_until = Some(now + WINDOW);
        }
    }
}

/// The host of a `Host` header without its port (`[::1]:80` → `[::1]`).
fn host_part(host: &str) -> String {
    let host = host.trim();
    if host.starts_with('[') {
        return match host.find(']') {
            Some(end) => host[..=end].to_owned(),
            None => host.to_owned(),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name.to_owned(),
        _ => host.to_owned(),
    }
}

fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// This machine's host name, and its first label when it is qualified.
pub fn machine_names() -> Vec<String> {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().into_owned();
    let mut names = vec![name.clone()];
    if let Some((short, _)) = name.split_once('.') {
        names.push(short.to_owned());
    }
    names.retain(|n| !n.is_empty());
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks() -> Checks {
        Checks::new(
            "127.0.0.1:7878".parse().unwrap(),
            false,
            vec!["pod.example.org".into()],
            vec!["https://proxy.example.org/".into()],
        )
    }

    #[test]
    fn hosts_must_name_this_server() {
        let c = checks();
        for good in [
            "127.0.0.1:7878",
            "localhost:7878",
            "LOCALHOST",
            "[::1]:7878",
            "pod.example.org",
            "pod.example.org.:443",
        ] {
            assert!(c.host_ok(Some(good)), "{good}");
        }
        for bad in ["evil.example.com:7878", "192.0.2.9:7878", ""] {
            assert!(!c.host_ok(Some(bad)), "{bad}");
        }
        assert!(!c.host_ok(None));
    }

    #[test]
    fn origins_must_be_this_server_or_allowed_and_never_null() {
        let c = checks();
        assert!(c.origin_ok(None, "127.0.0.1:7878"));
        assert!(c.origin_ok(Some("http://127.0.0.1:7878"), "127.0.0.1:7878"));
        assert!(c.origin_ok(Some("https://proxy.example.org"), "127.0.0.1:7878"));
        assert!(!c.origin_ok(Some("null"), "127.0.0.1:7878"));
        assert!(!c.origin_ok(Some("http://evil.example.com"), "127.0.0.1:7878"));
        assert!(!c.origin_ok(Some("https://127.0.0.1:7878"), "127.0.0.1:7878"));
    }

    #[test]
    fn ten_failures_in_a_minute_lock_an_address_out() {
        let c = checks();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..9 {
            c.failed(ip);
        }
        assert!(!c.locked(ip));
        c.failed(ip);
        assert!(c.locked(ip));
        assert!(!c.locked("192.0.2.2".parse().unwrap()));
    }
}
