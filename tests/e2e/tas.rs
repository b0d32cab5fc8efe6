//! Topology-aware scheduling in a real cluster: a gang admitted into one rack of labelled
//! Node objects, its Job started with Kueue's topology gate, its Pods ungated one by one
//! onto the nodes of the assignment, and an unmanaged Pod bound to a node taking room
//! that a later gang cannot get.
//!
//! There is no kubelet: the test creates the Nodes, keeps their Ready heartbeat fresh
//! (so the node lifecycle controller does not taint them unreachable), and binds the
//! unmanaged Pod itself with `spec.nodeName`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ClusterQueue, LocalQueue, ResourceFlavor, Topology, Workload};
use serde_json::{Value, json};

use crate::controller::{condition, start_controller, wait_for_workload};
use crate::support::{client, controller_lock, ensure_crds, unique_name, wait_until};
use crate::webhook::{create_namespace, delete_namespaces};

const RACK: &str = "kuota.dev/e2e-rack";
const POOL: &str = "kuota.dev/e2e-pool";
const HOST: &str = "kubernetes.io/hostname";
const GATE: &str = "kueue.x-k8s.io/topology";
const INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The cluster-wide objects of one test, deleted at the end.
struct Cluster {
    nodes: Vec<(String, String)>,
    topology: String,
    flavor: String,
    queue: String,
}

/// Two racks of two nodes, each node with 1 cpu, in a pool of their own; a Topology
/// (rack > host), a TAS flavor over the pool, a ClusterQueue with ample quota and
/// LocalQueue `lq` in `ns`. Node names are returned with their rack.
async fn two_racks(client: &Client, ns: &str) -> Cluster {
    let pool = unique_name("pool");
    let pp = PostParams::default();
    let mut nodes = Vec::new();
    for rack in ["r1", "r2"] {
        for host in ["a", "b"] {
            let name = format!("{pool}-{rack}{host}");
            let rack = format!("{pool}-{rack}");
            let node: Node = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {POOL: pool, RACK: rack, HOST: name}},
                "status": {
                    "allocatable": {"cpu": "1", "pods": "110"},
                    "capacity": {"cpu": "1", "pods": "110"},
                    "conditions": [ready_now()]
                }
            }))
            .expect("node");
            Api::<Node>::all(client.clone())
                .create(&pp, &node)
                .await
                .unwrap_or_else(|e| panic!("create Node {name}: {e}"));
            nodes.push((name, rack));
        }
    }
    let (topology, flavor, queue) = (unique_name("topo"), unique_name("tas"), unique_name("cq"));
    let topo: Topology = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": topology},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]}
    }))
    .expect("topology");
    let rf: ResourceFlavor = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": flavor},
        "spec": {"nodeLabels": {POOL: pool}, "topologyName": topology}
    }))
    .expect("flavor");
    let cq: ClusterQueue = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": queue},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "16"}]}]}]
        }
    }))
    .expect("cluster queue");
    let lq: LocalQueue = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": ns},
        "spec": {"clusterQueue": queue}
    }))
    .expect("local queue");
    Api::<Topology>::all(client.clone())
        .create(&pp, &topo)
        .await
        .expect("create Topology");
    Api::<ResourceFlavor>::all(client.clone())
        .create(&pp, &rf)
        .await
        .expect("create ResourceFlavor");
    Api::<ClusterQueue>::all(client.clone())
        .create(&pp, &cq)
        .await
        .expect("create ClusterQueue");
    Api::<LocalQueue>::namespaced(client.clone(), ns)
        .create(&pp, &lq)
        .await
        .expect("create LocalQueue");
    Cluster {
        nodes,
        topology,
        flavor,
        queue,
    }
}

fn ready_now() -> Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
           "lastHeartbeatTime": now, "lastTransitionTime": now})
}

/// Plays the kubelet's heartbeat for `nodes` until the task is aborted.
fn heartbeat(client: &Client, nodes: Vec<String>) -> tokio::task::JoinHandle<()> {
    let api = Api::<Node>::all(client.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(10)).await;
            for n in &nodes {
                let body = json!({"status": {"conditions": [ready_now()]}});
                let _ = api
                    .patch_status(n, &PatchParams::default(), &Patch::Strategic(body))
                    .await;
            }
        }
    })
}

