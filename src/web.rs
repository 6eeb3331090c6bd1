//! The web client's files (`web/`), embedded in the binary so a pod serves
//! its own page with no network access and no build step at run time.
//!
//! The HTTP server (`--listen`) asks [`asset`] for every `GET` that is not
//! an API path; what it gets back holds no data and needs no token. The
//! page's code lives in its own files (no inline script or style), which is
//! what lets the server's Content-Security-Policy forbid inline code.

use sha2::{Digest, Sha256};

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub body: &'static [u8],
    pub content_type: &'static str,
}

impl Asset {
    /// A strong validator of the body (a quoted SHA-256 prefix), for
    /// `ETag` / `If-None-Match`: a new binary with a changed page gets a
    /// new tag, so the server can send `Cache-Control: no-cache` and still
    /// answer a reload with `304`.
    pub fn etag(&self) -> String {
        let digest = Sha256::digest(self.body);
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        format!("\"{hex}\"")
    }
}

/// The content type a file is served with, by its name.
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

/// Embeds each file of `web/` under its path from the page's root.
macro_rules! embed {
    ($($path:literal),* $(,)?) => {
        const FILES: &[(&str, &[u8])] = &[
            $(($path, include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web", $path)))),*
        ];
    };
}

embed!(
    "/index.html",
    "/app.js",
    "/style.css",
    "/js/connection.js",
    "/js/controls.js",
    "/js/dom.js",
    "/js/follow.js",
    "/js/markdown.js",
    "/js/tools.js",
    "/js/view.js",
    "/vendor/marked.esm.js",
    "/vendor/marked.LICENSE",
    "/vendor/purify.es.mjs",
    "/vendor/dompurify.LICENSE",
    "/vendor/dompurify.LICENSE-MPL",
);

/// The embedded file served at `path` (`/` is the page itself), or `None`.
pub fn asset(path: &str) -> Option<Asset> {
    let path = if path == "/" { "/index.html" } else { path };
    FILES
        .iter()
        .find(|(name, _)| *name == path)
        .map(|(name, body)| Asset {
            body,
            content_type: content_type(name),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every file under `web/` but its README is served, byte for byte: a
    /// module added to the page and forgotten here would fail to load.
    #[test]
    fn every_file_of_the_page_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let rel = path.strip_prefix(&root).unwrap().to_str().unwrap();
                    if rel != "README.md" {
                        on_disk.push((format!("/{rel}"), std::fs::read(&path).unwrap()));
                    }
                }
            }
        }
        assert_eq!(
            on_disk.len(),
            FILES.len(),
            "web/ and the embedded list differ"
        );
        for (path, bytes) in on_disk {
            let served = asset(&path).unwrap_or_else(|| panic!("{path} is not embedded"));
            assert_eq!(served.body, bytes.as_slice(), "{path}");
        }
    }

    #[test]
    fn the_root_is_the_page_and_types_follow_names() {
        let page = asset("/").unwrap();
        assert_eq!(page.content_type, "text/html; charset=utf-8");
        assert_eq!(page.body, asset("/index.html").unwrap().body);
        assert_eq!(
            asset("/vendor/purify.es.mjs").unwrap().content_type,
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            asset("/style.css").unwrap().content_type,
            "text/css; charset=utf-8"
        );
        assert!(asset("/v1/ws").is_none());
        assert!(asset("/../Cargo.toml").is_none());
        assert_ne!(page.etag(), asset("/app.js").unwrap().etag());
    }

    /// The page's code lives in files: the CSP the server sends forbids
    /// inline script and style.
    #[test]
    fn the_page_has_no_inline_script_or_style() {
        let html = std::str::from_utf8(asset("/").unwrap().body).unwrap();
        assert!(!html.contains("<style"), "inline style element");
        assert!(!html.contains(" style="), "inline style attribute");
        let handler = regex::Regex::new(r"\son[a-z]+\s*=").unwrap();
        assert!(!handler.is_match(html), "inline event handler");
        for script in html.split("<script").skip(1) {
            let tag_end = script.find('>').unwrap();
            assert!(script[..tag_end].contains("src="), "inline script");
        }
    }
}
