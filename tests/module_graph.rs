//! The crate's top-level modules sit in layers and use only the layers
//! below theirs; the modules of `src/pod/` depend on each other downward
//! only; `docs/architecture.md` shows both as they are in the code.
//!
//! Dependencies are read from the source: every `super::NAME` path (plain,
//! or inside a `use super::{…}` group) in a module's file, tests left out.
//! `mod.rs` only declares the modules and re-exports; a module that used an
//! item of `mod.rs` would make every module above it depend on the root, so
//! that is refused too. Between top-level modules it is every `crate::NAME`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Each module of `src/pod/` (a file, with its directory of submodules if
/// it has one) and the sibling modules it names.
fn graph_of_code() -> Graph {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pod");
    let mut sources: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "mod" {
            continue;
        }
        collect(&path, 0, sources.entry(name).or_default());
    }
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let mut graph = Graph::new();
    for (name, files) in &sources {
        let deps = graph.entry(name.clone()).or_default();
        for (depth, text) in files {
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            // From a file `depth` directories down, the siblings are behind
            // one more `super::` each; from anywhere, behind `crate::pod::`.
            let prefix = "super::".repeat(depth + 1);
            let named = names_after(code, &prefix)
                .into_iter()
                .chain(names_after(code, "crate::pod::"));
            for first in named {
                if first == "super" {
                    continue;
                }
                assert!(
                    modules.contains(&first),
                    "{name} uses `{first}`, an item of src/pod/mod.rs: name the module that \
                     defines it instead"
                );
                if first != *name {
                    deps.insert(first);
                }
            }
        }
    }
    graph
}

/// The source files of the module at `path` (a file or a directory), with
/// how deep below `src/pod/` each is; test files are left out.
fn collect(path: &Path, depth: usize, files: &mut Vec<(usize, String)>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            collect(&entry.unwrap().path(), depth + 1, files);
        }
    } else if path.extension().is_some_and(|e| e == "rs")
        && path.file_stem().is_some_and(|s| s != "tests")
    {
        files.push((depth, std::fs::read_to_string(path).unwrap()));
    }
}

/// The first path segment of everything named after `prefix`: `prefix::a`,
/// and each item of `prefix::{a, b::{c, d}}`.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        // Only where the path starts: not the tail of `super::super::` or
        // of another word.
        let before = &code[..at];
        if before.ends_with("super::") || before.ends_with(ident) {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            let name: String = rest.chars().take_while(|c| ident(*c)).collect();
            if !name.is_empty() {
                names.push(name);
            }
            continue;
        };
        let mut depth = 1;
        let mut item = String::new();
        let mut at_start = true;
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                break;
            }
            if depth == 1 && c == ',' {
                if !item.is_empty() {
                    names.push(std::mem::take(&mut item));
                }
                at_start = true;
                continue;
            }
            if at_start {
                if ident(c) {
                    item.push(c);
                } else if !item.is_empty() {
                    names.push(std::mem::take(&mut item));
                    at_start = false;
                }
            }
        }
        if !item.is_empty() {
            names.push(item);
        }
    }
    names
}

/// The graph as `docs/architecture.md` draws it: the lines of its
/// "Module graph" block, `name.rs → a, b` or `name.rs → (none)`.
fn graph_of_docs() -> Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("## Module graph")
        .nth(1)
        .expect("docs/architecture.md has a `## Module graph` section");
    let block = section.split("```").nth(1).expect("a code block in it");
    let mut graph = Graph::new();
    for line in block.lines() {
        let Some((name, deps)) = line.split_once('→') else {
            continue;
        };
        let name = name.trim().trim_end_matches(".rs").trim_end_matches('/');
        let deps = deps
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && *d != "(none)")
            .map(str::to_owned)
            .collect();
        graph.insert(name.to_owned(), deps);
    }
    graph
}

