//! Runs every scenario in tests/scenarios/ against the engine (format: tests/scenarios/README.md).
//! `KUOTA_SCENARIO=name cargo test --test scenarios` runs one.

mod scenario;

use scenario::runner::Runner;
use scenario::{Placement, Scenario};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;

#[test]
fn scenarios() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let only = std::env::var("KUOTA_SCENARIO")
        .ok()
        .filter(|s| !s.is_empty());
    let (mut cases, mut failures) = load_cases(&root);
    let mut names = BTreeSet::new();
    for c in &cases {
        if !names.insert(c.name.clone()) {
            failures.push(format!("{}: duplicate scenario name `{}`", c.file, c.name));
        }
    }
    // `KUOTA_SCENARIO` names one scenario, one kueue case, or a whole kueue suite.
    cases.retain(|c| {
        only.as_ref().is_none_or(|o| {
            *o == c.name || *o == c.suite || c.name.split('@').next() == Some(o.as_str())
        })
    });
    if let Some(o) = &only {
        failures.retain(|f| f.contains(o.as_str()));
        assert!(
            !cases.is_empty() || !failures.is_empty(),
            "KUOTA_SCENARIO={o}: no such scenario or kueue suite"
        );
    }
    let ran = cases.len() + failures.len();
    let mut pending = 0;
    for c in &cases {
        // A panic in one scenario must not hide the others.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Runner::new(&c.file, &c.sc, c.placement).run(&c.fixtures, &c.sc)
        })) {
            Ok(errs) if errs.is_empty() && c.sc.pending.is_some() => failures.push(format!(
                "{}: marked pending ({}) but passes: remove `pending`",
                c.file,
                c.sc.pending.as_deref().unwrap_or_default()
            )),
            Ok(errs) if errs.is_empty() => {}
            Ok(_) if c.sc.pending.is_some() => pending += 1,
            Ok(errs) => failures.push(format!("{}:\n{}", c.file, errs.join("\n"))),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                failures.push(format!("{}: panicked: {}", c.file, msg.unwrap_or_default()));
            }
        }
    }
    if !failures.is_empty() {
        eprintln!("\n{}\n", failures.join("\n\n"));
        panic!(
            "{} of {ran} scenarios failed (details above)",
            failures.len()
        );
    }
    eprintln!(
        "{} scenarios passed, {pending} kueue cases pending (they still fail, as marked)",
        ran - pending
    );
}

/// One runnable scenario: a file of tests/scenarios/, or one case of a kueue suite.
struct Case {
    /// What failures are reported under (`tests/scenarios/kueue/suite.yaml#case`).
    file: String,
    name: String,
    /// The kueue suite it belongs to (empty for a plain scenario).
    suite: String,
    /// The suite's shared manifests, applied before the case's `objects`.
    fixtures: String,
    /// The suite's strategy for this run, unless the case sets its own.
    placement: Option<Placement>,
    sc: Rc<Scenario>,
}

/// Every scenario of tests/scenarios/*.yaml and every case of tests/scenarios/kueue/*.yaml,
/// in file order, plus one failure per file that does not parse.
fn load_cases(root: &Path) -> (Vec<Case>, Vec<String>) {
    let (mut cases, mut failures) = (Vec::new(), Vec::new());
    for (dir, is_suite) in [(root.to_path_buf(), false), (root.join("kueue"), true)] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("tests/scenarios and tests/scenarios/kueue exist")
            .map(|e| e.expect("readable dir entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for path in files {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let file = if is_suite {
                format!("tests/scenarios/kueue/{stem}.yaml")
            } else {
                format!("tests/scenarios/{stem}.yaml")
            };
            let text = std::fs::read_to_string(&path).expect("readable scenario file");
            if !is_suite {
                match scenario::parse(&text) {
                    Ok(sc) if sc.name == stem => cases.push(Case {
                        file,
                        name: stem,
                        suite: String::new(),
                        fixtures: String::new(),
                        placement: None,
                        sc: Rc::new(sc),
                    }),
                    Ok(sc) => failures.push(format!(
                        "{file}: name `{}` must equal the file name `{stem}`",
                        sc.name
                    )),
                    Err(e) => failures.push(format!("{file}: invalid scenario {e}")),
                }
                continue;
            }
            match scenario::kueue::parse(&text) {
                Ok(s) if s.suite == stem => {
                    for sc in s.cases {
                        let sc = Rc::new(sc);
                        let runs: Vec<Option<Placement>> =
                            if s.placements.is_empty() || sc.config.placement.is_some() {
                                vec![None]
                            } else {
                                s.placements.iter().copied().map(Some).collect()
                            };
                        for (i, placement) in runs.into_iter().enumerate() {
                            let name = match placement {
                                Some(p) if i > 0 => format!("{}@{}", sc.name, p.as_str()),
                                _ => sc.name.clone(),
                            };
                            cases.push(Case {
                                file: format!("{file}#{name}"),
                                name,
                                suite: stem.clone(),
                                fixtures: s.fixtures.clone(),
                                placement,
                                sc: Rc::clone(&sc),
                            });
                        }
                    }
                }
                Ok(s) => failures.push(format!(
                    "{file}: suite `{}` must equal the file name `{stem}`",
                    s.suite
                )),
                Err(e) => failures.push(format!("{file}: invalid suite {e}")),
            }
        }
    }
    (cases, failures)
}
