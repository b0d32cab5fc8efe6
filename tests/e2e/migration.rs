//! Switching from Kueue: kuota starts on a cluster as Kueue left it and takes over without
//! a gap.
//!
//! The state is written the way Kueue's controllers write it, as plain JSON in Kueue's
//! v1beta2 shape (Kueue's `apis/kueue/v1beta2` types and its `site/static/examples`), not
//! through kuota's types: Jobs Kueue unsuspended with the flavor's node selector and their
//! Workloads (named by Kueue's `GetWorkloadNameForOwnerWithGVK`, labelled with the Job's
//! UID, `kueue.x-k8s.io/resource-in-use` finalizer, `status.admission`, Kueue's
//! `QuotaReserved`/`Admitted` conditions), Jobs Kueue's webhook suspended with pending
//! Workloads, Kueue's finalizers on the ClusterQueue and ResourceFlavor, Kueue's status on
//! the ClusterQueue, and Kueue's Events.
//!
//! CRDs: a switching user applies kuota's CRDs over Kueue's (same names, same v1beta2
//! storage version, so nothing stored needs converting; see docs/install.md). The test does
//! not swap the cluster's CRDs: they are cluster-wide and the rest of the suite runs beside
//! it. It writes Kueue's objects through kuota's CRDs instead, and checks that what Kueue
//! wrote (conditions, annotations, finalizers) reads back intact, which is what the swap
//! has to preserve.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{ClusterQueue, Workload};
use serde_json::{Value, json};

use crate::controller::{condition, finish_pods, start_controller};
use crate::support::{QueueFixture, controller_lock, create_flavor, unique_name, wait_until};

const RESOURCE_IN_USE: &str = "kueue.x-k8s.io/resource-in-use";
/// An annotation a user (or a tool around Kueue) put on a Workload: kept.
const USER_ANNOTATION: &str = "example.com/owner";

/// Kueue's `GetWorkloadNameForOwnerWithGVK` for a batch/v1 Job.
fn kueue_workload_name(job: &str, uid: &str) -> String {
    use sha1::Digest;
    let hash = format!(
        "{:x}",
        sha1::Sha1::digest(format!("Job\nbatch\n{job}\n{uid}"))
    );
    format!("job-{job}-{}", &hash[..5])
}

/// A one-pod Job in LocalQueue `lq` asking for `cpu`, as Kueue leaves it: suspended
/// (pending) or started with the flavor's node selector (admitted).
fn kueue_job(ns: &str, name: &str, cpu: &str, started_on: Option<&str>) -> Job {
    let mut template = json!({"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu}}}]
    }});
    if let Some(rf) = started_on {
        template["spec"]["nodeSelector"] = json!({"kuota.dev/e2e-pool": rf});
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": name,
                     "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"suspend": started_on.is_none(), "template": template}
    }))
    .expect("job")
}

/// Kueue's Workload for `job` (as its job reconciler creates it), with `priority`.
fn kueue_workload(job: &Job, cpu: &str, priority: Option<(&str, i32)>) -> Value {
    let (ns, name) = (
        job.metadata.namespace.clone().expect("namespaced"),
        job.metadata.name.clone().expect("named"),
    );
    let uid = job.metadata.uid.clone().expect("created");
    // The pod template as Kueue copies it from the stored Job: with the labels the API
    // server gave it (its selector's), without the flavor's node selector.
    let labels = job
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    let template = json!({"metadata": {"labels": labels}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu}}}]
    }});
    let mut spec = json!({
        "queueName": "lq",
        "podSets": [{"name": "main", "count": 1, "template": template}],
    });
    if let Some((class, value)) = priority {
        spec["priorityClassRef"] =
            json!({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": class});
        spec["priority"] = json!(value);
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {
            "name": kueue_workload_name(&name, &uid), "namespace": ns,
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "annotations": {USER_ANNOTATION: "team-a"},
            "finalizers": [RESOURCE_IN_USE],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": uid, "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": spec
    })
}

/// Kueue's status of an admitted Workload (scheduler: `SetQuotaReservation`, then the
/// workload controller's `SyncAdmittedCondition`).
fn admitted_status(cq: &str, rf: &str, cpu: &str, at: &str) -> Value {
    json!({"status": {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": rf}, "resourceUsage": {"cpu": cpu}, "count": 1
        }]},
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": format!("Quota reserved in ClusterQueue {cq}"),
             "lastTransitionTime": at, "observedGeneration": 1},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "message": "The workload is admitted",
             "lastTransitionTime": at, "observedGeneration": 1}
        ]
    }})
}