/// A suspended Indexed Job of `pods` pods of 500m cpu, all required in one rack.
fn gang(ns: &str, name: &str, pods: i32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name,
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": true, "parallelism": pods, "completions": pods,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "500m"}}}]}
            }
        }
    }))
    .expect("job")
}

/// Pods per host of the Workload's (single) topology assignment, and the levels it names.
fn assigned_hosts(wl: &Workload) -> (Vec<String>, BTreeMap<String, i32>) {
    let psa = wl
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|a| a.pod_set_assignments[0].clone())
        .expect("an admission");
    let ta = psa.topology_assignment.expect("a topologyAssignment");
    let host_level = ta
        .levels
        .iter()
        .position(|l| l == HOST)
        .expect("the assignment names hosts");
    let mut hosts = BTreeMap::new();
    for slice in &ta.slices {
        for (values, count) in slice.domains().expect("a well-formed assignment") {
            *hosts.entry(values[host_level].clone()).or_default() += count;
        }
    }
    (ta.levels.clone(), hosts)
}

fn rack_of(cluster: &Cluster, host: &str) -> String {
    cluster
        .nodes
        .iter()
        .find(|(n, _)| n == host)
        .map(|(_, r)| r.clone())
        .unwrap_or_else(|| panic!("{host} is none of the test's nodes"))
}

/// Waits until every Pod of Job `job` is ungated with a host selector, then returns the
/// pods per host, checking each selector names its node's rack when the assignment
/// includes the rack level.
async fn ungated_hosts(
    client: &Client,
    ns: &str,
    job: &str,
    cluster: &Cluster,
    pods: usize,
) -> BTreeMap<String, i32> {
    let api = Api::<Pod>::namespaced(client.clone(), ns);
    let mut last = Vec::new();
    for _ in 0..600 {
        last = api
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let done = last.len() == pods
            && last.iter().all(|p| {
                let spec = p.spec.as_ref();
                let gated = spec
                    .and_then(|s| s.scheduling_gates.as_ref())
                    .is_some_and(|g| g.iter().any(|g| g.name == GATE));
                !gated
                    && spec
                        .and_then(|s| s.node_selector.as_ref())
                        .is_some_and(|s| s.contains_key(HOST))
            });
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut hosts = BTreeMap::new();
    for p in &last {
        let spec = p.spec.as_ref().expect("spec");
        let selector = spec.node_selector.clone().unwrap_or_default();
        let gated = spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| g.iter().any(|g| g.name == GATE));
        assert!(!gated, "Pod {:?} is still gated", p.metadata.name);
        let host = selector.get(HOST).unwrap_or_else(|| {
            panic!(
                "Pod {:?} has no host selector: {selector:?}",
                p.metadata.name
            )
        });
        if let Some(rack) = selector.get(RACK) {
            assert_eq!(rack, &rack_of(cluster, host), "{selector:?}");
        }
        // The flavor's own label stays: ungating adds to the Job's selector.
        assert!(selector.contains_key(POOL), "{selector:?}");
        *hosts.entry(host.clone()).or_default() += 1;
    }
    assert_eq!(last.len(), pods, "Pods of Job {job}");
    hosts
}

