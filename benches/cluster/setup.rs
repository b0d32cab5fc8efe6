//! The benchmark's cluster objects: Kueue's baseline shape (5 cohorts x 6 ClusterQueues,
//! 20 cpu nominal, borrowing limit 100) and its small/medium/large mix (mix.rs builds the
//! objects).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Label on a Job's pods: the class's runtime, read by the stand-in kubelet.
pub const RUNTIME_LABEL: &str = "bench.kuota.dev/runtime-ms";
/// Label on every Job the benchmark creates (and on its namespaces).
pub const BENCH_LABEL: &str = "bench.kuota.dev/run";

pub const COHORTS: usize = 5;
pub const QUEUES_PER_COHORT: usize = 6;

/// One workload class of Kueue's baseline.
#[derive(Clone, Copy, Debug)]
pub struct Class {
    pub name: &'static str,
    /// Share of the Jobs per ClusterQueue (350 : 100 : 50 in Kueue's baseline).
    pub share: usize,
    pub runtime_ms: u64,
    pub priority: i32,
    pub cpu: u32,
}

pub const CLASSES: [Class; 3] = [
    Class {
        name: "small",
        share: 350,
        runtime_ms: 200,
        priority: 50,
        cpu: 1,
    },
    Class {
        name: "medium",
        share: 100,
        runtime_ms: 500,
        priority: 100,
        cpu: 5,
    },
    Class {
        name: "large",
        share: 50,
        runtime_ms: 1000,
        priority: 200,
        cpu: 20,
    },
];

/// The namespace of ClusterQueue `cq` (one LocalQueue `lq` in each).
pub fn namespace(run: &str, cq: usize) -> String {
    format!("{run}-q{cq}")
}

/// The Jobs of the run, in creation order: classes interleaved across queues like
/// Kueue's generator (which creates each class at its own interval).
pub fn plan(total: usize) -> Vec<(usize, Class)> {
    let queues = COHORTS * QUEUES_PER_COHORT;
    let per_queue = total.div_ceil(queues);
    let all: usize = CLASSES.iter().map(|c| c.share).sum();
    let mut per_class: Vec<(Class, usize)> = CLASSES
        .iter()
        .map(|c| (*c, (per_queue * c.share).div_ceil(all)))
        .collect();
    let mut out = Vec::new();
    while out.len() < total && per_class.iter().any(|(_, n)| *n > 0) {
        for (class, left) in &mut per_class {
            // Small jobs arrive 3.5x as often as medium and 7x as often as large.
            for _ in 0..(class.share / 50).max(1) {
                if *left == 0 {
                    break;
                }
                *left -= 1;
                for q in 0..queues {
                    out.push((q, *class));
                }
            }
        }
    }
    out.truncate(total);
    out
}

/// Installs the kueue.x-k8s.io CRDs kuota serves and the measured kind's (`extra`)
/// (server-side apply), and waits for them.
pub async fn crds(
    client: &Client,
    extra: Option<CustomResourceDefinition>,
) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("kuota-bench").force();
    // Every kind kuota watches: the controller schedules only once each has listed.
    let all = kuota::crds::all(None).map_err(|e| kube::Error::Service(Box::new(e)))?;
    for crd in all.into_iter().chain(extra) {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &pp, &Patch::Apply(&crd)).await?;
        for _ in 0..300 {
            let established = crds
                .get(&name)
                .await?
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Applies an object of any kind by its group/version/kind and name.
async fn apply(client: &Client, obj: serde_json::Value) -> Result<(), kube::Error> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = obj["metadata"]["namespace"].as_str().map(String::from);
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
    let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<kube::core::DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let pp = PatchParams::apply("kuota-bench").force();
    api.patch(&name, &pp, &Patch::Apply(&obj)).await?;
    Ok(())
}

/// Creates a namespace of the run (each phase's Jobs get one of their own).
pub async fn create_namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("valid Namespace");
    Api::<Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// The baseline's queues: one flavor, the classes' PriorityClasses, and 5 cohorts x 6
/// ClusterQueues with a Namespace and a LocalQueue each. `nominal_cpu` is each
/// ClusterQueue's nominal quota (20 in Kueue's baseline; far more makes admission, not
/// quota, the limit). The same objects make the simulator's scenario (calibrate.rs).
pub fn queue_objects(run: &str, nominal_cpu: u32) -> Vec<serde_json::Value> {
    let mut out = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": format!("{run}-default")}, "spec": {}}),
    ];
    for c in CLASSES {
        out.push(
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": format!("{run}-{}", c.name)}, "value": c.priority}),
        );
    }
    for cq in 0..COHORTS * QUEUES_PER_COHORT {
        let cohort = format!("{run}-cohort-{}", cq / QUEUES_PER_COHORT);
        let ns = namespace(run, cq);
        out.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {BENCH_LABEL: run}}}));
        out.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": format!("{run}-cq-{cq}")},
            "spec": {
                "cohortName": cohort,
                "namespaceSelector": {},
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{
                    "name": format!("{run}-default"),
                    "resources": [{"name": "cpu", "nominalQuota": nominal_cpu.to_string(),
                        "borrowingLimit": "100"}]}]}]
            }}),
        );
        out.push(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": ns},
            "spec": {"clusterQueue": format!("{run}-cq-{cq}")}}),
        );
    }
    out
}

/// Applies [`queue_objects`] (server-side apply).
pub async fn queues(client: &Client, run: &str, nominal_cpu: u32) -> Result<(), kube::Error> {
    for obj in queue_objects(run, nominal_cpu) {
        apply(client, obj).await?;
    }
    Ok(())
}
