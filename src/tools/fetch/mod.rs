//! `web_fetch`: GET an `http`/`https` URL and return it as text the model
//! reads (HTML as Markdown), with the final URL and the content type.
//!
//! Everything about it is bounded: at most [`MAX_BYTES`] of body are read
//! (no `Accept-Encoding` is sent, so what is read is what the page is), at
//! most [`MAX_REDIRECTS`] redirects are followed, each hop within
//! [`HOP_TIMEOUT`]. It is guarded against reaching what the user did not
//! mean to expose ([`guard`]): each hop's host is resolved once, every
//! address checked, and the connection pinned to the checked address;
//! proxy variables are ignored (a proxy would do its own lookup); a URL
//! with user info is refused; a redirect to another origin ends the fetch
//! with a result naming the target, so the model (and the approval it
//! needs) sees the new site.

/// Public for the bench, which times the conversion alone.
pub mod convert;
mod guard;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::StreamExt;
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::registry::{Args, Run, Runner, ToolDef};
use super::ToolOutcome;
use crate::protocol::tools as builtin;
use crate::provider::ToolSpec;

pub use convert::html_to_markdown;

pub const WEB_FETCH: &str = builtin::WEB_FETCH.name;

pub const WEB_FETCH_TOOL: ToolDef = ToolDef {
    facts: builtin::WEB_FETCH,
    spec: |_| spec(),
    args: Args::of::<FetchArgs>(),
    runner: Runner::Toolbox,
    run: Run::Own,
};

/// The most body read, after any decoding.
pub const MAX_BYTES: usize = 10 * 1024 * 1024;
pub const MAX_REDIRECTS: usize = 5;
const HOP_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchArgs {
    pub url: String,
    pub max_bytes: Option<usize>,
}

pub fn spec() -> ToolSpec {
    ToolSpec {
        name: WEB_FETCH.into(),
        description: "Fetch a web page (http or https, GET) and read it as text: HTML comes \
                      back as Markdown. Says the final URL and the content type. For \
                      documentation, issues, changelogs — URLs the user gave or that belong \
                      to the project; never guessed ones."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The http:// or https:// URL."},
                "max_bytes": {"type": "integer", "minimum": 1, "description": "Read at most this many bytes of the body (default and limit: 10 MiB)."}
            },
            "required": ["url"],
            "additionalProperties": false
        }),
    }
}

/// What the fetch may reach.
#[derive(Debug, Clone, Copy)]
pub struct FetchPolicy {
    /// `--fetch-private`: this machine and private networks too.
    pub allow_private: bool,
}

/// The URL `raw` as the fetch would request it: parsed and serialised as
/// the WHATWG URL standard says (the `url` crate), so its host is the one
/// connected to — an all-digit host as the dotted IPv4 address it is
/// (`http://16843009/` is `1.1.1.1`), a non-ASCII one in punycode (a
/// Cyrillic look-alike of a Latin name shows as the `xn--` name it is) —
/// and its scheme and host in lower case, a default port dropped, `..`
/// resolved, spaces and control characters percent-encoded; why not when
/// it does not parse. The approval shows a URL so, and so does every client
/// ([`super::registry::Summary::Url`]; the web page's `new URL(…).href` is
/// the same standard), so that what a person approves and what they watch
/// run read alike.
pub fn as_requested(raw: &str) -> Result<Url, <Url as std::str::FromStr>::Err> {
    crate::protocol::tools::requested_url(raw)
}

