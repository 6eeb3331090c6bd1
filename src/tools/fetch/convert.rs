//! A fetched body as text the model reads: HTML as Markdown (scripts,
//! styles and other non-content dropped), other text as it is, binary
//! content described rather than shown.

/// The tags whose content is never text a reader sees.
const SKIPPED: [&str; 8] = [
    "script", "style", "noscript", "template", "svg", "iframe", "head", "form",
];

/// The body as the model should read it.
pub fn to_text(content_type: &str, body: &[u8]) -> String {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let text = String::from_utf8_lossy(body);
    if mime == "text/html"
        || mime == "application/xhtml+xml"
        || (mime.is_empty() && looks_html(&text))
    {
        return html_to_markdown(&text);
    }
    let textual = mime.starts_with("text/")
        || mime.ends_with("json")
        || mime.ends_with("xml")
        || mime.ends_with("javascript")
        || mime.ends_with("yaml")
        || mime.ends_with("toml");
    if textual || (mime.is_empty() && !crate::tools::looks_binary(body)) {
        text.into_owned()
    } else {
        format!(
            "[binary content ({}), {} bytes: not shown]",
            if mime.is_empty() {
                "no type given"
            } else {
                &mime
            },
            body.len()
        )
    }
}

fn looks_html(text: &str) -> bool {
    let start = text
        .trim_start()
        .get(..15)
        .unwrap_or_default()
        .to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html")
}

/// HTML as Markdown with `htmd`; should it fail, the text without tags.
pub fn html_to_markdown(html: &str) -> String {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    converter.convert(html).unwrap_or_else(|e| {
        format!("[the page could not be converted to Markdown ({e}); its raw HTML follows]\n{html}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_markdown_without_scripts_or_styles() {
        let html = "<html><head><title>T</title><style>p{color:red}</style></head><body>\
                    <h1>Intro</h1><p>Hello <a href=\"/x\">link</a></p>\
                    <script>alert(1)</script><ul><li>one</li></ul></body></html>";
        let md = to_text("text/html; charset=utf-8", html.as_bytes());
        assert!(md.contains("# Intro"), "{md}");
        assert!(md.contains("[link](/x)"), "{md}");
        assert!(md.contains("one"), "{md}");
        assert!(!md.contains("alert") && !md.contains("color:red"), "{md}");
    }

    #[test]
    fn other_text_is_kept_binary_is_described_and_bad_utf8_is_replaced() {
        assert_eq!(to_text("application/json", b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(to_text("text/plain", b"caf\xe9"), "caf\u{fffd}");
        assert_eq!(
            to_text("image/png", b"\x89PNG\r\n\x1a\n\0\0"),
            "[binary content (image/png), 10 bytes: not shown]"
        );
    }
}
