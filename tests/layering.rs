//! Imports point down the layering that docs/architecture.md declares.
//!
//! The layers are read from the doc's ```` ```layers ```` blocks, so the doc and this check
//! cannot drift: the crate's modules, lowest first, and the layers inside a module that has
//! its own (`layers controller`). Every `crate::<module>` path in a module's source (its
//! `use crate::` lines and inline paths alike; `super::<sibling>` inside a layered module)
//! must name its own module or one on a lower line. Test code (files declared under
//! `#[cfg(test)]` and what follows `#[cfg(test)]` in a file) may use any module, as
//! dev-dependencies may.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One layered scope: the crate's top level (`None`) or one module's children.
#[derive(Debug)]
struct Layers {
    scope: Option<String>,
    /// module -> its layer (0 is the lowest).
    rank: BTreeMap<String, usize>,
}

fn declared_layers() -> Vec<Layers> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("the doc");
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("```layers") else {
            continue;
        };
        let scope = Some(rest.trim().to_string()).filter(|s| !s.is_empty());
        let mut rank = BTreeMap::new();
        for (i, layer) in lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .enumerate()
        {
            for module in layer.split_whitespace() {
                let before = rank.insert(module.to_string(), i);
                assert!(before.is_none(), "{module} is declared twice in {scope:?}");
            }
        }
        out.push(Layers { scope, rank });
    }
    assert!(
        out.iter().any(|l| l.scope.is_none()),
        "docs/architecture.md declares no ```layers block"
    );
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files compiled only for tests: children declared right after `#[cfg(test)]`.
fn test_only_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("source");
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => file.parent().expect("dir").to_path_buf(),
            _ => file.with_extension(""),
        };
        let mut cfg_test = false;
        for line in text.lines().map(str::trim) {
            if line == "#[cfg(test)]" {
                cfg_test = true;
                continue;
            }
            if cfg_test {
                let decl = line.strip_prefix("pub ").unwrap_or(line);
                if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                    out.insert(dir.join(format!("{name}.rs")));
                    out.insert(dir.join(name));
                }
            }
            cfg_test = false;
        }
    }
    out
}

fn is_test_only(file: &Path, test_only: &BTreeSet<PathBuf>) -> bool {
    file.ancestors().any(|a| test_only.contains(a))
}

/// The module paths a line names: `crate::a::b` gives `["a", "b"]` (as far as they go).
fn crate_paths(line: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(prefix) {
        // Not the tail of a longer identifier (`my_crate::`).
        let boundary = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[i + prefix.len()..];
        if !boundary {
            continue;
        }
        // Segments up to the first one that does not end at `::`.
        let mut path: Vec<String> = Vec::new();
        for seg in rest.split("::") {
            let ident: String = seg
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if ident.is_empty() {
                break;
            }
            let whole = ident.len() == seg.len();
            path.push(ident);
            if !whole {
                break;
            }
        }
        // `use crate::{a, b}` names several modules.
        if path.is_empty() && rest.starts_with('{') {
            let inner = &rest[1..rest.find('}').unwrap_or(rest.len())];
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(vec![name]);
                }
            }
        } else if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

/// `src/a/b/c.rs` -> `["a", "b", "c"]`; `src/a/mod.rs` -> `["a"]`; `src/a.rs` -> `["a"]`.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root().join("src")).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Every import that goes up or sideways, as `file:line: a -> b`.
fn violations() -> Vec<String> {
    let layers = declared_layers();
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let test_only = test_only_files(&files);
    let mut bad = Vec::new();
    for file in &files {
        if is_test_only(file, &test_only) {
            continue;
        }
        let module = module_path(file);
        let Some(top) = module.first() else { continue };
        if top == "lib" || top == "main" {
            continue; // the crate root and the binary sit above everything
        }
        let text = std::fs::read_to_string(file).expect("source");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code == "#[cfg(test)]" {
                break; // the rest of the file is test code
            }
            if code.starts_with("//") {
                continue;
            }
            let at = |from: &str, to: &str| {
                format!(
                    "{}:{}: {from} imports {to}, which is not below it",
                    file.strip_prefix(root()).expect("in crate").display(),
                    n + 1
                )
            };
            for l in &layers {
                match &l.scope {
                    None => {
                        for path in crate_paths(code, "crate::") {
                            let Some(from) = l.rank.get(top.as_str()) else {
                                bad.push(at(top, "(undeclared module)"));
                                continue;
                            };
                            let target = &path[0];
                            match l.rank.get(target.as_str()) {
                                _ if target == top => {}
                                Some(to) if to < from => {}
                                _ => bad.push(at(top, target)),
                            }
                        }
                    }
                    Some(scope) if scope == top && module.len() >= 2 => {
                        let child = &module[1];
                        let Some(from) = l.rank.get(child.as_str()) else {
                            bad.push(at(child, "(undeclared submodule)"));
                            continue;
                        };
                        let mut targets: Vec<String> = crate_paths(code, "crate::")
                            .into_iter()
                            .filter(|p| p[0] == *scope && p.len() >= 2)
                            .map(|p| p[1].clone())
                            .collect();
                        // `super::x` from a direct child names a sibling.
                        if module.len() == 2 {
                            targets.extend(
                                crate_paths(code, "super::")
                                    .into_iter()
                                    .map(|p| p[0].clone())
                                    .filter(|t| l.rank.contains_key(t.as_str())),
                            );
                        }
                        for target in targets {
                            match l.rank.get(target.as_str()) {
                                _ if target == *child => {}
                                Some(to) if to < from => {}
                                // Items of the scope's own mod.rs (not a child) are fine.
                                None => {}
                                Some(_) => bad.push(at(&format!("{scope}::{child}"), &target)),
                            }
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    bad
}

#[test]
fn every_import_points_down_the_declared_layering() {
    let bad = violations();
    assert!(
        bad.is_empty(),
        "imports against the layering:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_module_of_the_crate_is_declared_in_a_layer() {
    let layers = declared_layers();
    let top = layers.iter().find(|l| l.scope.is_none()).expect("top");
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).expect("lib.rs");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    for m in &modules {
        assert!(top.rank.contains_key(*m), "src/lib.rs's {m} is in no layer");
    }
    for m in top.rank.keys() {
        assert!(
            modules.contains(&m.as_str()),
            "the layers name {m}, not in src/lib.rs"
        );
    }
}

#[test]
fn the_check_sees_an_upward_import() {
    // The parser itself: the forms imports take in this crate.
    assert_eq!(
        crate_paths("use crate::webhook::server::parse;", "crate::"),
        vec![vec!["webhook", "server", "parse"]]
    );
    assert_eq!(
        crate_paths(
            "    let x = crate::engine::Event::A(crate::api::B);",
            "crate::"
        ),
        vec![vec!["engine", "Event", "A"], vec!["api", "B"]]
    );
    assert_eq!(
        crate_paths("use crate::{api, engine::Event};", "crate::"),
        vec![vec!["api"], vec!["engine"]]
    );
    assert!(crate_paths("use my_crate::x;", "crate::").is_empty());
    assert_eq!(
        crate_paths("use super::engine_task::Input;", "super::"),
        vec![vec!["engine_task", "Input"]]
    );
}
