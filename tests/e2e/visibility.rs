//! Kueue's visibility API served by kuota, reached THROUGH the API server as an aggregated
//! API (`kubectl get --raw /apis/visibility.kueue.x-k8s.io/...`): queue order and positions
//! under both queueing strategies, `limit`/`offset`, a missing queue, a namespace user who
//! may read only their own LocalQueue, and a caller without the front proxy's certificate;
//! and kuota's group beside it (`visibility.kuota.dev`), whose items carry start estimates.
//!
//! kuota's controller and visibility server run in this process under the install's
//! `kuota-controller` ServiceAccount; a refusal of their calls fails the test.

use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kuota::controller::ControllerConfig;
use kuota::controller::pending::PendingQueries;
use kuota::visibility::VisibilityServer;
use serde_json::{Value, json};

use crate::controller::start_controller_with;
use crate::support::{
    QueueFixture, controller_lock, create_cluster_queue, create_local_queue, unique_name,
    write_serving_certs,
};

const GROUP: &str = "/apis/visibility.kueue.x-k8s.io";
/// kuota's group beside Kueue's: the same pages with start estimates.
const KUOTA_GROUP: &str = "/apis/visibility.kuota.dev/v1alpha1";
/// The APIServices the test registers, as the install does.
const API_SERVICES: [(&str, &str); 3] = [
    ("visibility.kueue.x-k8s.io", "v1beta2"),
    ("visibility.kueue.x-k8s.io", "v1beta1"),
    ("visibility.kuota.dev", "v1alpha1"),
];

/// Polls `check` every 200 ms until it gives a value; `None` on timeout.
async fn poll<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// GET `path` through the API server: its status code and JSON body.
async fn get_raw(client: &Client, path: &str) -> (u16, Value) {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    let resp = client
        .send(req.map(Into::into))
        .await
        .expect("API server answers");
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// (name, localQueueName, positionInClusterQueue, positionInLocalQueue) of a summary.
fn rows(summary: &Value) -> Vec<(String, String, i64, i64)> {
    summary["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                i["localQueueName"].as_str().unwrap_or_default().to_string(),
                i["positionInClusterQueue"].as_i64().unwrap_or(-1),
                i["positionInLocalQueue"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

fn row(name: &str, lq: &str, cq: i64, in_lq: i64) -> (String, String, i64, i64) {
    (name.into(), lq.into(), cq, in_lq)
}

/// Workload `name` in `ns` on LocalQueue `lq`, asking `cpu` at `priority`.
async fn workload(client: &Client, ns: &str, name: &str, lq: &str, cpu: &str, priority: i32) {
    bounded_workload(client, ns, name, lq, cpu, priority, None).await;
}

/// [`workload`] with a `maximumExecutionTimeSeconds`, if given.
async fn bounded_workload(
    client: &Client,
    ns: &str,
    name: &str,
    lq: &str,
    cpu: &str,
    priority: i32,
    bound_s: Option<i32>,
) {
    let wl: kuota::api::Workload = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"queueName": lq, "priority": priority, "maximumExecutionTimeSeconds": bound_s,
            "podSets": [{
            "name": "main", "count": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}
            }]}}
        }]}
    }))
    .expect("workload");
    Api::<kuota::api::Workload>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &wl)
        .await
        .unwrap_or_else(|e| panic!("create Workload {name}: {e}"));
}

/// The API server's route to the visibility server on 127.0.0.1:`port` (an ExternalName
/// Service to localhost and both APIServices), until dropped with [`Aggregated::remove`].
struct Aggregated {
    client: Client,
}

