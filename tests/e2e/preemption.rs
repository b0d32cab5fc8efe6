//! Priority preemption against the real API server and kube-controller-manager: a
//! higher-priority Job takes the quota of a running lower-priority one within its
//! ClusterQueue (`preemption.withinClusterQueue: LowerPriority`), with Kueue's conditions,
//! and the victim comes back once the preemptor has finished. A Job that already
//! succeeded (by its controller's word, or by its pods' before its controller counts
//! them) is waited for, not preempted.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kuota::api::{Workload, WorkloadPriorityClass};
use serde_json::json;

use crate::controller::{condition, finish_pods, job, start_controller, wait_for_workload};
use crate::support::{QueueFixture, controller_lock, unique_name, wait_until};

/// A suspended one-pod Job asking for `cpu`, with Kueue's priority-class label.
pub(crate) fn prioritized_job(ns: &str, name: &str, cpu: &str, class: &str) -> Job {
    let mut j = job(ns, name, cpu);
    j.spec.get_or_insert_with(Default::default).suspend = Some(true);
    j.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kueue.x-k8s.io/priority-class".into(), class.into());
    j
}

/// A ClusterQueue of 1 cpu that preempts lower priorities within itself (named after
/// the test), as every priority preemption test starts.
pub(crate) async fn priority_queue(name: &str) -> QueueFixture {
    QueueFixture::with_queue_spec(
        name,
        "1",
        json!({"preemption": {"withinClusterQueue": "LowerPriority"}}),
    )
    .await
}

/// Stops kuota, deletes the test's priority classes and its queues.
pub(crate) async fn stop_and_clean(
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    fx: QueueFixture,
    classes: [&String; 2],
) {
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    for name in classes {
        let _ = Api::<WorkloadPriorityClass>::all(fx.client.clone())
            .delete(name, &Default::default())
            .await;
    }
    fx.teardown().await;
}

