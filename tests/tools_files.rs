//! The file and search tools through `Toolbox::call`, on real temp dirs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::fs;
use std::os::unix::fs::symlink;

use pod::tools::{ToolLimits, ToolOutcome, Toolbox};
use pod::workspace::Workspace;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    toolbox: Toolbox,
}

fn fixture() -> Fixture {
    fixture_with(ToolLimits::default())
}

fn fixture_with(limits: ToolLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let toolbox = Toolbox::new(ws.clone(), limits);
    Fixture {
        _dir: dir,
        ws,
        toolbox,
    }
}

impl Fixture {
    fn write(&self, rel: &str, content: &str) {
        let p = self.ws.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.ws.root().join(rel)).unwrap()
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        self.toolbox
            .call(name, &args, CancellationToken::new(), no_output())
            .await
    }
}

#[test]
fn call_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let f = fixture();
    let args = json!({});
    let future = f
        .toolbox
        .call("bash", &args, CancellationToken::new(), no_output());
    assert_send(&future);
}

#[test]
fn specs_cover_every_tool_with_object_schemas() {
    let f = fixture();
    let specs = f.toolbox.specs();
    let names: Vec<_> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "write_file",
            "edit_file",
            "bash",
            "job_output",
            "job_kill",
            "update_plan",
            "web_fetch"
        ]
    );
    for spec in &specs {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert!(!spec.description.is_empty());
    }
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_errors() {
    let f = fixture();
    let out = f.call("rm_rf", json!({})).await;
    assert!(out.is_error);
    assert!(out.output.contains("unknown tool"), "{}", out.output);

    let out = f.call("read_file", json!({})).await;
    assert!(out.is_error);
    assert!(
        out.output.contains("missing field `path`"),
        "{}",
        out.output
    );

    let out = f.call("read_file", json!({"path": 3})).await;
    assert!(out.is_error);
    assert!(out.output.contains("invalid type"), "{}", out.output);

    let out = f.call("write_file", json!("not an object")).await;
    assert!(out.is_error);

    let out = f.call("bash", Value::Null).await;
    assert!(out.is_error);
    assert!(
        out.output.contains("missing field `command`"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn read_file_numbers_lines_and_pages() {
    let f = fixture();
    let content: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    f.write("a.txt", &content);

    let out = f.call("read_file", json!({"path": "a.txt"})).await;
    assert!(!out.is_error);
    assert!(out.output.starts_with("     1\tline 1\n"), "{}", out.output);
    assert!(out.output.contains("    10\tline 10\n"));

    let out = f
        .call(
            "read_file",
            json!({"path": "a.txt", "offset": 3, "limit": 2}),
        )
        .await;
    assert_eq!(
        out.output,
        "     3\tline 3\n     4\tline 4\n[... file continues; read on with offset=5]\n"
    );

    let out = f
        .call("read_file", json!({"path": "a.txt", "offset": 50}))
        .await;
    assert!(
        out.output.contains("offset 50 is past the end"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn read_file_refuses_binary_directories_and_missing_files() {
    let f = fixture();
    fs::write(f.ws.root().join("bin"), b"\x7fELF\0\0\x01").unwrap();
    fs::create_dir(f.ws.root().join("dir")).unwrap();

    let out = f.call("read_file", json!({"path": "bin"})).await;
    assert!(
        out.is_error && out.output.contains("binary"),
        "{}",
        out.output
    );
    let out = f.call("read_file", json!({"path": "dir"})).await;
    assert!(
        out.is_error && out.output.contains("directory"),
        "{}",
        out.output
    );
    let out = f.call("read_file", json!({"path": "missing"})).await;
    assert!(
        out.is_error && out.output.contains("no such file"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn every_path_tool_refuses_escapes() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "s3cret").unwrap();
    symlink(outside.path(), f.ws.root().join("link")).unwrap();
    symlink(
        outside.path().join("secret"),
        f.ws.root().join("secret-link"),
    )
    .unwrap();
    let abs = outside.path().join("secret").display().to_string();

    for path in [
        "../secret",
        "a/../../secret",
        abs.as_str(),
        "link/secret",
        "secret-link",
    ] {
        let calls = [
            ("read_file", json!({"path": path})),
            ("list_dir", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "x"})),
            (
                "edit_file",
                json!({"path": path, "old_string": "s3cret", "new_string": "x"}),
            ),
            ("glob", json!({"pattern": "*", "path": path})),
            ("grep", json!({"pattern": "s3cret", "path": path})),
        ];
        for (tool, args) in calls {
            let out = f.call(tool, args).await;
            assert!(out.is_error, "{tool} {path}: {}", out.output);
            assert!(
                out.output.contains("outside the workspace"),
                "{tool} {path}: {}",
                out.output
            );
        }
    }
    assert_eq!(
        fs::read_to_string(outside.path().join("secret")).unwrap(),
        "s3cret"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn list_dir_sorts_and_marks_entries() {
    let f = fixture();
    f.write("b.txt", "hello");
    f.write("sub/x", "");
    symlink("b.txt", f.ws.root().join("a-link")).unwrap();
    let out = f.call("list_dir", json!({})).await;
    assert_eq!(out.output, "a-link -> b.txt\nb.txt (5 bytes)\nsub/");
    let out = f.call("list_dir", json!({"path": "b.txt"})).await;
    assert!(out.is_error);
}

#[tokio::test]
async fn write_file_creates_parents_and_overwrites() {
    let f = fixture();
    let out = f
        .call(
            "write_file",
            json!({"path": "new/deep/f.txt", "content": "a\nb\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.output);
    assert!(out.output.starts_with("created"));
    assert_eq!(f.read("new/deep/f.txt"), "a\nb\n");
    let out = f
        .call(
            "write_file",
            json!({"path": "new/deep/f.txt", "content": "c"}),
        )
        .await;
    assert!(out.output.starts_with("overwrote"));
    assert_eq!(f.read("new/deep/f.txt"), "c");
}

#[tokio::test]
async fn edit_file_requires_exactly_one_match() {
    let f = fixture();
    f.write("e.rs", "fn a() {}\nfn b() {}\nfn a() {}\n");

    let out = f
        .call(
            "edit_file",
            json!({"path": "e.rs", "old_string": "fn a()", "new_string": "fn c()"}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.output.contains("found 2 times"), "{}", out.output);

    let out = f
        .call(
            "edit_file",
            json!({"path": "e.rs", "old_string": "fn z()", "new_string": "x"}),
        )
        .await;
    assert!(out.is_error);
    assert!(out.output.contains("found 0 times"), "{}", out.output);
    assert_eq!(f.read("e.rs"), "fn a() {}\nfn b() {}\nfn a() {}\n");

    let out = f
        .call(
            "edit_file",
            json!({"path": "e.rs", "old_string": "fn b()", "new_string": "fn bee()"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.output);
    assert!(out.output.contains("line 2"), "{}", out.output);
    assert_eq!(f.read("e.rs"), "fn a() {}\nfn bee() {}\nfn a() {}\n");

    let out = f
        .call(
            "edit_file",
            json!({"path": "e.rs", "old_string": "", "new_string": "x"}),
        )
        .await;
    assert!(out.is_error);
}

#[tokio::test]
async fn glob_matches_names_and_paths_and_respects_gitignore() {
    let f = fixture();
    f.write("src/main.rs", "");
    f.write("src/tools/mod.rs", "");
    f.write("README.md", "");
    f.write("target/debug/build.rs", "");
    f.write(".hidden/x.rs", "");
    f.write(".gitignore", "target/\n");

    let out = f.call("glob", json!({"pattern": "*.rs"})).await;
    assert_eq!(out.output, "src/main.rs\nsrc/tools/mod.rs");
    let out = f.call("glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(out.output, "src/main.rs");
    let out = f.call("glob", json!({"pattern": "**/mod.rs"})).await;
    assert_eq!(out.output, "src/tools/mod.rs");
    let out = f
        .call("glob", json!({"pattern": "*.rs", "path": "src/tools"}))
        .await;
    assert_eq!(out.output, "src/tools/mod.rs");
    let out = f.call("glob", json!({"pattern": "*.py"})).await;
    assert!(!out.is_error && out.output.starts_with("no files match"));
    let out = f.call("glob", json!({"pattern": "a{"})).await;
    assert!(out.is_error);
}

#[tokio::test]
async fn grep_reports_path_line_text_and_caps_results() {
    let f = fixture();
    f.write("src/a.rs", "fn main() {}\n// TODO one\n");
    f.write("src/b.txt", "todo two\nnothing\n");
    f.write("ignored/c.rs", "TODO hidden by gitignore\n");
    f.write(".gitignore", "ignored/\n");
    fs::write(f.ws.root().join("bin.dat"), b"TODO\0binary").unwrap();

    let out = f.call("grep", json!({"pattern": "TODO"})).await;
    assert_eq!(out.output, "src/a.rs:2:// TODO one\n");
    let out = f
        .call("grep", json!({"pattern": "todo", "case_insensitive": true}))
        .await;
    assert_eq!(out.output, "src/a.rs:2:// TODO one\nsrc/b.txt:1:todo two\n");
    let out = f
        .call("grep", json!({"pattern": "o", "glob": "*.txt"}))
        .await;
    assert_eq!(out.output, "src/b.txt:1:todo two\nsrc/b.txt:2:nothing\n");
    let out = f
        .call("grep", json!({"pattern": "o", "max_results": 1}))
        .await;
    assert!(
        out.output
            .starts_with("src/a.rs:2:// TODO one\n[stopped after 1 matches"),
        "{}",
        out.output
    );
    let out = f.call("grep", json!({"pattern": "zzz"})).await;
    assert!(!out.is_error && out.output.starts_with("no matches"));
    let out = f.call("grep", json!({"pattern": "("})).await;
    assert!(out.is_error && out.output.contains("invalid regex"));
    let out = f
        .call("grep", json!({"pattern": "TODO", "path": "src/a.rs"}))
        .await;
    assert_eq!(out.output, "src/a.rs:2:// TODO one\n");
}

#[tokio::test]
async fn grep_does_not_read_through_symlinks() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "s3cret\n").unwrap();
    symlink(outside.path(), f.ws.root().join("dir-link")).unwrap();
    symlink(outside.path().join("secret"), f.ws.root().join("file-link")).unwrap();
    let out = f.call("grep", json!({"pattern": "s3cret"})).await;
    assert!(out.output.starts_with("no matches"), "{}", out.output);
    let out = f.call("glob", json!({"pattern": "*"})).await;
    assert!(!out.output.contains("link"), "{}", out.output);
}

#[tokio::test]
async fn every_output_is_capped() {
    let f = fixture_with(ToolLimits {
        output_cap_bytes: 500,
        ..ToolLimits::default()
    });
    let content: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
    f.write("big.txt", &content);
    // read_file stops at the cap rather than being cut in the middle, and
    // says where to read on.
    let out = f.call("read_file", json!({"path": "big.txt"})).await;
    assert!(out.output.len() <= 500, "{}", out.output.len());
    assert!(out.output.starts_with("     1\tline 1\n"));
    let next: usize = out
        .output
        .rsplit_once("read on with offset=")
        .and_then(|(_, n)| {
            n.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no continuation marker: {}", out.output));
    let out = f
        .call("read_file", json!({"path": "big.txt", "offset": next}))
        .await;
    assert!(out.output.starts_with(&format!("{next:>6}\tline {next}\n")));
    let out = f.call("grep", json!({"pattern": "line"})).await;
    assert!(out.output.len() <= 500 && out.output.contains("bytes cut"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_as_spawned_tasks_on_a_multi_thread_runtime() {
    let f = fixture();
    f.write("a.txt", "hello\n");
    let toolbox = std::sync::Arc::new(f.toolbox);
    let tasks: Vec<_> = ["read_file", "bash"]
        .into_iter()
        .map(|tool| {
            let toolbox = toolbox.clone();
            tokio::spawn(async move {
                let args = json!({"path": "a.txt", "command": "cat a.txt"});
                toolbox
                    .call(tool, &args, CancellationToken::new(), no_output())
                    .await
            })
        })
        .collect();
    for task in tasks {
        let out = task.await.unwrap();
        assert!(
            !out.is_error && out.output.contains("hello"),
            "{}",
            out.output
        );
    }
}

/// A sink for output streamed while a tool runs, for calls that only look
/// at the result.
fn no_output() -> pod::tools::OutputSink {
    std::sync::Arc::new(|_: &str| {})
}