#[tokio::test]
async fn a_tas_gang_is_gated_ungated_onto_its_hosts_and_unmanaged_pods_take_room() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let ns = unique_name("tas");
    create_namespace(&client, &ns, &[]).await;
    let cluster = two_racks(&client, &ns).await;
    let beat = heartbeat(
        &client,
        cluster.nodes.iter().map(|(n, _)| n.clone()).collect(),
    );

    // An unmanaged Pod already bound to rack 2's first node takes 600m of its 1 cpu:
    // rack 2 can then hold only two 500m pods, not a gang of four.
    let (busy_node, busy_rack) = cluster.nodes[2].clone();
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let web: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"nodeName": busy_node, "containers": [{"name": "web", "image": "nginx",
            "resources": {"requests": {"cpu": "600m"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &web)
        .await
        .expect("create Pod web");

    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &gang(&ns, "gang", 4))
        .await
        .expect("create Job gang");

    // Admitted into one rack, two pods per node (each node holds two 500m pods).
    let wl = wait_for_workload(&client, &ns, "gang", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (levels, assigned) = assigned_hosts(&wl);
    assert_eq!(assigned.values().sum::<i32>(), 4, "{levels:?} {assigned:?}");
    let racks: std::collections::BTreeSet<String> =
        assigned.keys().map(|h| rack_of(&cluster, h)).collect();
    assert_eq!(racks.len(), 1, "required rack: {assigned:?}");
    assert!(
        !racks.contains(&busy_rack),
        "rack {busy_rack} has room for two pods only: {assigned:?}"
    );

    // Started with Kueue's gate, PodSet label and Workload annotation on its template.
    let wl_name = wl.metadata.name.clone().expect("named");
    assert_started_with_topology_gate(&jobs, "gang", &wl_name).await;

    // kube-controller-manager makes four gated Pods; kuota ungates each onto the host
    // the assignment gives it, as many per host as assigned.
    let hosts = ungated_hosts(&client, &ns, "gang", &cluster, 4).await;
    assert_eq!(hosts, assigned, "pods per host against the assignment");
    // Rank order: completion indexes 0 and 1 share a host, as do 2 and 3.
    let by_index = host_by_completion_index(&pods, "gang").await;
    assert_eq!(by_index["0"], by_index["1"], "{by_index:?}");
    assert_eq!(by_index["2"], by_index["3"], "{by_index:?}");

    // A second gang of four fits no rack: rack 1 is full, and the unmanaged Pod leaves
    // rack 2 room for two.
    jobs.create(&PostParams::default(), &gang(&ns, "second", 4))
        .await
        .expect("create Job second");
    let pending = wait_for_workload(&client, &ns, "second", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = condition(&pending, "QuotaReserved").expect("condition");
    // Without the unmanaged Pod's 600m, rack 2 would take all four.
    assert!(
        message.contains("allows to fit only 2 out of 4 pod(s)"),
        "{reason}: {message}"
    );
    // The unmanaged Pod finishes: rack 2 is free, and the second gang goes there.
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("mark Pod web Succeeded");
    let second = wait_for_workload(&client, &ns, "second", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, assigned) = assigned_hosts(&second);
    let racks: Vec<String> = assigned.keys().map(|h| rack_of(&cluster, h)).collect();
    assert!(racks.iter().all(|r| r == &busy_rack), "{assigned:?}");
    assert_eq!(
        ungated_hosts(&client, &ns, "second", &cluster, 4).await,
        assigned
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    beat.abort();
    delete_cluster(&client, &ns, &cluster).await;
}

#[tokio::test]
async fn a_tas_gang_with_its_own_node_selector_goes_only_to_the_hosts_it_selects() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let ns = unique_name("tassel");
    create_namespace(&client, &ns, &[]).await;
    let cluster = two_racks(&client, &ns).await;
    let beat = heartbeat(
        &client,
        cluster.nodes.iter().map(|(n, _)| n.clone()).collect(),
    );
    // Rack 2's nodes get a label the flavor does not name; rack 1 comes first in
    // topology order, so without the pod's selector the gang would go there.
    const DISK: &str = "kuota.dev/e2e-disk";
    let ssd_rack = cluster.nodes[2].1.clone();
    for (node, rack) in &cluster.nodes {
        if rack == &ssd_rack {
            Api::<Node>::all(client.clone())
                .patch(
                    node,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {DISK: "ssd"}}})),
                )
                .await
                .unwrap_or_else(|e| panic!("label Node {node}: {e}"));
        }
    }
    let on_ssd = |name: &str, pods: i32| {
        let mut job = gang(&ns, name, pods);
        let spec = job.spec.as_mut().and_then(|s| s.template.spec.as_mut());
        spec.expect("pod spec").node_selector = Some(BTreeMap::from([(DISK.into(), "ssd".into())]));
        job
    };
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    jobs.create(&PostParams::default(), &on_ssd("ssd", 2))
        .await
        .expect("create Job ssd");
    let wl = wait_for_workload(&client, &ns, "ssd", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, assigned) = assigned_hosts(&wl);
    assert_eq!(assigned.values().sum::<i32>(), 2, "{assigned:?}");
    assert!(
        assigned.keys().all(|h| rack_of(&cluster, h) == ssd_rack),
        "only rack {ssd_rack} has ssd nodes: {assigned:?}"
    );
    // Each pod is ungated onto its host and keeps its own selector next to the host's.
    assert_eq!(
        ungated_hosts(&client, &ns, "ssd", &cluster, 2).await,
        assigned
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    for p in pods
        .list(&ListParams::default().labels("job-name=ssd"))
        .await
        .expect("list pods")
        .items
    {
        let selector = p.spec.unwrap_or_default().node_selector.unwrap_or_default();
        assert_eq!(
            selector.get(DISK).map(String::as_str),
            Some("ssd"),
            "{selector:?}"
        );
    }

    // Three more ssd pods do not fit: rack 2 has room for two, and rack 1, though
    // empty, is not selected. The message says the selector is why.
    jobs.create(&PostParams::default(), &on_ssd("more", 3))
        .await
        .expect("create Job more");
    let pending = wait_for_workload(&client, &ns, "more", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, reason, message) = condition(&pending, "QuotaReserved").expect("condition");
    assert!(
        message.contains("allows to fit only 2 out of 3 pod(s)")
            && message.contains("the pod set's nodeSelector excludes 2"),
        "{reason}: {message}"
    );

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    beat.abort();
    delete_cluster(&client, &ns, &cluster).await;
}