/// A preemptor of priority class `class` that needs the quota Job `job` holds is created;
/// five seconds after it is seen pending, `job` is neither preempted nor suspended.
async fn preemptor_waits_for(client: &kube::Client, ns: &str, class: &str, job: &str) {
    let jobs = Api::<Job>::namespaced(client.clone(), ns);
    jobs.create(
        &PostParams::default(),
        &prioritized_job(ns, "preemptor", "600m", class),
    )
    .await
    .expect("create Job preemptor");
    wait_for_workload(client, ns, "preemptor", "pending", |wl| {
        condition(wl, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let held = wait_for_workload(client, ns, job, "admitted", |_| true).await;
    assert!(
        condition(&held, "Evicted").is_none_or(|c| c.0 != "True"),
        "Job {job} was preempted: {:?}",
        condition(&held, "Evicted")
    );
    assert_eq!(
        job_state(&jobs, job).await.0,
        Some(false),
        "Job {job} was suspended"
    );
}

/// Job `job`, waited for rather than preempted, finishes without having been evicted,
/// and the preemptor that waited for it is admitted.
async fn finished_unevicted_then_preemptor_admitted(client: &kube::Client, ns: &str, job: &str) {
    let finished = wait_for_workload(client, ns, job, "finished", |wl| {
        condition(wl, "Finished").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert!(
        condition(&finished, "Evicted").is_none_or(|c| c.0 != "True"),
        "{:?}",
        condition(&finished, "Evicted")
    );
    wait_for_workload(client, ns, "preemptor", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
}

/// The Job's pod template node selector and suspend flag.
pub(crate) async fn job_state(
    jobs: &Api<Job>,
    name: &str,
) -> (Option<bool>, Option<String>, String) {
    let j = jobs.get(name).await.expect("get Job");
    let uid = j.metadata.uid.clone().unwrap_or_default();
    let spec = j.spec.unwrap_or_default();
    let pool = spec
        .template
        .spec
        .and_then(|p| p.node_selector)
        .and_then(|s| s.get("kuota.dev/e2e-pool").cloned());
    (spec.suspend, pool, uid)
}

/// Waits until Job `name` is unsuspended with flavor `rf`'s nodeSelector and has a Pod.
pub(crate) async fn wait_started(jobs: &Api<Job>, pods: &Api<Pod>, name: &str, rf: &str) {
    let started = wait_until(Duration::from_secs(60), || async move {
        let (suspend, pool, _) = job_state(jobs, name).await;
        suspend == Some(false) && pool.as_deref() == Some(rf)
    })
    .await;
    assert!(
        started.is_some(),
        "Job {name} was not unsuspended with the flavor's nodeSelector: {:?}",
        job_state(jobs, name).await
    );
    wait_until(Duration::from_secs(60), || async move {
        pods.list(&ListParams::default().labels(&format!("job-name={name}")))
            .await
            .is_ok_and(|l| !l.items.is_empty())
    })
    .await
    .unwrap_or_else(|| panic!("kube-controller-manager created no Pod for Job {name}"));
}

/// Waits until Job `name` has no Pods, confirming as gone any stuck terminating (the
/// test plays the kubelet).
/// Two new WorkloadPriorityClasses, low (10) and high (1000); their names.
pub(crate) async fn low_and_high_classes(client: &kube::Client) -> (String, String) {
    let classes = Api::<WorkloadPriorityClass>::all(client.clone());
    let (low, high) = (unique_name("low"), unique_name("high"));
    for (name, value) in [(&low, 10), (&high, 1000)] {
        classes
            .create(
                &PostParams::default(),
                &WorkloadPriorityClass::new(name, value),
            )
            .await
            .unwrap_or_else(|e| panic!("create WorkloadPriorityClass {name}: {e}"));
    }
    (low, high)
}

pub(crate) async fn wait_pods_gone(pods: &Api<Pod>, name: &str) {
    let selector = format!("job-name={name}");
    let gone = wait_until(Duration::from_secs(60), || {
        let (pods, selector) = (pods.clone(), selector.clone());
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .expect("list pods");
            for p in &list.items {
                if p.metadata.deletion_timestamp.is_some() {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let _ = pods
                        .delete(&name, &DeleteParams::default().grace_period(0))
                        .await;
                }
            }
            list.items.is_empty()
        }
    })
    .await;
    assert!(gone.is_some(), "the Pods of Job {name} were never deleted");
}

#[tokio::test]
async fn a_higher_priority_job_preempts_a_running_one_which_comes_back_after_it() {
    let _only = controller_lock().await;
    let fx = priority_queue("preempt").await;
    let (client, ns, rf, cq) = (
        fx.client.clone(),
        fx.ns.clone(),
        fx.rf.clone(),
        fx.cq.clone(),
    );
    let (low, high) = low_and_high_classes(&client).await;
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    // The low-priority Job is admitted and running (its Pod exists).
    jobs.create(
        &PostParams::default(),
        &prioritized_job(&ns, "victim", "600m", &low),
    )
    .await
    .expect("create Job victim");
    let admitted = wait_for_workload(&client, &ns, "victim", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(admitted.spec.priority, Some(10), "the class's value");
    wait_started(&jobs, &pods, "victim", &rf).await;

    // The high-priority Job needs the quota the victim holds.
    jobs.create(
        &PostParams::default(),
        &prioritized_job(&ns, "preemptor", "600m", &high),
    )
    .await
    .expect("create Job preemptor");
    let evicted = wait_for_workload(&client, &ns, "victim", "evicted", |wl| {
        condition(wl, "Evicted").is_some_and(|c| c.0 == "True")
    })
    .await;
    let preemptor_wl = wait_for_workload(&client, &ns, "preemptor", "created", |_| true).await;
    let preemptor_job_uid = job_state(&jobs, "preemptor").await.2;
    // Kueue's preemptionMessage, word for word.
    let message = format!(
        "Preempted to accommodate a workload (UID: {}, JobUID: {preemptor_job_uid}) due to \
         prioritization in the ClusterQueue; preemptor path: /{cq}; preemptee path: /{cq}",
        preemptor_wl.metadata.uid.clone().unwrap_or_default()
    );
    assert_eq!(
        condition(&evicted, "Evicted"),
        Some(("True", "Preempted", message.as_str()))
    );
    assert_eq!(
        condition(&evicted, "Preempted"),
        Some(("True", "InClusterQueue", message.as_str()))
    );

    // The victim's Job is suspended again with its original template, and the Job
    // controller deletes its Pod (unbound Pods go at once: no kubelet to wait for).
    let stopped = wait_until(Duration::from_secs(60), || {
        let jobs = jobs.clone();
        async move {
            let (suspend, pool, _) = job_state(&jobs, "victim").await;
            suspend == Some(true) && pool.is_none()
        }
    })
    .await;
    assert!(
        stopped.is_some(),
        "the victim's Job was not suspended with its template restored: {:?}",
        job_state(&jobs, "victim").await
    );
    wait_pods_gone(&pods, "victim").await;

    // Requeued: no admission, pending with kuota's reason while the preemptor runs.
    let requeued = wait_for_workload(&client, &ns, "victim", "requeued and pending", |wl| {
        wl.status.as_ref().is_some_and(|s| s.admission.is_none())
            && condition(wl, "QuotaReserved")
                .is_some_and(|c| c.0 == "False" && c.1 == "WaitingForQuota")
    })
    .await;
    assert_eq!(condition(&requeued, "Admitted").map(|c| c.0), Some("False"));
    let (_, _, pending_message) = condition(&requeued, "QuotaReserved").expect("condition");
    assert!(
        pending_message.contains("insufficient unused quota for cpu"),
        "{pending_message}"
    );
    let preemptor_wl = wait_for_workload(&client, &ns, "preemptor", "admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(preemptor_wl.spec.priority, Some(1000));
    wait_started(&jobs, &pods, "preemptor", &rf).await;
    assert_eq!(
        job_state(&jobs, "victim").await.0,
        Some(true),
        "the victim stays suspended while the preemptor holds the quota"
    );

    // The preemptor finishes: the victim is admitted again and runs.
    assert!(finish_pods(&client, &ns, "preemptor").await >= 1);
    wait_for_workload(&client, &ns, "preemptor", "finished", |wl| {
        condition(wl, "Finished").is_some_and(|c| c.0 == "True")
    })
    .await;
    let readmitted = wait_for_workload(&client, &ns, "victim", "re-admitted", |wl| {
        condition(wl, "Admitted").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&readmitted, "QuotaReserved").map(|c| c.0),
        Some("True")
    );
    assert_eq!(
        condition(&readmitted, "Evicted").map(|c| (c.0, c.1)),
        Some(("False", "QuotaReserved")),
        "a new admission resets Evicted as Kueue's SetQuotaReservation does"
    );
    wait_started(&jobs, &pods, "victim", &rf).await;
    let holding: Vec<Workload> = Api::<Workload>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list Workloads")
        .items
        .into_iter()
        .filter(|wl| {
            wl.status.as_ref().is_some_and(|s| s.admission.is_some())
                && condition(wl, "Finished").is_none_or(|c| c.0 != "True")
        })
        .collect();
    assert_eq!(holding.len(), 1, "only the victim holds quota now");

    stop_and_clean(stop, task, fx, [&low, &high]).await;
}

/// A Job whose outcome Kubernetes has decided (`SuccessCriteriaMet`) while one of its
/// Pods still terminates is about to give its quota back: a higher-priority Job waits
/// for it instead of preempting it, and is admitted once it completes.
#[tokio::test]
async fn a_preemptor_waits_for_a_job_that_already_succeeded_instead_of_preempting_it() {
    const HOLD: &str = "kuota.dev/e2e-hold";
    let _only = controller_lock().await;
    let fx = priority_queue("finishing").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    let (low, high) = low_and_high_classes(&client).await;
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    // Two pods of 500m; index 0 succeeding is enough (Kubernetes' successPolicy).
    let finishing: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"namespace": ns, "name": "finishing", "labels": {
            "kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/priority-class": low}},
        "spec": {
            "suspend": true, "completions": 2, "parallelism": 2,
            "completionMode": "Indexed",
            "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "500m"}}}]}}
        }
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &finishing)
        .await
        .expect("create Job finishing");
    wait_started(&jobs, &pods, "finishing", &rf).await;
    let index =
        |i: &str| format!("job-name=finishing,batch.kubernetes.io/job-completion-index={i}");
    let pod_of = |i: &'static str| {
        let (pods, selector) = (pods.clone(), index(i));
        async move {
            pods.list(&ListParams::default().labels(&selector))
                .await
                .ok()
                .and_then(|l| l.items.into_iter().next())
        }
    };
    assert!(
        wait_until(Duration::from_secs(60), || async {
            pod_of("1").await.is_some() && pod_of("0").await.is_some()
        })
        .await
        .is_some(),
        "the Job controller created no Pods for both indexes"
    );
    // Index 1 is held while it terminates, as a kubelet still stopping it would.
    let slow = pod_of("1")
        .await
        .expect("pod 1")
        .metadata
        .name
        .expect("named");
    pods.patch(
        &slow,
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
                {"op": "add", "path": "/metadata/finalizers/-", "value": HOLD}
            ]))
            .expect("patch"),
        ),
    )
    .await
    .expect("hold pod 1");
    let done = pod_of("0")
        .await
        .expect("pod 0")
        .metadata
        .name
        .expect("named");
    pods.patch_status(
        &done,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("mark pod 0 Succeeded");
    let decided = wait_until(Duration::from_secs(60), || async {
        let j = jobs.get("finishing").await.expect("get Job");
        let conditions = j.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .any(|c| c.type_ == "SuccessCriteriaMet" && c.status == "True")
            && !conditions.iter().any(|c| c.type_ == "Complete")
    })
    .await;
    assert!(
        decided.is_some(),
        "the Job never had SuccessCriteriaMet without Complete"
    );

    // The preemptor needs the quota the finishing Job holds, and waits for it.
    preemptor_waits_for(&client, &ns, &high, "finishing").await;

    // Its last Pod goes: the Job completes, its quota frees, the preemptor is admitted.
    let pod = pods.get(&slow).await.expect("pod 1");
    let kept: Vec<String> = pod
        .metadata
        .finalizers
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != HOLD)
        .collect();
    pods.patch(
        &slow,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": kept}})),
    )
    .await
    .expect("release pod 1");
    finished_unevicted_then_preemptor_admitted(&client, &ns, "finishing").await;

    stop_and_clean(stop, task, fx, [&low, &high]).await;
}

