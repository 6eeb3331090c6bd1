//! The web client's files, embedded in the binary so a pod serves its own
//! page with no network access and no build step at run time.
//!
//! The HTTP server (`--listen`) asks [`asset`] for every `GET` that is not
//! an API path; what it gets back holds no data and needs no token. Until
//! the real client lands this serves one page saying how to connect.

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub body: &'static [u8],
    pub content_type: &'static str,
}

const PLACEHOLDER: &str = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>pod</title></head><body><h1>pod</h1><p>This pod speaks its protocol over a WebSocket \
at <code>/v1/ws</code>. Attach with <code>pod attach --url URL</code> and a token from \
<code>pod token create</code>; see docs/remote.md.</p></body></html>\n";

/// The embedded file served at `path` (`/` is the page itself), or `None`.
pub fn asset(path: &str) -> Option<Asset> {
    match path {
        "/" | "/index.html" => Some(Asset {
            body: PLACEHOLDER.as_bytes(),
            content_type: "text/html; charset=utf-8",
        }),
        _ => None,
    }
}