#[test]
fn pod_modules_depend_downward_only() {
    let graph = graph_of_code();
    // Repeatedly take out the modules that depend on nothing left; what
    // cannot be taken out is on a cycle.
    let mut left = graph.clone();
    while !left.is_empty() {
        let leaves: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(name, _)| name.clone())
            .collect();
        assert!(
            !leaves.is_empty(),
            "import cycle among these src/pod modules: {left:#?}"
        );
        for leaf in leaves {
            left.remove(&leaf);
        }
    }
}

#[test]
fn the_architecture_doc_shows_the_module_graph_of_the_code() {
    assert_eq!(
        graph_of_docs(),
        graph_of_code(),
        "docs/architecture.md's module graph (left) differs from src/pod (right)"
    );
}

#[test]
fn names_are_read_from_paths_and_groups() {
    let code = "use super::a::X;\nuse super::{b, c::{D, E}, f::G};\nlet x = super::h::y();\n\
                use super::super::i;";
    assert_eq!(
        names_after(code, "super::"),
        ["a", "b", "c", "f", "h", "super"]
    );
    assert_eq!(names_after(code, "super::super::"), ["i"]);
}

/// `pod acp` is a client of the pod, as the TUI is: an agent loop of its own
/// would be a second conversation. Its code names none of the server's
/// parts; it has the protocol and the client, nothing else of the crate.
#[test]
fn the_acp_bridge_is_a_client_and_names_no_server_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/acp");
    let mut files = Vec::new();
    collect(&dir, 0, &mut files);
    assert!(!files.is_empty(), "src/acp has no sources");
    for (_, text) in &files {
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for used in names_after(code, "crate::") {
            assert!(
                ["protocol", "client"].contains(&used.as_str()),
                "src/acp uses crate::{used}: it may use only the protocol and the client"
            );
        }
    }
}

/// The client side of the crate: the front ends and the client API. A
/// client knows the pod by its protocol only, so these modules may use one
/// another and [`CLIENT_MAY_USE`], nothing of the server (issue 37: the
/// client crate depends on protocol only).
const CLIENT_SIDE: &[&str] = &["acp", "client", "tui"];

/// What the client side may use besides itself: the wire types with the
/// pure data and helpers beside them (the `pod-protocol` crate, re-exported
/// as `crate::protocol`), and the text made safe for a terminal.
const CLIENT_MAY_USE: &[&str] = &["protocol", "safe_text"];

#[test]
fn the_client_side_uses_only_the_protocol() {
    let graph = crate_graph_of_code();
    let mut server = Vec::new();
    for name in CLIENT_SIDE {
        let deps = graph
            .get(*name)
            .unwrap_or_else(|| panic!("CLIENT_SIDE names `{name}`, which src/ does not have"));
        for dep in deps {
            if !CLIENT_SIDE.contains(&dep.as_str()) && !CLIENT_MAY_USE.contains(&dep.as_str()) {
                server.push(format!("{name} → {dep}"));
            }
        }
    }
    assert!(
        server.is_empty(),
        "the client side uses server code: {server:?}; what a client shows must come from \
         the entry or the protocol (move pure data and helpers into protocol/), or be asked \
         of the pod"
    );
}

/// The crates of the workspace and the ones each may depend on: the
/// protocol depends on no other crate of pod's, so a third-party client
/// needs nothing of the server.
const CRATES: &[(&str, &[&str])] = &[(".", &["pod-protocol"]), ("crates/protocol", &[])];

/// The crates of this workspace a `Cargo.toml` names among its
/// dependencies (of every kind).
fn workspace_crates_used(manifest: &toml::Table, ours: &BTreeSet<String>) -> BTreeSet<String> {
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|kind| manifest.get(*kind).and_then(toml::Value::as_table))
        .flat_map(|deps| deps.keys().cloned())
        .filter(|name| ours.contains(name))
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_crates_its_layer_allows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |dir: &str| -> toml::Table {
        let text = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        text.parse().unwrap()
    };
    let workspace = read(".");
    let members: BTreeSet<String> = workspace["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    let listed: BTreeSet<String> = CRATES.iter().map(|(dir, _)| (*dir).to_owned()).collect();
    assert_eq!(
        members, listed,
        "the workspace's members (left) differ from CRATES (right): give a new crate its \
         allowed dependencies there"
    );
    let ours: BTreeSet<String> = CRATES
        .iter()
        .map(|(dir, _)| read(dir)["package"]["name"].as_str().unwrap().to_owned())
        .collect();
    for (dir, allowed) in CRATES {
        let used = workspace_crates_used(&read(dir), &ours);
        let allowed: BTreeSet<String> = allowed.iter().map(|a| (*a).to_owned()).collect();
        assert!(
            used.is_subset(&allowed),
            "{dir} depends on {used:?}, but may depend only on {allowed:?}"
        );
    }
}