/// A Job whose only pod succeeded is finishing even while its Job controller has not yet
/// counted the pod (under load it does so seconds later): the preemptor waits for it.
/// `spec.managedBy` keeps kube-controller-manager's Job controller away, and the test
/// plays it: it creates the pod, and completes the Job only after the check.
#[tokio::test]
async fn a_preemptor_waits_for_a_job_whose_pods_succeeded_before_its_controller_counts_them() {
    let _only = controller_lock().await;
    let fx = priority_queue("podsdone").await;
    let (client, ns, rf) = (fx.client.clone(), fx.ns.clone(), fx.rf.clone());
    let (low, high) = low_and_high_classes(&client).await;
    let (stop, task) = start_controller(&client);
    let jobs = Api::<Job>::namespaced(client.clone(), &ns);
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    let mut done = prioritized_job(&ns, "done", "600m", &low);
    done.spec.get_or_insert_with(Default::default).managed_by =
        Some("e2e.kuota.dev/job-controller".into());
    jobs.create(&PostParams::default(), &done)
        .await
        .expect("create Job done");
    let started = wait_until(Duration::from_secs(60), || async {
        let (suspend, pool, _) = job_state(&jobs, "done").await;
        suspend == Some(false) && pool.as_deref() == Some(rf.as_str())
    })
    .await;
    assert!(started.is_some(), "Job done was not started");
    let job = jobs.get("done").await.expect("get Job done");
    let template = job.spec.clone().unwrap_or_default().template;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "done-pod", "namespace": ns,
            "labels": template.metadata.as_ref().and_then(|m| m.labels.clone()),
            "annotations": template.metadata.as_ref().and_then(|m| m.annotations.clone()),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "done",
                "uid": job.metadata.uid, "controller": true}]},
        "spec": template.spec,
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the Job's pod");
    pods.patch_status(
        "done-pod",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("mark the pod Succeeded");
    // The pod watch's delivery, then a preemptor that needs the Job's quota.
    tokio::time::sleep(Duration::from_secs(2)).await;
    preemptor_waits_for(&client, &ns, &high, "done").await;

    // Its controller counts the pod and completes it: the quota frees, the preemptor runs.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    jobs.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "startTime": now, "completionTime": now, "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods",
                 "lastTransitionTime": now, "lastProbeTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods",
                 "lastTransitionTime": now, "lastProbeTime": now}]}})),
    )
    .await
    .expect("complete Job done");
    finished_unevicted_then_preemptor_admitted(&client, &ns, "done").await;

    stop_and_clean(stop, task, fx, [&low, &high]).await;
}
