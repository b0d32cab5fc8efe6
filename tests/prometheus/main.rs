//! kuota's metrics, dashboards and alert rules against a real Prometheus (Debian's
//! `prometheus` package): `promtool check metrics` on kuota's output, `promtool check
//! rules` on the rules, then a Prometheus on loopback scrapes `kuota simulate
//! --metrics-addr` (paced with --realtime-factor) and `kuota serve` (fed a few admission
//! reviews), and every PromQL expression in the dashboards and rules goes through its
//! HTTP API: each must parse, and each dashboard query must return data.
//!
//! Behind the `e2e` feature, like the other tests against real systems (`.ci/run`
//! installs the package). Without `promtool` and `prometheus` on PATH it fails; it never
//! skips.
//!
//! With KUOTA_DASHBOARD_SVG=FILE it also draws the main dashboard's panels from
//! Prometheus' answers into FILE (how docs/img/dashboard-quotas.svg is made).

mod http;
mod render;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills the child processes the test started, whatever happens.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tool(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found on PATH: install Debian's prometheus package (apt-get install prometheus)")
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Waits until GET `path` on `addr` answers 200, or panics after `within`.
fn wait_http(rt: &tokio::runtime::Runtime, addr: SocketAddr, path: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if let Ok((200, _)) = rt.block_on(http::get(addr, path)) {
            return;
        }
        assert!(Instant::now() < deadline, "{addr}{path} never answered");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn scrape(rt: &tokio::runtime::Runtime, addr: SocketAddr) -> String {
    let (status, body) = rt.block_on(http::get(addr, "/metrics")).expect("scrape");
    assert_eq!(status, 200, "{body}");
    body
}

/// The PromQL of every panel target and query variable, with Grafana's variables
/// replaced the way Grafana would ("All" = `.*`, `$__rate_interval` = 30s) and
/// `label_values(m, l)` as the query Grafana sends for it.
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    let subst = |e: &str| {
        let mut e = e.replace("$__rate_interval", "30s");
        for v in ["cohort", "cluster_queue", "flavor", "path"] {
            e = e.replace(&format!("${v}"), ".*");
        }
        e
    };
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        panels.push(p);
        panels.extend(p["panels"].as_array().into_iter().flatten());
    }
    for p in panels {
        for t in p["targets"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            out.push((title, subst(t["expr"].as_str().expect("expr"))));
        }
    }
    for v in d["templating"]["list"].as_array().expect("list") {
        let Some(q) = v["definition"].as_str() else {
            continue;
        };
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .expect("label_values(metric, label)");
        let (metric, label) = inner.rsplit_once(',').expect("two arguments");
        out.push((
            format!("variable {}", v["name"]),
            subst(&format!("count by ({}) ({})", label.trim(), metric.trim())),
        ));
    }
    out
}

/// Runs `expr` as an instant query; returns the result vector (panics on a parse error).
fn query(rt: &tokio::runtime::Runtime, prom: SocketAddr, expr: &str) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}", http::encode(expr));
    let (status, body) = rt.block_on(http::get(prom, &path)).expect("query");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
    assert_eq!(status, 200, "{expr}: {body}");
    assert_eq!(v["status"], "success", "{expr}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Runs `expr` as a range query over the last `secs` seconds (what a dashboard panel
/// does); returns the series that have at least one point.
fn query_range(
    rt: &tokio::runtime::Runtime,
    prom: SocketAddr,
    expr: &str,
    secs: f64,
) -> Vec<Value> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let path = format!(
        "/api/v1/query_range?query={}&start={}&end={now}&step=1",
        http::encode(expr),
        now - secs
    );
    let (status, body) = rt.block_on(http::get(prom, &path)).expect("query_range");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
    assert_eq!(status, 200, "{expr}: {body}");
    assert_eq!(v["status"], "success", "{expr}: {body}");
    v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["values"].as_array().is_some_and(|p| !p.is_empty()))
        .cloned()
        .collect()
}

fn rules_file(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/prometheus/rules.yaml"),
    )
    .expect("rules.yaml");
    let rule: serde_norway::Value = serde_norway::from_str(&text).expect("yaml");
    let plain = serde_norway::to_string(&rule["spec"]).expect("yaml");
    let path = dir.join("rules.yml");
    std::fs::write(&path, plain).expect("write rules");
    path
}

fn start_serve(dir: &Path, procs: &mut Procs) -> (SocketAddr, SocketAddr, String) {
    let kuota = env!("CARGO_BIN_EXE_kuota");
    let certs = dir.join("certs");
    run_ok(Command::new(kuota).args(["certs", "--out-dir"]).arg(&certs));
    let ca = std::fs::read_to_string(certs.join("ca.crt")).expect("ca.crt");
    let (tls, health) = (loopback(free_port()), loopback(free_port()));
    let child = Command::new(kuota)
        .args(["serve", "--cert-dir"])
        .arg(&certs)
        .args([
            "--listen",
            &tls.to_string(),
            "--health-listen",
            &health.to_string(),
        ])
        .arg("--ready-without-index")
        // No cluster: the index stays cold, which --ready-without-index allows.
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kuota serve");
    procs.0.push(child);
    (tls, health, ca)
}