/// The top-level modules of `src/`, in layers from the top down: a module
/// uses modules of lower layers only, never one of its own layer or above.
/// `docs/architecture.md` ("Layers") shows the same table.
const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["acp", "tui"],
    &["client", "remote"],
    &["pod"],
    &["completion", "context"],
    &["hooks", "input", "prompt"],
    &["approval", "mcp"],
    &["tools"],
    &["blobs", "checkpoint", "provider"],
    &["store"],
    &["private", "safe_text", "web", "workspace"],
];

/// Each top-level module of `src/` (a file, with its directory of
/// submodules if it has one; `main.rs` and `lib.rs`, the crate's root, left
/// out) and the other top-level modules its code names as `crate::NAME`.
fn crate_graph_of_code() -> Graph {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut sources: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "main" || name == "lib" || !(path.is_dir() || name_is_rs(&path)) {
            continue;
        }
        collect(&path, 0, sources.entry(name).or_default());
    }
    sources
        .iter()
        .map(|(name, files)| {
            let deps = files
                .iter()
                .flat_map(|(_, text)| {
                    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                    names_after(code, "crate::")
                })
                .filter(|used| used != name)
                .collect();
            (name.clone(), deps)
        })
        .collect()
}

fn name_is_rs(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "rs")
}

/// The layer of each module in [`LAYERS`], 0 the top.
fn layer_of() -> BTreeMap<&'static str, usize> {
    let mut layers = BTreeMap::new();
    for (layer, names) in LAYERS.iter().enumerate() {
        for name in *names {
            assert!(
                layers.insert(*name, layer).is_none(),
                "`{name}` is in two layers of LAYERS"
            );
        }
    }
    layers
}

#[test]
fn top_level_modules_use_only_lower_layers() {
    let graph = crate_graph_of_code();
    let layers = layer_of();
    let in_code: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    let in_table: BTreeSet<&str> = layers.keys().copied().collect();
    assert_eq!(
        in_table, in_code,
        "LAYERS (left) names other modules than src/ has (right): put each new module in \
         the layer of what it may use"
    );
    let mut upward = Vec::new();
    for (name, deps) in &graph {
        for dep in deps {
            // A `crate::NAME` that is no module (a macro, a re-export of the
            // root) is no edge.
            let Some(&to) = layers.get(dep.as_str()) else {
                continue;
            };
            if to <= layers[name.as_str()] {
                upward.push(format!("{name} → {dep}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "these uses go to the same layer or up (see LAYERS in tests/module_graph.rs and \
         docs/architecture.md): {upward:?}"
    );
}

/// The "Layers" section of `docs/architecture.md`: its code block, one
/// layer a line from the top, `a, b, c`.
fn layers_of_docs() -> Vec<Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("## Layers")
        .nth(1)
        .expect("docs/architecture.md has a `## Layers` section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .split("```")
        .nth(1)
        .expect("a code block of layers")
        .lines()
        .skip(1)
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.split(',').map(|n| n.trim().to_owned()).collect())
        .collect()
}

#[test]
fn the_architecture_doc_shows_the_layers_of_the_code() {
    let layers = layers_of_docs();
    let table: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|names| names.iter().map(|n| (*n).to_owned()).collect())
        .collect();
    assert_eq!(
        layers, table,
        "docs/architecture.md's layers (left) differ from LAYERS (right)"
    );
}
