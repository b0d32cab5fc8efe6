//! The Grafana dashboards and Prometheus rules, checked without a Grafana: every panel
//! has a data source, every template variable is defined and used, the sidecar
//! ConfigMap carries the same dashboards, and every metric a query names is one kuota
//! exports. (tests/prometheus.rs runs the queries through a real Prometheus.)

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dashboards() -> Vec<(String, Value)> {
    let dir = root().join("manifests/grafana");
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("manifests/grafana")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for p in entries {
        let text = std::fs::read_to_string(&p).expect("reads");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
        out.push((p.file_name().unwrap().to_string_lossy().into_owned(), v));
    }
    assert!(out.len() >= 2, "dashboards missing");
    out
}

/// Every panel, including those nested in collapsed rows.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

/// `$name` and `${name}` references in `s`.
fn references(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let (start, braced) = if b.get(i + 1) == Some(&b'{') {
                (i + 2, true)
            } else {
                (i + 1, false)
            };
            let end = s[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(s.len(), |n| start + n);
            if end > start {
                out.insert(s[start..end].to_string());
            }
            i = if braced { end + 1 } else { end };
        } else {
            i += 1;
        }
    }
    out
}

/// The PromQL expressions of a dashboard: panel targets and variable queries.
fn exprs(d: &Value) -> Vec<String> {
    let mut out: Vec<String> = panels(d)
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    for v in d["templating"]["list"].as_array().expect("templating") {
        if let Some(q) = v["definition"].as_str() {
            out.push(q.to_string());
        }
    }
    out
}

#[test]
fn every_panel_has_a_datasource_and_every_variable_is_defined_and_used() {
    for (file, d) in dashboards() {
        assert!(d["uid"].is_string() && d["title"].is_string(), "{file}");
        let vars: Vec<&Value> = d["templating"]["list"]
            .as_array()
            .expect("list")
            .iter()
            .collect();
        let names: BTreeSet<String> = vars
            .iter()
            .map(|v| v["name"].as_str().expect("variable name").to_string())
            .collect();
        assert!(
            names.contains("datasource"),
            "{file}: no datasource variable"
        );
        let mut used = BTreeSet::new();
        let mut ids = BTreeSet::new();
        for p in panels(&d) {
            let title = p["title"].as_str().unwrap_or_default();
            assert!(
                ids.insert(p["id"].as_i64().expect("id")),
                "{file}: duplicate id"
            );
            assert_eq!(
                p["datasource"]["type"], "prometheus",
                "{file}: panel {title:?} has no Prometheus datasource"
            );
            used.extend(references(p["datasource"]["uid"].as_str().unwrap_or("")));
            let grid = &p["gridPos"];
            assert!(
                grid["w"]
                    .as_i64()
                    .is_some_and(|w| w > 0 && grid["x"].as_i64().unwrap_or(99) + w <= 24),
                "{file}: panel {title:?} gridPos"
            );
            if p["type"] == "row" {
                continue;
            }
            let targets = p["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{file}: panel {title:?} has no query");
            for t in targets {
                assert_eq!(t["datasource"]["type"], "prometheus", "{file}: {title:?}");
                used.extend(references(t["datasource"]["uid"].as_str().unwrap_or("")));
                let expr = t["expr"].as_str().expect("expr");
                assert!(!expr.trim().is_empty(), "{file}: {title:?}");
                used.extend(references(expr));
            }
        }
        for v in &vars {
            if let Some(q) = v["definition"].as_str() {
                used.extend(references(q));
            }
            if v["type"] == "query" {
                assert_eq!(v["datasource"]["type"], "prometheus", "{file}");
            }
        }
        for n in &names {
            assert!(used.contains(n), "{file}: variable ${n} is never used");
        }
        for r in &used {
            assert!(
                names.contains(r) || r.starts_with("__"),
                "{file}: ${r} is used but not defined"
            );
        }
    }
}

#[test]
fn the_main_dashboard_has_the_template_variables_users_filter_by() {
    let (_, d) = dashboards()
        .into_iter()
        .find(|(f, _)| f == "kuota-quotas.json")
        .expect("main dashboard");
    let names: BTreeSet<&str> = d["templating"]["list"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for v in ["cohort", "cluster_queue", "flavor"] {
        assert!(names.contains(v), "{v}");
    }
}

#[test]
fn the_sidecar_configmap_carries_the_dashboards() {
    let text = std::fs::read_to_string(root().join("manifests/grafana/dashboards-configmap.yaml"))
        .expect("configmap");
    let cm: Value = serde_norway::from_str(&text).expect("yaml");
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboards = dashboards();
    assert_eq!(
        cm["data"].as_object().expect("data").len(),
        dashboards.len()
    );
    for (file, d) in dashboards {
        let embedded: Value = serde_json::from_str(cm["data"][&file].as_str().expect(&file))
            .unwrap_or_else(|e| panic!("{file} in the ConfigMap: {e}"));
        assert_eq!(embedded, d, "{file}: the ConfigMap is out of date");
    }
}

/// Metric names kuota exports: a demo run's exposition plus the webhook server's own.
fn exported_names() -> BTreeSet<String> {
    let m = kuota::telemetry::Metrics::new();
    kuota::sim::simulate(
        &kuota::sim::Scenario::demo(),
        kuota::sim::SimConfig {
            metrics: Some(m.clone()),
            ..Default::default()
        },
    )
    .expect("runs");
    // Families a simulation does not touch (they show up once they have samples).
    m.record_webhook_request("/mutate-batch-v1-job", "success", std::time::Duration::ZERO);
    m.record_webhook_review("allowed", true);
    m.record_api_write("Workload");
    m.record_placement(std::time::Duration::ZERO);
    let text = kuota::telemetry::metrics::to_prometheus_text(&m.encode());
    let mut names: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    // Served by `kuota serve`'s health listener next to the registry.
    for n in [
        "kuota_webhook_cert_expiry_timestamp_seconds",
        "kuota_webhook_cert_rotation_due",
        "kuota_webhook_cert_reloads_total",
        "kuota_webhook_cert_reload_errors_total",
        "kuota_webhook_open_connections",
    ] {
        names.insert(n.to_string());
    }
    names
}

fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in expr.match_indices("ku") {
        let rest = &expr[i..];
        if !(rest.starts_with("kueue_") || rest.starts_with("kuota_")) {
            continue;
        }
        if i > 0 && expr.as_bytes()[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        out.insert(rest[..end].to_string());
    }
    out
}

#[test]
fn every_metric_in_dashboards_and_rules_is_exported() {
    let names = exported_names();
    let known = |n: &str| {
        names.contains(n)
            || ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| n.strip_suffix(s).is_some_and(|b| names.contains(b)))
    };
    let mut all = Vec::new();
    for (file, d) in dashboards() {
        all.extend(exprs(&d).into_iter().map(|e| (file.clone(), e)));
    }
    let rules_text =
        std::fs::read_to_string(root().join("manifests/prometheus/rules.yaml")).expect("rules");
    let rules: Value = serde_norway::from_str(&rules_text).expect("yaml");
    assert_eq!(rules["kind"], "PrometheusRule");
    for g in rules["spec"]["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            assert!(r["alert"].is_string(), "{r}");
            all.push((
                "rules.yaml".into(),
                r["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    for (file, e) in all {
        let used = metric_names(&e);
        assert!(!used.is_empty(), "{file}: {e} names no kuota metric");
        for n in used {
            assert!(known(&n), "{file}: {n} is not exported by kuota ({e})");
        }
    }
}