/// Kueue's status of a Workload waiting for quota.
fn pending_status(rf: &str, at: &str) -> Value {
    json!({"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": format!("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor {rf}, 1 more needed"),
         "lastTransitionTime": at, "observedGeneration": 1}
    ]}})
}

/// A core/v1 Event as Kueue's recorders leave them.
async fn kueue_event(client: &Client, obj: &Value, reason: &str, message: &str) {
    let (ns, name) = (
        obj["metadata"]["namespace"].as_str().expect("ns"),
        obj["metadata"]["name"].as_str().expect("name"),
    );
    let event: Event = serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": unique_name("kueue-event")},
        "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                           "namespace": ns, "name": name, "uid": obj["metadata"]["uid"]},
        "reason": reason, "message": message, "type": "Normal",
        "source": {"component": "kueue-admission"},
        "reportingComponent": "kueue-admission", "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"
    }))
    .expect("event");
    Api::<Event>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &event)
        .await
        .unwrap_or_else(|e| panic!("create Event {reason}: {e}"));
}

async fn create_workload(client: &Client, wl: &Value, status: Value) -> Value {
    let ns = wl["metadata"]["namespace"].as_str().expect("ns");
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &workload_resource());
    let obj: DynamicObject = serde_json::from_value(wl.clone()).expect("workload");
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create Workload {}: {e}", wl["metadata"]["name"]));
    let name = created.metadata.name.clone().expect("named");
    let written = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("write Kueue's status of Workload {name}: {e}"));
    serde_json::to_value(written).expect("json")
}

fn workload_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "kueue.x-k8s.io",
        "v1beta2",
        "Workload",
    ))
}

/// The namespace's Workloads by the name of the Job owning them.
async fn states(client: &Client, ns: &str) -> BTreeMap<String, Workload> {
    Api::<Workload>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list Workloads")
        .items
        .into_iter()
        .filter_map(|wl| {
            let job = wl
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "Job")?
                .name
                .clone();
            Some((job, wl))
        })
        .collect()
}

fn reserved(wl: &Workload) -> bool {
    condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "True")
}

/// The Jobs' suspend flags by name.
async fn suspended(client: &Client, ns: &str) -> BTreeMap<String, bool> {
    Api::<Job>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list Jobs")
        .items
        .into_iter()
        .map(|j| {
            let name = j.metadata.name.clone().unwrap_or_default();
            (name, j.spec.and_then(|s| s.suspend) == Some(true))
        })
        .collect()
}

/// Waits until exactly the Jobs in `admitted` hold quota (and run), every other Workload
/// waits suspended; fails naming the state otherwise.
async fn wait_admitted(client: &Client, ns: &str, admitted: &[&str]) {
    let mut last = String::new();
    for _ in 0..300 {
        let wls = states(client, ns).await;
        let held = suspended(client, ns).await;
        let now: Vec<&str> = wls
            .iter()
            .filter(|(_, wl)| {
                reserved(wl) && condition(wl, "Finished").is_none_or(|c| c.0 != "True")
            })
            .map(|(j, _)| j.as_str())
            .collect();
        let running_ok = admitted.iter().all(|j| held.get(*j) == Some(&false));
        if now == admitted && running_ok {
            return;
        }
        let conditions: BTreeMap<&str, Vec<(String, String, String)>> = wls
            .iter()
            .map(|(j, wl)| {
                let c = wl.status.iter().flat_map(|s| s.conditions.iter());
                let c = c.map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()));
                (j.as_str(), c.collect())
            })
            .collect();
        last = format!("holding quota: {now:?}; suspended: {held:?}; conditions: {conditions:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("expected exactly {admitted:?} admitted and running; {last}");
}