/// The URL `raw` if `web_fetch` may try it at all.
pub fn check_url(raw: &str) -> Result<Url, String> {
    let url = as_requested(raw).map_err(|e| format!("{raw:?} is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http:// and https:// URLs can be fetched, not {}:",
            url.scheme()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with a user name or password are refused".into());
    }
    if url.host().is_none() {
        return Err(format!("{raw:?} names no host"));
    }
    Ok(url)
}

pub async fn run(args: FetchArgs, policy: FetchPolicy, cancel: CancellationToken) -> ToolOutcome {
    let limit = args.max_bytes.unwrap_or(MAX_BYTES).clamp(1, MAX_BYTES);
    tokio::select! {
        outcome = fetch(&args.url, limit, policy) => outcome,
        _ = cancel.cancelled() => ToolOutcome::error(super::KILLED),
    }
}

async fn fetch(raw: &str, limit: usize, policy: FetchPolicy) -> ToolOutcome {
    let mut url = match check_url(raw) {
        Ok(url) => url,
        Err(why) => return ToolOutcome::error(format!("web_fetch refused: {why}")),
    };
    for _ in 0..=MAX_REDIRECTS {
        let response = match hop(&url, policy).await {
            Ok(response) => response,
            Err(why) => return ToolOutcome::error(format!("web_fetch of {url} failed: {why}")),
        };
        let status = response.status();
        if status.is_redirection() {
            let Some(target) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| url.join(l).ok())
            else {
                return ToolOutcome::error(format!(
                    "{url} answered {status} without a usable Location"
                ));
            };
            if target.origin() != url.origin() {
                return ToolOutcome::error(format!(
                    "{url} redirects to another site: {target}. Fetch that URL if it is the \
                     page you want."
                ));
            }
            if let Err(why) = check_url(target.as_str()) {
                return ToolOutcome::error(format!("{url} redirects to {target}, refused: {why}"));
            }
            url = target;
            continue;
        }
        return read(url, response, limit).await;
    }
    ToolOutcome::error(format!(
        "web_fetch gave up after {MAX_REDIRECTS} redirects (last: {url}); the site may loop"
    ))
}

/// One request, to an address checked by the guard.
async fn hop(url: &Url, policy: FetchPolicy) -> Result<reqwest::Response, String> {
    let host = url.host_str().ok_or("no host")?;
    let port = url.port_or_known_default().ok_or("no port")?;
    let addr = resolve(host, port, policy).await?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(HOP_TIMEOUT)
        .resolve(host.trim_start_matches('[').trim_end_matches(']'), addr)
        .user_agent(concat!("pod/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
        .build()
        .map_err(|e| e.to_string())?;
    client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| describe(&e))
}

/// The first address of `host` the guard allows; refused with why when
/// the guard allows none.
async fn resolve(host: &str, port: u16, policy: FetchPolicy) -> Result<SocketAddr, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve {bare}: {e}"))?
            .collect(),
    };
    if policy.allow_private {
        return addrs
            .first()
            .copied()
            .ok_or_else(|| format!("{bare} has no address"));
    }
    let own = guard::own_addresses();
    let mut why = None;
    for addr in &addrs {
        match guard::refusal(addr.ip(), &own) {
            None => return Ok(*addr),
            Some(range) if bare == addr.ip().to_string() => {
                why = Some(format!("{bare} is in {range}"));
            }
            Some(range) => why = Some(format!("{bare} resolves to {}, in {range}", addr.ip())),
        }
    }
    Err(match why {
        Some(why) => format!(
            "refused: {why}, which web_fetch does not reach unless the pod runs with \
             --fetch-private"
        ),
        None => format!("{bare} has no address"),
    })
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("timed out ({e})")
    } else if e.is_connect() {
        format!("cannot connect ({e})")
    } else {
        e.to_string()
    }
}

/// Reads the body up to `limit` and makes the result.
async fn read(url: Url, response: reqwest::Response, limit: usize) -> ToolOutcome {
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut body = Vec::new();
    let mut cut = false;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => return ToolOutcome::error(format!("reading {url} failed: {}", describe(&e))),
        };
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let text = convert::to_text(&content_type, &body);
    let shown_type = if content_type.is_empty() {
        "(none given)"
    } else {
        content_type.as_str()
    };
    let mut output = format!("URL: {url}\nStatus: {status}\nContent-Type: {shown_type}\n");
    if cut {
        output.push_str(&format!(
            "[only the first {} bytes of the body were read]\n",
            body.len()
        ));
    }
    output.push('\n');
    output.push_str(&text);
    ToolOutcome {
        output,
        is_error: !status.is_success(),
    }
}