/// Waits until Job `job` runs with the topology gate, Kueue's PodSet label and the
/// Workload annotation on its pod template.
async fn assert_started_with_topology_gate(jobs: &Api<Job>, job: &str, wl_name: &str) {
    let started = wait_until(Duration::from_secs(30), || {
        let jobs = jobs.clone();
        async move {
            jobs.get(job).await.ok().is_some_and(|j| {
                let spec = j.spec.unwrap_or_default();
                let meta = spec.template.metadata.unwrap_or_default();
                let gates = spec
                    .template
                    .spec
                    .and_then(|s| s.scheduling_gates)
                    .unwrap_or_default();
                let labels = meta.labels.unwrap_or_default();
                let annotations = meta.annotations.unwrap_or_default();
                spec.suspend == Some(false)
                    && gates.iter().any(|g| g.name == GATE)
                    && labels.get("kueue.x-k8s.io/podset").map(String::as_str) == Some("main")
                    && annotations
                        .get("kueue.x-k8s.io/workload")
                        .map(String::as_str)
                        == Some(wl_name)
            })
        }
    })
    .await;
    assert!(
        started.is_some(),
        "Job {job} was not started with the topology gate"
    );
}

/// The host each Pod of Job `job` was given, by completion index.
async fn host_by_completion_index(pods: &Api<Pod>, job: &str) -> BTreeMap<String, String> {
    pods.list(&ListParams::default().labels(&format!("job-name={job}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| {
            let index = p.metadata.labels.unwrap_or_default()[INDEX].clone();
            let selector = p.spec.unwrap_or_default().node_selector.unwrap_or_default();
            (index, selector[HOST].clone())
        })
        .collect()
}

/// Deletes the test's namespace and cluster-wide objects.
async fn delete_cluster(client: &Client, ns: &str, cluster: &Cluster) {
    delete_namespaces(client, &[ns]).await;
    let _ = Api::<ClusterQueue>::all(client.clone())
        .delete(&cluster.queue, &Default::default())
        .await;
    let _ = Api::<ResourceFlavor>::all(client.clone())
        .delete(&cluster.flavor, &Default::default())
        .await;
    let _ = Api::<Topology>::all(client.clone())
        .delete(&cluster.topology, &Default::default())
        .await;
    for (n, _) in &cluster.nodes {
        let _ = Api::<Node>::all(client.clone())
            .delete(n, &Default::default())
            .await;
    }
}

/// A suspended one-pod Job of 1 cpu (a whole test node) pinned to `host`, in priority
/// class `class`.
fn pinned(ns: &str, name: &str, host: &str, class: &str) -> Job {
    let mut j = gang(ns, name, 1);
    j.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kueue.x-k8s.io/priority-class".into(), class.into());
    let pod = j
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("pod spec");
    pod.node_selector = Some(BTreeMap::from([(HOST.to_string(), host.to_string())]));
    pod.containers[0].resources = serde_json::from_value(json!({"requests": {"cpu": "1"}})).ok();
    j
}

/// Whether the Workload of Job `job` carries `Evicted=True` with reason `Preempted`.
async fn preempted(client: &Client, ns: &str, job: &str) -> bool {
    let wls = Api::<Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    wls.iter()
        .filter(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == job)
        })
        .any(|w| condition(w, "Evicted").is_some_and(|c| c.0 == "True" && c.1 == "Preempted"))
}