/// The ClusterQueue status's reserved and used cpu (quantities as written) and its
/// admitted and pending counts.
fn queue_numbers(status: &Value) -> (Option<String>, Option<String>, Value, Value) {
    let cpu = |field: &str| {
        status[field]
            .as_array()?
            .iter()
            .flat_map(|f| f["resources"].as_array().into_iter().flatten())
            .find(|r| r["name"] == "cpu")?["total"]
            .as_str()
            .map(str::to_string)
    };
    (
        cpu("flavorsReservation"),
        cpu("flavorsUsage"),
        status["admittedWorkloads"].clone(),
        status["pendingWorkloads"].clone(),
    )
}

#[tokio::test]
async fn kuota_takes_over_kueues_admitted_and_pending_workloads_without_a_gap() {
    let _only = controller_lock().await;
    // 2 cpu: the two Workloads Kueue admitted fill it.
    let fx = QueueFixture::new("migrate", "2").await;
    let (client, ns, rf, cq) = (
        fx.client.clone(),
        fx.ns.clone(),
        fx.rf.clone(),
        fx.cq.clone(),
    );
    let (low, high) = crate::preemption::low_and_high_classes(&client).await;
    // Kueue's finalizers on the queue and flavor it used.
    let pp = PatchParams::default();
    let finalizer = json!({"metadata": {"finalizers": [RESOURCE_IN_USE]}});
    Api::<ClusterQueue>::all(client.clone())
        .patch(&cq, &pp, &Patch::Merge(&finalizer))
        .await
        .expect("finalizer on the ClusterQueue");
    Api::<kuota::api::ResourceFlavor>::all(client.clone())
        .patch(&rf, &pp, &Patch::Merge(&finalizer))
        .await
        .expect("finalizer on the ResourceFlavor");

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let at = "2026-01-01T00:00:00Z";
    let mut admitted_workloads = BTreeMap::new();
    for name in ["running-a", "running-b"] {
        let job = jobs
            .create(
                &PostParams::default(),
                &kueue_job(&ns, name, "1", Some(&rf)),
            )
            .await
            .expect("create a Job Kueue started");
        let wl = create_workload(
            &client,
            &kueue_workload(&job, "1", None),
            admitted_status(&cq, &rf, "1", at),
        )
        .await;
        admitted_workloads.insert(
            name,
            wl["metadata"]["name"].as_str().expect("named").to_string(),
        );
        let cq_message =
            format!("Quota reserved in ClusterQueue {cq}, wait time since queued was 0s");
        kueue_event(&client, &wl, "QuotaReserved", &cq_message).await;
        kueue_event(
            &client,
            &wl,
            "Admitted",
            &format!("Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
        )
        .await;
        let job_value = serde_json::to_value(&job).expect("json");
        kueue_event(
            &client,
            &job_value,
            "Started",
            &format!("Admitted by clusterQueue {cq}"),
        )
        .await;
    }
    // Pending, in creation order (a second apart: Kueue orders by creation time within a
    // priority): low-first, high, low-second. Kueue admits high, then low-first, then
    // low-second.
    for (name, class) in [
        ("low-first", (&low, 10)),
        ("high", (&high, 1000)),
        ("low-second", (&low, 10)),
    ] {
        let job = jobs
            .create(&PostParams::default(), &kueue_job(&ns, name, "1", None))
            .await
            .expect("create a Job Kueue suspended");
        let wl = create_workload(
            &client,
            &kueue_workload(&job, "1", Some((class.0, class.1))),
            pending_status(&rf, at),
        )
        .await;
        kueue_event(
            &client,
            &wl,
            "Pending",
            "couldn't assign flavors to pod set main",
        )
        .await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    // Kueue's ClusterQueue status: kuota rewrites it from what it counts.
    Api::<ClusterQueue>::all(client.clone())
        .patch_status(
            &cq,
            &pp,
            &Patch::Merge(
                json!({"status": {"admittedWorkloads": 2, "reservingWorkloads": 2,
                                             "pendingWorkloads": 3}}),
            ),
        )
        .await
        .expect("Kueue's ClusterQueue status");
    let before = states(&client, &ns).await;

    let (stop, task) = start_controller(&client);
    // Every few polls for the first seconds: the running Jobs are never suspended and
    // their admissions never rewritten, and nothing pending jumps in.
    for _ in 0..30 {
        let held = suspended(&client, &ns).await;
        assert_eq!(
            held.get("running-a"),
            Some(&false),
            "kuota suspended a running Job"
        );
        assert_eq!(
            held.get("running-b"),
            Some(&false),
            "kuota suspended a running Job"
        );
        let now = states(&client, &ns).await;
        for name in ["low-first", "high", "low-second"] {
            assert!(
                !reserved(&now[name]),
                "{name} was admitted over the quota Kueue had used"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = wait_until(Duration::from_secs(30), || async {
        Api::<ClusterQueue>::all(client.clone())
            .get(&cq)
            .await
            .ok()
            .and_then(|q| serde_json::to_value(q.status).ok())
            .is_some_and(|s| {
                queue_numbers(&s) == (Some("2".into()), Some("2".into()), json!(2), json!(3))
            })
    })
    .await;
    assert!(
        status.is_some(),
        "the ClusterQueue's status does not count Kueue's 2 admitted cpu and 3 pending: {:?}",
        Api::<ClusterQueue>::all(client.clone())
            .get(&cq)
            .await
            .ok()
            .and_then(|q| serde_json::to_value(q.status).ok())
            .map(|s| queue_numbers(&s))
    );
    // kuota adopts Kueue's Workloads: one per Job, under Kueue's names.
    let all = Api::<Workload>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list Workloads")
        .items;
    assert_eq!(all.len(), 5, "a Job got a second Workload");
    let after = states(&client, &ns).await;
    for (name, workload) in &admitted_workloads {
        assert_eq!(after[*name].metadata.name.as_ref(), Some(workload));
    }
    for name in ["running-a", "running-b"] {
        let (b, a) = (&before[name], &after[name]);
        assert_eq!(
            a.status.as_ref().and_then(|s| s.admission.clone()),
            b.status.as_ref().and_then(|s| s.admission.clone()),
            "{name}: Kueue's admission was rewritten"
        );
        for type_ in ["QuotaReserved", "Admitted"] {
            let c = |wl: &Workload| {
                wl.status
                    .as_ref()
                    .and_then(|s| s.condition(type_))
                    .map(|c| {
                        (
                            c.status.clone(),
                            c.reason.clone(),
                            c.message.clone(),
                            c.last_transition_time.clone(),
                        )
                    })
            };
            assert_eq!(c(a), c(b), "{name}: Kueue's {type_} condition changed");
        }
        assert_eq!(
            a.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(USER_ANNOTATION))
                .map(String::as_str),
            Some("team-a"),
            "{name}: annotation lost"
        );
        assert!(
            a.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == RESOURCE_IN_USE),
            "{name}: Kueue's finalizer removed from an admitted Workload"
        );
    }
    // Not admitted twice: no new QuotaReserved Event on Kueue's admitted Workloads.
    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items;
    for (name, workload) in &admitted_workloads {
        let reserved_events = events
            .iter()
            .filter(|e| e.reason.as_deref() == Some("QuotaReserved"))
            .filter(|e| e.involved_object.name.as_ref() == Some(workload))
            .count();
        assert_eq!(reserved_events, 1, "{name}'s Workload reserved quota again");
    }

    // Quota frees one cpu at a time: Kueue's order, priority first, then creation time.
    assert!(finish_pods(&client, &ns, "running-a").await >= 1);
    wait_admitted(&client, &ns, &["high", "running-b"]).await;
    assert!(finish_pods(&client, &ns, "running-b").await >= 1);
    wait_admitted(&client, &ns, &["high", "low-first"]).await;
    assert!(finish_pods(&client, &ns, "high").await >= 1);
    wait_admitted(&client, &ns, &["low-first", "low-second"]).await;
    let kept = states(&client, &ns).await;
    for name in ["low-first", "high", "low-second"] {
        assert_eq!(
            kept[name]
                .metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(USER_ANNOTATION))
                .map(String::as_str),
            Some("team-a"),
            "{name}: annotation lost"
        );
    }

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    for name in [&low, &high] {
        let _ = Api::<kuota::api::WorkloadPriorityClass>::all(client.clone())
            .delete(name, &Default::default())
            .await;
    }
    fx.teardown().await;
}

/// A state kuota cannot honour: Kueue admitted a Workload to a flavor that has since gone
/// (removed from the ClusterQueue and deleted). Kueue leaves such a Workload admitted and
/// its Job running (nothing in Kueue re-checks an admission against the queue's current
/// flavors), and its usage lies outside every flavor the queue offers, so it takes nothing
/// from them. kuota does the same, and says what it found with a Warning Event.
#[tokio::test]
async fn a_workload_kueue_admitted_to_a_flavor_since_deleted_keeps_running() {
    let _only = controller_lock().await;
    let fx = QueueFixture::new("migrate-gone", "1").await;
    let (client, ns, rf, cq) = (
        fx.client.clone(),
        fx.ns.clone(),
        fx.rf.clone(),
        fx.cq.clone(),
    );
    let gone = unique_name("rf-gone");
    // The flavor existed when Kueue admitted; it was deleted since.
    create_flavor(&client, &gone).await;
    Api::<kuota::api::ResourceFlavor>::all(client.clone())
        .delete(&gone, &Default::default())
        .await
        .expect("delete the old flavor");

    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let job = jobs
        .create(
            &PostParams::default(),
            &kueue_job(&ns, "orphan", "1", Some(&gone)),
        )
        .await
        .expect("create the Job Kueue started");
    let at = "2026-01-01T00:00:00Z";
    create_workload(
        &client,
        &kueue_workload(&job, "1", None),
        admitted_status(&cq, &gone, "1", at),
    )
    .await;
    let before = states(&client, &ns).await;

    let (stop, task) = start_controller(&client);
    // A new Job in the same queue fits its one cpu: the orphan's usage is not charged to
    // the queue's own flavor.
    jobs.create(&PostParams::default(), &kueue_job(&ns, "fresh", "1", None))
        .await
        .expect("create Job fresh");
    wait_admitted(&client, &ns, &["fresh", "orphan"]).await;
    let after = states(&client, &ns).await;
    assert_eq!(
        after["orphan"]
            .status
            .as_ref()
            .and_then(|s| s.admission.clone()),
        before["orphan"]
            .status
            .as_ref()
            .and_then(|s| s.admission.clone()),
        "the orphan's admission was rewritten"
    );
    let assigned = serde_json::to_value(
        &after["fresh"]
            .status
            .as_ref()
            .and_then(|s| s.admission.clone())
            .expect("admitted")
            .pod_set_assignments,
    )
    .expect("json");
    assert_eq!(assigned[0]["flavors"]["cpu"], json!(rf), "{assigned}");
    // Held a few seconds more: the orphan is never suspended or evicted.
    for _ in 0..20 {
        assert_eq!(suspended(&client, &ns).await.get("orphan"), Some(&false));
        assert!(
            condition(&states(&client, &ns).await["orphan"], "Evicted")
                .is_none_or(|c| c.0 != "True")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    fx.teardown().await;
}
