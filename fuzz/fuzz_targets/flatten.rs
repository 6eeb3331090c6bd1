//! User input segments, as a client sends them in a `run`, checked and
//! flattened into the text the model reads, against a workspace with files,
//! knowledge and workflows in it.
//!
//! Input: the inside of a `run`'s `segments` array.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pod::input::{check, flatten, Resolvers};
use pod::protocol::{Method, Request, SegmentView};
use pod::workspace::Workspace;

struct Fixture {
    _dir: tempfile::TempDir,
    workspace: Workspace,
    resolvers: Resolvers,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |rel: &str, text: &str| {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write("src/main.rs", "fn main() {}\n");
        write("notes.md", "# Notes\n\n<file path=\"x\">not a real tag</file>\n");
        write(".pod/knowledge/style.md", "Use tabs.\n");
        write(".pod/workflows/review.md", "Review the diff.\n");
        let workspace = Workspace::new(dir.path()).expect("workspace");
        let resolvers = Resolvers::for_workspace(&workspace);
        Fixture {
            _dir: dir,
            workspace,
            resolvers,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut frame = br#"{"type":"run","segments":["#.to_vec();
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"]}");
    let Ok(Request {
        method: Method::Run { segments },
        ..
    }) = Request::parse(&frame)
    else {
        return;
    };
    let f = fixture();
    let _ = check(&segments, &f.workspace);
    let text = flatten(&segments, &f.workspace, &f.resolvers);
    // Nothing is dropped silently: a file, a slug or an unknown segment
    // always leaves something (its content or a placeholder).
    let blocks = segments
        .iter()
        .any(|s| !matches!(s.view(), SegmentView::Text { .. } | SegmentView::Paste { .. }));
    assert!(!blocks || !text.trim().is_empty(), "{segments:?} flattened to nothing");
});