/// A gang that needs a whole rack preempts the workloads of one rack only: the two
/// lowest-priority workloads, one per rack, would free the quota more cheaply, but
/// scattered they place nothing.
#[tokio::test]
async fn a_gang_needing_a_rack_preempts_within_one_rack_only() {
    let _only = controller_lock().await;
    let client = client().await;
    ensure_crds(&client).await;
    let ns = unique_name("tas-preempt");
    create_namespace(&client, &ns, &[]).await;
    let cluster = two_racks(&client, &ns).await;
    let beat = heartbeat(
        &client,
        cluster.nodes.iter().map(|(n, _)| n.clone()).collect(),
    );
    // Quota as large as the four nodes, and priority preemption inside the queue.
    let spec = json!({"spec": {
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": cluster.flavor, "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]
    }});
    Api::<ClusterQueue>::all(client.clone())
        .patch(&cluster.queue, &PatchParams::default(), &Patch::Merge(spec))
        .await
        .expect("patch ClusterQueue");
    let classes = Api::<kuota::api::WorkloadPriorityClass>::all(client.clone());
    let (low, mid, high) = (unique_name("low"), unique_name("mid"), unique_name("high"));
    for (name, value) in [(&low, 10), (&mid, 100), (&high, 1000)] {
        classes
            .create(
                &PostParams::default(),
                &kuota::api::WorkloadPriorityClass::new(name, value),
            )
            .await
            .unwrap_or_else(|e| panic!("create WorkloadPriorityClass {name}: {e}"));
    }
    // Each node runs one workload: per rack, one of low and one of mid priority.
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let mut running = Vec::new();
    for (i, (host, rack)) in cluster.nodes.iter().enumerate() {
        let (name, class) = if i % 2 == 0 {
            (format!("low-{i}"), &low)
        } else {
            (format!("mid-{i}"), &mid)
        };
        jobs.create(&PostParams::default(), &pinned(&ns, &name, host, class))
            .await
            .unwrap_or_else(|e| panic!("create Job {name}: {e}"));
        running.push((name, rack.clone()));
    }
    for (name, _) in &running {
        wait_for_workload(&client, &ns, name, "admitted", |wl| {
            condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
        })
        .await;
    }
    let mut rack_gang = gang(&ns, "rack-gang", 2);
    rack_gang
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kueue.x-k8s.io/priority-class".into(), high.clone());
    rack_gang
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("pod spec")
        .containers[0]
        .resources = serde_json::from_value(json!({"requests": {"cpu": "1"}})).ok();
    jobs.create(&PostParams::default(), &rack_gang)
        .await
        .expect("create Job rack-gang");

    // Two victims, both in one rack.
    let mut victims = Vec::new();
    for _ in 0..600 {
        victims.clear();
        for (name, rack) in &running {
            if preempted(&client, &ns, name).await {
                victims.push((name.clone(), rack.clone()));
            }
        }
        if victims.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        victims.len() >= 2,
        "the gang preempted fewer than two workloads: {victims:?}"
    );
    let rack = victims[0].1.clone();
    assert!(
        victims.len() == 2 && victims.iter().all(|(_, r)| r == &rack),
        "victims from more than one rack: {victims:?}"
    );
    // The victims' Pods go (the test plays the kubelet); the gang lands in their rack.
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    for (name, _) in &victims {
        crate::preemption::wait_pods_gone(&pods, name).await;
    }
    let wl = wait_for_workload(&client, &ns, "rack-gang", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let (_, assigned) = assigned_hosts(&wl);
    assert!(
        assigned.keys().all(|h| rack_of(&cluster, h) == rack),
        "the gang is not in the rack its victims freed ({rack}): {assigned:?}"
    );
    // The other rack was never touched.
    for (name, r) in running.iter().filter(|(_, r)| r != &rack) {
        assert!(
            !preempted(&client, &ns, name).await,
            "{name} in rack {r} was preempted"
        );
        let (suspend, _, _) = crate::preemption::job_state(&jobs, name).await;
        assert_eq!(suspend, Some(false), "{name} in rack {r} was suspended");
    }

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    beat.abort();
    delete_cluster(&client, &ns, &cluster).await;
    for class in [&low, &mid, &high] {
        let _ = classes.delete(class, &Default::default()).await;
    }
}