impl Aggregated {
    async fn register(client: &Client, ns: &str, port: u16, ca_pem: &str) -> Self {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "kuota-visibility", "namespace": ns},
            "spec": {"type": "ExternalName", "externalName": "localhost",
                     "ports": [{"port": port, "protocol": "TCP"}]}
        }))
        .expect("service");
        Api::<Service>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &svc)
            .await
            .expect("create Service");
        let api = Api::<APIService>::all(client.clone());
        for (group, version) in API_SERVICES {
            let name = format!("{version}.{group}");
            // A previous run that failed may have left one behind.
            let _ = api.delete(&name, &DeleteParams::default()).await;
            let apisvc: APIService = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"group": group, "version": version,
                         "groupPriorityMinimum": 100, "versionPriority": 100,
                         "caBundle": base64_pem(ca_pem),
                         "service": {"name": "kuota-visibility", "namespace": ns, "port": port}}
            }))
            .expect("APIService");
            poll(Duration::from_secs(20), || async {
                api.create(&PostParams::default(), &apisvc)
                    .await
                    .ok()
                    .map(|_| ())
            })
            .await
            .unwrap_or_else(|| panic!("create APIService {name}"));
        }
        Self {
            client: client.clone(),
        }
    }

    async fn remove(self) {
        let api = Api::<APIService>::all(self.client);
        for (group, version) in API_SERVICES {
            let name = format!("{version}.{group}");
            let _ = api.delete(&name, &DeleteParams::default()).await;
        }
    }
}

/// A CA and a serving certificate for `names` in `dir` (tls.crt, tls.key, ca.crt): the CA's PEM.
fn serving_certs(dir: &std::path::Path, names: &[String]) -> String {
    use kuota::webhook::{certs, tls};
    std::fs::create_dir_all(dir).expect("cert dir");
    let ca = certs::generate_ca(Duration::from_secs(86_400)).expect("CA");
    let serving = certs::issue_serving(&ca, names, Duration::from_secs(86_400)).expect("serving");
    std::fs::write(dir.join(tls::CERT_FILE), &serving.cert_pem).expect("write cert");
    std::fs::write(dir.join(tls::KEY_FILE), &serving.key_pem).expect("write key");
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem).expect("write CA");
    ca.cert_pem.clone()
}