/// Reviews that make the webhook metrics move: allowed or patched Jobs, and a body
/// that is not an AdmissionReview (HTTP 400).
fn send_reviews(rt: &tokio::runtime::Runtime, tls: SocketAddr, ca: &str) {
    let job = serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a",
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "i"}]}}}
    });
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "7d1e0d2c-0000-4000-8000-000000000001",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "namespace": "team-a", "operation": "CREATE",
            "userInfo": {"username": "ci"}, "object": job}
    });
    let body = serde_json::to_vec(&review).expect("json");
    for path in ["/mutate-batch-v1-job", "/validate-batch-v1-job"] {
        let status = rt.block_on(http::post_tls(tls, ca, path, body.clone()));
        assert_eq!(status, 200, "{path}");
    }
    let status = rt.block_on(http::post_tls(
        tls,
        ca,
        "/mutate-batch-v1-job",
        b"{}".to_vec(),
    ));
    assert_eq!(status, 400);
}

#[test]
fn dashboards_and_rules_against_a_real_prometheus() {
    let promtool = tool("promtool");
    let prometheus = tool("prometheus");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("kuota-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let mut procs = Procs(Vec::new());

    // The simulator: gpu-gangs (quota, borrowing, preemption, TAS GPUs), ~12 h of
    // virtual time in about 30 s.
    let sim = loopback(free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_kuota"))
        .args([
            "simulate",
            "--scenario",
            "gpu-gangs",
            "--metrics-addr",
            &sim.to_string(),
        ])
        .args(["--realtime-factor", "1500"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kuota simulate");
    procs.0.push(child);
    let (tls, health, ca) = start_serve(&dir, &mut procs);
    wait_http(&rt, sim, "/metrics", Duration::from_secs(30));
    wait_http(&rt, health, "/healthz", Duration::from_secs(30));
    send_reviews(&rt, tls, &ca);

    // promtool's own checks of the exposition and of the rules.
    for (what, text) in [
        ("simulate", scrape(&rt, sim)),
        ("serve", scrape(&rt, health)),
    ] {
        let file = dir.join(format!("{what}.prom"));
        std::fs::write(&file, &text).expect("write");
        let out = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(std::fs::File::open(&file).expect("open"))
            .output()
            .expect("promtool");
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "promtool check metrics on {what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rules = rules_file(&dir);
    run_ok(Command::new(&promtool).args(["check", "rules"]).arg(&rules));

    // A real Prometheus scraping both, with the rules loaded.
    let prom = loopback(free_port());
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [{rules:?}]\n\
         scrape_configs:\n- job_name: kuota-simulate\n  static_configs: [{{targets: ['{sim}']}}]\n\
         - job_name: kuota-serve\n  static_configs: [{{targets: ['{health}']}}]\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).expect("config");
    run_ok(
        Command::new(&promtool)
            .args(["check", "config"])
            .arg(dir.join("prometheus.yml")),
    );
    let child = Command::new(&prometheus)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={prom}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus");
    procs.0.push(child);
    wait_http(&rt, prom, "/-/ready", Duration::from_secs(60));

    // Let the run unfold under scrapes; keep webhook traffic going so rates exist.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(45) {
        send_reviews(&rt, tls, &ca);
        std::thread::sleep(Duration::from_secs(1));
    }
    let targets = query(&rt, prom, "up");
    assert_eq!(targets.len(), 2, "{targets:?}");
    for t in &targets {
        assert_eq!(t["value"][1], "1", "target down: {t}");
    }

    let grafana = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/grafana");
    let mut main_panels = Vec::new();
    for file in ["kuota-quotas.json", "kuota-operations.json"] {
        let d: Value =
            serde_json::from_str(&std::fs::read_to_string(grafana.join(file)).expect("dashboard"))
                .expect("json");
        let window = started.elapsed().as_secs_f64() + 5.0;
        for (title, expr) in dashboard_queries(&d) {
            let result = query_range(&rt, prom, &expr, window);
            assert!(!result.is_empty(), "{file}: {title}: no data for {expr}");
        }
        if file == "kuota-quotas.json" {
            main_panels = render::panels(&d);
        }
    }
    let rule_doc: Value =
        serde_norway::from_str(&std::fs::read_to_string(&rules).expect("rules")).expect("yaml");
    for g in rule_doc["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            // Parses and evaluates; an alert need not fire.
            query(&rt, prom, r["expr"].as_str().expect("expr"));
        }
    }
    // Prometheus evaluated every rule without an error.
    let (_, body) = rt
        .block_on(http::get(prom, "/api/v1/rules"))
        .expect("rules api");
    let v: Value = serde_json::from_str(&body).expect("json");
    let mut evaluated = 0;
    for g in v["data"]["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            assert_eq!(r["health"], "ok", "{r}");
            evaluated += 1;
        }
    }
    assert_eq!(evaluated, 8, "{body}");

    if let Some(out) = std::env::var_os("KUOTA_DASHBOARD_SVG") {
        let end = started.elapsed().as_secs_f64();
        let svg = render::svg(&rt, prom, &main_panels, end).expect("renders");
        std::fs::write(&out, svg).expect("write svg");
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