fn base64_pem(pem: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// curl straight at the visibility server (not through the API server), with `extra` args:
/// the HTTP code, or 0 when the TLS handshake fails.
fn curl_direct(port: u16, ca: &std::path::Path, extra: &[&str]) -> u16 {
    let url = format!("https://localhost:{port}{GROUP}/v1beta2/clusterqueues/any/pendingworkloads");
    let out = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(ca)
        .args([
            "-H",
            "X-Remote-User: system:admin",
            "-H",
            "X-Remote-Group: system:masters",
        ])
        .args(extra)
        .arg(&url)
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Runs the kuota binary with the admin kubeconfig (or `kubeconfig`): exit code, stdout, stderr.
fn kuota_cli(args: &[&str], kubeconfig: Option<&std::path::Path>) -> (Option<i32>, String, String) {
    let admin = crate::support::kubeconfig_path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kuota"))
        .args(args)
        .env(
            "KUBECONFIG",
            kubeconfig.map_or(admin.into(), |p| p.as_os_str().to_owned()),
        )
        .output()
        .expect("kuota runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubectl kuota ARGS`: kubectl finds the binary on the PATH under its plugin name.
fn kubectl_kuota(args: &[&str], kubeconfig: &std::path::Path) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(unique_name("vis-plugin"));
    std::fs::create_dir_all(&dir).expect("plugin dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kuota"), dir.join("kubectl-kuota"))
        .expect("plugin link");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = std::env::var("KUOTA_K8S_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = std::process::Command::new(&kubectl)
        .arg("kuota")
        .args(args)
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("running {kubectl} (set KUOTA_K8S_KUBECTL): {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Worker threads: the CLI runs as a blocking child process while this process serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_workloads_are_served_through_the_api_server_in_queue_order() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("vis", "1").await;
    let (client, ns) = (fx.client.clone(), fx.ns.clone());
    create_local_queue(&client, &ns, "lq2", &fx.cq).await;
    // A StrictFIFO ClusterQueue beside the BestEffortFIFO one, same flavor.
    let strict = unique_name("cq-strict");
    create_cluster_queue(
        &client,
        &ns,
        &strict,
        &fx.rf,
        "1",
        json!({"queueingStrategy": "StrictFIFO"}),
    )
    .await;
    create_local_queue(&client, &ns, "strict", &strict).await;

    let queries = PendingQueries::default();
    let (stop, controller) = start_controller_with(
        &client,
        ControllerConfig {
            pending_queries: queries.clone(),
            estimates: kuota::controller::estimates::EstimateConfig {
                interval: Duration::from_secs(1),
                cpu_share: 1.0,
                ..Default::default()
            },
            ..ControllerConfig::default()
        },
    );
    let certs = std::env::temp_dir().join(unique_name("vis-certs"));
    // The aggregator checks the name of the Service it dials, then connects to localhost.
    let ca_pem = serving_certs(
        &certs,
        &["localhost".into(), format!("kuota-visibility.{ns}.svc")],
    );
    let ca_file = certs.join("ca.crt");
    let (kuota_client, record) = crate::rbac::Identity::Controller.client().await;
    let server = VisibilityServer::start(
        kuota_client,
        queries,
        "127.0.0.1:0".parse().expect("addr"),
        &certs,
    )
    .await
    .expect("visibility server starts under the install's RBAC");
    let port = server.local_addr().port();
    let aggregated = Aggregated::register(&client, &ns, port, &ca_pem).await;

    // Discovery through the aggregator, which is also what makes the APIService Available.
    let discovery = poll(Duration::from_secs(60), || async {
        let (code, body) = get_raw(&client, &format!("{GROUP}/v1beta2")).await;
        (code == 200).then_some(body)
    })
    .await;
    assert!(discovery.is_some(), "the APIService never became available");

    // One workload holds the whole quota of each ClusterQueue; the rest wait. Creation
    // times are a second apart, as the API server stamps them in seconds.
    let second = || tokio::time::sleep(Duration::from_millis(1100));
    // `hold` may run an hour at most: the start estimates behind it rest on that bound.
    bounded_workload(&client, &ns, "hold", "lq", "1", 0, Some(3600)).await;
    workload(&client, &ns, "hold-strict", "strict", "1", 0).await;
    let wls = Api::<kuota::api::Workload>::namespaced(client.clone(), &ns);
    let admitted = |name: &'static str| {
        let wls = wls.clone();
        async move {
            let wl = wls.get(name).await.ok()?;
            wl.status?.admission.map(|_| ())
        }
    };
    poll(Duration::from_secs(60), || admitted("hold"))
        .await
        .expect("hold admitted");
    poll(Duration::from_secs(60), || admitted("hold-strict"))
        .await
        .expect("hold-strict admitted");
    second().await;
    // `big` can never fit (2 cpu of 1): parked as inadmissible, still listed in order.
    workload(&client, &ns, "big", "lq", "2", 0).await;
    workload(&client, &ns, "s-old", "strict", "500m", 0).await;
    second().await;
    workload(&client, &ns, "a1", "lq", "500m", 0).await;
    workload(&client, &ns, "s-new", "strict", "500m", 0).await;
    second().await;
    workload(&client, &ns, "b1", "lq2", "500m", 0).await;
    workload(&client, &ns, "s-high", "strict", "500m", 50).await;
    second().await;
    workload(&client, &ns, "a2", "lq", "500m", 0).await;
    workload(&client, &ns, "hi", "lq2", "500m", 100).await;

    let cq_path = format!("{GROUP}/v1beta2/clusterqueues/{}/pendingworkloads", fx.cq);
    let all = poll(Duration::from_secs(60), || async {
        let (code, body) = get_raw(&client, &cq_path).await;
        (code == 200 && rows(&body).len() == 5).then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("{cq_path} never listed the 5 pending workloads"));
    assert_eq!(all["kind"], "PendingWorkloadsSummary");
    assert_eq!(all["apiVersion"], "visibility.kueue.x-k8s.io/v1beta2");
    assert_eq!(
        rows(&all),
        vec![
            row("hi", "lq2", 0, 0),
            row("big", "lq", 1, 0),
            row("a1", "lq", 2, 1),
            row("b1", "lq2", 3, 1),
            row("a2", "lq", 4, 2),
        ]
    );
    assert_eq!(all["items"][0]["priority"], 100);
    assert_eq!(all["items"][0]["metadata"]["namespace"], ns.as_str());
    assert!(
        all["items"][0]["metadata"]["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    // kuota's group: the same page, each item with its start estimate from a forecast made
    // after all five were queued. `hi` starts when `hold` reaches its bound; `big` never.
    let kuota_path = format!("{KUOTA_GROUP}/clusterqueues/{}/pendingworkloads", fx.cq);
    let estimated = poll(Duration::from_secs(60), || async {
        let (code, body) = get_raw(&client, &kuota_path).await;
        let forecast_all = body["items"].as_array().is_some_and(|items| {
            items.iter().all(|i| {
                i["startEstimate"].get("unknown").is_none_or(|u| {
                    u != "queued after the last forecast" && u != "no forecast has finished yet"
                })
            })
        });
        (code == 200 && forecast_all).then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("{kuota_path} never had a forecast of every item"));
    assert_eq!(estimated["apiVersion"], "visibility.kuota.dev/v1alpha1");
    assert_eq!(rows(&estimated), rows(&all), "{estimated}");
    let hi = &estimated["items"][0]["startEstimate"];
    assert_eq!(hi["source"], "job-bound", "{estimated}");
    let wait = hi["waitSeconds"].as_i64().unwrap_or(-1);
    assert!((3500..=3600).contains(&wait), "{estimated}");
    assert_eq!(
        estimated["items"][1]["startEstimate"],
        json!({"unknown": "not admissible as things stand"}),
        "{estimated}"
    );
    assert!(estimated["forecastTime"].is_string(), "{estimated}");

    // limit and offset.
    let (code, page) = get_raw(&client, &format!("{cq_path}?limit=2&offset=1")).await;
    assert_eq!(code, 200, "{page}");
    assert_eq!(
        rows(&page),
        vec![row("big", "lq", 1, 0), row("a1", "lq", 2, 1)]
    );
    let (_, none) = get_raw(&client, &format!("{cq_path}?limit=-1")).await;
    assert_eq!(rows(&none), vec![]);
    let (_, past) = get_raw(&client, &format!("{cq_path}?offset=-3&limit=1")).await;
    assert_eq!(rows(&past), vec![row("hi", "lq2", 0, 0)]);
    let (code, bad) = get_raw(&client, &format!("{cq_path}?limit=ten")).await;
    assert_eq!(
        (code, bad["reason"].as_str()),
        (400, Some("BadRequest")),
        "{bad}"
    );
    assert_eq!(
        bad["message"],
        "strconv.ParseInt: parsing \"ten\": invalid syntax"
    );

    // A LocalQueue's page: its own positions, the ClusterQueue's beside them; v1beta1 too.
    let lq_path = |version: &str, lq: &str| {
        format!("{GROUP}/{version}/namespaces/{ns}/localqueues/{lq}/pendingworkloads")
    };
    let (code, lq) = get_raw(&client, &format!("{}?offset=1", lq_path("v1beta1", "lq"))).await;
    assert_eq!(code, 200, "{lq}");
    assert_eq!(lq["apiVersion"], "visibility.kueue.x-k8s.io/v1beta1");
    assert_eq!(
        rows(&lq),
        vec![row("a1", "lq", 2, 1), row("a2", "lq", 4, 2)]
    );

    // StrictFIFO: the same order rules (priority, then creation).
    let (code, strict_page) = get_raw(
        &client,
        &format!("{GROUP}/v1beta2/clusterqueues/{strict}/pendingworkloads"),
    )
    .await;
    assert_eq!(code, 200, "{strict_page}");
    assert_eq!(
        rows(&strict_page),
        vec![
            row("s-high", "strict", 0, 0),
            row("s-old", "strict", 1, 1),
            row("s-new", "strict", 2, 2),
        ]
    );

    // Missing queues: Kueue's 404s.
    let (code, missing) = get_raw(
        &client,
        &format!("{GROUP}/v1beta2/clusterqueues/no-such-cq/pendingworkloads"),
    )
    .await;
    assert_eq!(code, 404, "{missing}");
    assert_eq!(
        missing["message"],
        "clusterqueue.visibility.kueue.x-k8s.io \"no-such-cq\" not found"
    );
    let (code, missing) = get_raw(&client, &lq_path("v1beta2", "no-such-lq")).await;
    assert_eq!(code, 404, "{missing}");
    assert_eq!(
        missing["message"],
        "localqueue.visibility.kueue.x-k8s.io \"no-such-lq\" not found"
    );

    // A namespace user with Kueue's LocalQueue viewer role bound in their namespace only.
    let reader = "queue-reader";
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": reader, "namespace": ns}})).unwrap();
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("ServiceAccount");
    let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "pending-reader", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kueue-pending-workloads-lq-viewer-role"},
        "subjects": [{"kind": "ServiceAccount", "name": reader, "namespace": ns}]
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await
        .expect("RoleBinding");
    let (user, _) = crate::rbac::service_account_client(&ns, reader).await;
    let own = poll(Duration::from_secs(20), || async {
        let (code, body) = get_raw(&user, &lq_path("v1beta2", "lq2")).await;
        (code == 200).then_some(body)
    })
    .await
    .expect("the namespace user reads their own LocalQueue");
    assert_eq!(
        rows(&own),
        vec![row("hi", "lq2", 0, 0), row("b1", "lq2", 3, 1)]
    );
    let (code, denied) = get_raw(&user, &cq_path).await;
    assert_eq!(
        (code, denied["reason"].as_str()),
        (403, Some("Forbidden")),
        "{denied}"
    );
    let who = format!("system:serviceaccount:{ns}:{reader}");
    assert_eq!(
        denied["message"],
        format!(
            "clusterqueues.visibility.kueue.x-k8s.io \"{}\" is forbidden: User \"{who}\" cannot get \
             resource \"clusterqueues/pendingworkloads\" in API group \"visibility.kueue.x-k8s.io\" \
             at the cluster scope",
            fx.cq
        )
    );
    let elsewhere = format!("{GROUP}/v1beta2/namespaces/default/localqueues/lq/pendingworkloads");
    let (code, denied) = get_raw(&user, &elsewhere).await;
    assert_eq!(code, 403, "{denied}");

    // `kuota pending` and `kubectl kuota pending` (the binary as kubectl's plugin), with the
    // user's kubeconfig.
    let (code, out, err) = kuota_cli(&["pending", "--cluster-queue", &fx.cq, "-o", "json"], None);
    assert_eq!(code, Some(0), "{err}");
    let json: Value = serde_json::from_str(&out).expect("-o json prints the summary");
    assert_eq!(rows(&json), rows(&all));
    let (code, out, err) = kuota_cli(
        &["pending", "--cluster-queue", &fx.cq, "--limit", "2"],
        None,
    );
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "POSITION",
            "NAMESPACE",
            "NAME",
            "PRIORITY",
            "AGE",
            "ESTIMATE",
            "REASON"
        ],
        "{out}"
    );
    let first: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(first[..4], ["0", ns.as_str(), "hi", "100"], "{out}");
    // The estimate (`in 59m`, as `hold` may run an hour), then the Workloads'
    // QuotaReserved=False reasons.
    assert_eq!(first[5], "in", "{out}");
    assert!(first[6].ends_with('m'), "{out}");
    assert_eq!(first[7], "WaitingForQuota", "{out}");
    let second: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        (second[2], second[5], second[6]),
        ("big", "<unknown>", "ExceedsMaxQuota"),
        "{out}"
    );
    assert_eq!(lines.len(), 3, "{out}");
    let (code, out, err) = kuota_cli(&["pending", "--cluster-queue", "no-such-cq"], None);
    assert_ne!(code, Some(0), "{out}");
    assert!(
        err.contains("ClusterQueue \"no-such-cq\"") && err.contains("not found"),
        "{err}"
    );
    // `kuota explain`: one workload's state, positions and what holds it back.
    let target = format!("{ns}/b1");
    let (code, out, err) = kuota_cli(&["explain", &target], None);
    assert_eq!(code, Some(0), "{err}");
    let line = |label: &str| {
        out.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(line("Workload:"), format!("Workload:  {target}"), "{out}");
    assert_eq!(line("State:"), "State:     Pending", "{out}");
    assert_eq!(
        line("Queue:"),
        format!("Queue:     LocalQueue {ns}/lq2 -> ClusterQueue {}", fx.cq),
        "{out}"
    );
    assert_eq!(
        line("Position:"),
        "Position:  1 in its LocalQueue, 3 in its ClusterQueue (0 is next)",
        "{out}"
    );
    assert!(
        line("Why:").starts_with("Why:       WaitingForQuota: ") && line("Why:").contains("cpu"),
        "{out}"
    );
    assert!(line("Sooner:").contains(&fx.cq), "{out}");
    // b1 waits behind `hi` and `a1`, which nothing bounds: kuota says so rather than guess.
    assert_eq!(
        line("Estimate:"),
        "Estimate:  unknown: no runtime knowledge",
        "{out}"
    );
    let (code, out, err) = kuota_cli(&["explain", &target, "-o", "json"], None);
    assert_eq!(code, Some(0), "{err}");
    let json: Value = serde_json::from_str(&out).expect("-o json prints the explanation");
    assert_eq!(
        (
            &json["positionInLocalQueue"],
            &json["positionInClusterQueue"]
        ),
        (&json!(1), &json!(3)),
        "{out}"
    );
    // Nothing of that name: one line naming it, and a failure.
    let missing = format!("{ns}/no-such-job");
    let (code, out, err) = kuota_cli(&["explain", &missing], None);
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&missing) && err.contains("no Workload of that name"),
        "{err}"
    );
    // A job that exists but names no LocalQueue is not kuota's: the same one line.
    let mut plain = crate::controller::job(&ns, "plain", "100m");
    plain.metadata.labels = None;
    Api::<k8s_openapi::api::batch::v1::Job>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &plain)
        .await
        .expect("create Job plain");
    let unmanaged = format!("{ns}/plain");
    let (code, out, err) = kuota_cli(&["explain", &unmanaged], None);
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&unmanaged) && err.contains("kueue.x-k8s.io/queue-name"),
        "{err}"
    );
    let reader_config = std::env::temp_dir().join(unique_name("vis-reader"));
    crate::rbac::write_kubeconfig(&ns, reader, &reader_config).await;
    let lq2 = format!("{ns}/lq2");
    let (code, out, err) = kubectl_kuota(
        &["pending", "--local-queue", &lq2, "-o", "wide"],
        &reader_config,
    );
    assert_eq!(code, Some(0), "{err}");
    let names: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(names, ["hi", "b1"], "{out}");
    let (code, _, err) = kubectl_kuota(&["pending", "--cluster-queue", &fx.cq], &reader_config);
    assert_ne!(code, Some(0));
    assert!(err.contains("forbidden") && err.contains(&fx.cq), "{err}");
    // A user who may not read the namespace's Workloads is told so, naming the target.
    let (code, _, err) = kubectl_kuota(&["explain", &target], &reader_config);
    assert_ne!(code, Some(0));
    assert!(err.contains(&target) && err.contains("forbidden"), "{err}");
    let _ = std::fs::remove_file(&reader_config);

    // Straight at kuota, without the API server's front-proxy certificate: refused, whatever
    // the headers claim; with a certificate from another CA, the handshake fails.
    assert_eq!(curl_direct(port, &ca_file, &[]), 401);
    let other = std::env::temp_dir().join(unique_name("vis-other"));
    write_serving_certs(&other, "front-proxy-client");
    let cert = other.join("tls.crt");
    let key = other.join("tls.key");
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
    assert_eq!(
        curl_direct(port, &ca_file, &["--cert", &cert, "--key", &key]),
        0,
        "a client certificate the request-header CA did not sign is refused"
    );

    aggregated.remove().await;
    server.stop();
    let _ = stop.send(());
    let _ = controller.await;
    crate::rbac::assert_permitted(
        "kuota's visibility server (ServiceAccount kuota-controller)",
        &record,
    );
    let _ = Api::<kuota::api::ClusterQueue>::all(client.clone())
        .delete(&strict, &Default::default())
        .await;
    fx.teardown().await;
    let _ = std::fs::remove_dir_all(&certs);
    let _ = std::fs::remove_dir_all(&other);
}
