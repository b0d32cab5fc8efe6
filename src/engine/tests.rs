//! Engine unit tests on small hand-written clusters; the broad behaviour is
//! covered by the scenario suite in tests/scenarios.

use super::*;

pub(super) fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    serde_norway::from_str(yaml).expect("test fixture is valid")
}

pub(super) fn cq(
    name: &str,
    cohort: Option<&str>,
    cpu: &str,
    borrowing: Option<&str>,
    preemption: &str,
) -> api::ClusterQueue {
    let cohort = cohort
        .map(|c| format!("cohortName: {c}"))
        .unwrap_or_default();
    let bl = borrowing
        .map(|b| format!("borrowingLimit: \"{b}\""))
        .unwrap_or_default();
    obj(&format!(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{ name: {name} }}
spec:
  {cohort}
  namespaceSelector: {{}}
  preemption: {{ {preemption} }}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - name: cpu
        nominalQuota: "{cpu}"
        {bl}
"#
    ))
}

pub(super) fn setup(cqs: &[api::ClusterQueue]) -> Engine {
    setup_with(EngineConfig::default(), cqs)
}

pub(super) fn setup_with(config: EngineConfig, cqs: &[api::ClusterQueue]) -> Engine {
    let mut e = Engine::new(config);
    e.apply(
        0,
        Event::ResourceFlavorUpserted(obj("metadata: {name: default}\nspec: {}")),
    )
    .unwrap();
    for c in cqs {
        e.apply(0, Event::ClusterQueueUpserted(c.clone())).unwrap();
        let name = c.metadata.name.clone().unwrap();
        e.apply(
            0,
            Event::LocalQueueUpserted(obj(&format!(
                "metadata: {{name: {name}, namespace: ns}}\nspec: {{clusterQueue: {name}}}"
            ))),
        )
        .unwrap();
    }
    e
}

pub(super) fn wl(name: &str, queue: &str, cpu: &str, priority: i32) -> Event {
    Event::WorkloadUpserted(obj(&format!(
        r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: {queue}
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers: [{{ name: c, resources: {{ requests: {{ cpu: "{cpu}" }} }} }}]
"#
    )))
}

/// Names of the workloads `pick` selects from the decisions, sorted.
fn names(d: &[Decision], pick: fn(&Decision) -> Option<&WorkloadKey>) -> Vec<String> {
    let mut v: Vec<String> = d
        .iter()
        .filter_map(|d| pick(d).map(|k| k.name.to_string()))
        .collect();
    v.sort();
    v
}

pub(super) fn admitted(d: &[Decision]) -> Vec<String> {
    names(d, |d| match d {
        Decision::Admit { workload, .. } => Some(workload),
        _ => None,
    })
}

pub(super) fn key(name: &str) -> WorkloadKey {
    WorkloadKey::new("ns", name)
}

#[test]
fn admits_many_from_one_cluster_queue_in_one_cycle() {
    let mut e = setup(&[cq("a", None, "10", None, "")]);
    for i in 0..5 {
        e.apply(i, wl(&format!("w{i}"), "a", "2", 0)).unwrap();
    }
    e.apply(9, wl("w9", "a", "1", 0)).unwrap();
    let d = e.schedule(10);
    assert_eq!(admitted(&d), vec!["w0", "w1", "w2", "w3", "w4"]);
    match e.workload_state(&key("w9")).unwrap() {
        WorkloadState::Pending { reason, message } => {
            assert_eq!(reason, PendingReason::WaitingForQuota);
            assert!(message.contains("1 more needed"), "{message}");
        }
        s => panic!("unexpected {s:?}"),
    }
}

#[test]
fn two_borrowers_never_over_admit() {
    let mut e = setup(&[
        cq("a", Some("c"), "2", None, ""),
        cq("b", Some("c"), "2", None, ""),
        cq("idle", Some("c"), "4", None, ""),
    ]);
    e.apply(0, wl("a1", "a", "5", 0)).unwrap();
    e.apply(0, wl("b1", "b", "5", 0)).unwrap();
    let d = e.schedule(1);
    assert_eq!(
        admitted(&d).len(),
        1,
        "only one of the two borrowers fits in the 8-CPU cohort"
    );
}

#[test]
fn preempts_lower_priority_in_cluster_queue_and_waits() {
    let mut e = setup(&[cq(
        "a",
        None,
        "4",
        None,
        "withinClusterQueue: LowerPriority",
    )]);
    e.apply(0, wl("low1", "a", "2", 0)).unwrap();
    e.apply(0, wl("low2", "a", "2", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1)).len(), 2);
    e.apply(2, wl("high", "a", "2", 10)).unwrap();
    let d = e.schedule(3);
    let victims: Vec<_> = d
        .iter()
        .filter(|d| matches!(d, Decision::Preempt { .. }))
        .collect();
    assert_eq!(
        victims.len(),
        1,
        "fill-back keeps the preemption minimal: {d:?}"
    );
    // Held until the victim stops: no second victim in the next cycle.
    let d = e.schedule(4);
    assert!(
        d.iter().all(|d| !matches!(d, Decision::Preempt { .. })),
        "{d:?}"
    );
    let victim = match victims[0] {
        Decision::Preempt { victim, .. } => victim.clone(),
        _ => unreachable!(),
    };
    e.apply(5, Event::WorkloadEvicted(victim)).unwrap();
    assert_eq!(admitted(&e.schedule(6)), vec!["high"]);
}

#[test]
fn reclaims_borrowed_quota_in_cohort() {
    let mut e = setup(&[
        cq("a", Some("c"), "4", None, "reclaimWithinCohort: Any"),
        cq("b", Some("c"), "4", None, ""),
    ]);
    e.apply(0, wl("b1", "b", "4", 0)).unwrap();
    e.apply(0, wl("b2", "b", "4", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1)).len(), 2);
    e.apply(2, wl("a1", "a", "3", 0)).unwrap();
    let d = e.schedule(3);
    let reasons: Vec<_> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Preempt { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec![PreemptionReason::InCohortReclamation]);
}

#[test]
fn missing_local_queue_is_inadmissible_until_created() {
    let mut e = setup(&[cq("a", None, "4", None, "")]);
    e.apply(0, wl("w", "nope", "1", 0)).unwrap();
    let d = e.schedule(1);
    assert!(admitted(&d).is_empty());
    match e.workload_state(&key("w")).unwrap() {
        WorkloadState::Pending { reason, message } => {
            assert_eq!(reason, PendingReason::Misconfigured);
            assert!(
                message.contains("LocalQueue nope doesn't exist"),
                "{message}"
            );
        }
        s => panic!("unexpected {s:?}"),
    }
    e.apply(
        2,
        Event::LocalQueueUpserted(obj(
            "metadata: {name: nope, namespace: ns}\nspec: {clusterQueue: a}",
        )),
    )
    .unwrap();
    assert_eq!(admitted(&e.schedule(3)), vec!["w"]);
}

#[test]
fn finish_releases_quota_and_revives_parked() {
    let mut e = setup(&[cq("a", None, "4", None, "")]);
    e.apply(0, wl("big", "a", "4", 0)).unwrap();
    e.apply(1, wl("next", "a", "3", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(2)), vec!["big"]);
    assert!(admitted(&e.schedule(3)).is_empty());
    e.apply(4, Event::WorkloadFinished(key("big"))).unwrap();
    assert_eq!(admitted(&e.schedule(5)), vec!["next"]);
    let r = e.cluster_queue_report("a").unwrap();
    assert_eq!(
        r.usage[&("default".to_string(), "cpu".to_string())].total,
        3000
    );
}

/// LocalQueue counts and usage come from the engine's workloads: pending and admitted
/// per (namespace, queue), usage as charged, a finished workload in neither.
#[test]
fn local_queue_reports_count_pending_and_admitted_and_sum_their_usage() {
    let mut e = setup(&[cq("a", None, "4", None, ""), cq("b", None, "1", None, "")]);
    e.apply(0, wl("one", "a", "1500m", 0)).unwrap();
    e.apply(0, wl("two", "a", "2", 0)).unwrap();
    e.apply(0, wl("three", "a", "2", 0)).unwrap();
    e.apply(0, wl("done", "b", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1)), vec!["done", "one", "two"]);
    e.apply(2, Event::WorkloadFinished(key("done"))).unwrap();
    let reports = e.local_queue_reports();
    let a = &reports[&("ns".to_string(), "a".to_string())];
    assert_eq!((a.pending, a.admitted), (1, 2));
    assert_eq!(a.usage[&("default".to_string(), "cpu".to_string())], 3500);
    // Nothing unfinished names `b`: no report (its status counts zero).
    assert!(!reports.contains_key(&("ns".to_string(), "b".to_string())));
    assert_eq!(reports.len(), 1);
}

/// A status write happens only when what the user sees changes: a re-evaluation that
/// ends with the same explanation emits nothing; a different shortfall emits the new one.
#[test]
fn pending_message_is_reported_only_when_it_changes() {
    let pending_for = |d: &[Decision], name: &str| -> Vec<String> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Pending {
                    workload, message, ..
                } if &*workload.name == name => Some(message.to_string()),
                _ => None,
            })
            .collect()
    };
    let revive = || Event::NamespaceUpserted {
        name: "ns".into(),
        labels: Default::default(),
    };
    let mut e = setup(&[cq("a", None, "5", None, "")]);
    e.apply(0, wl("big", "a", "4", 0)).unwrap();
    e.apply(1, wl("w", "a", "2", 0)).unwrap();
    let first = e.schedule(2);
    assert_eq!(admitted(&first), vec!["big"]);
    let msg = pending_for(&first, "w");
    assert_eq!(msg.len(), 1, "{first:?}");
    assert!(
        msg[0].contains("1 more needed (2 requested, 1 available"),
        "{}",
        msg[0]
    );

    // Re-evaluated against the same quota: nothing new to write.
    e.apply(3, revive()).unwrap();
    let again = e.schedule(4);
    assert!(pending_for(&again, "w").is_empty(), "{again:?}");

    // A later, smaller workload takes the last cpu (BestEffortFIFO): w is now 2 short.
    e.apply(5, wl("x", "a", "1", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(6)), vec!["x"]);
    e.apply(7, revive()).unwrap();
    let changed = pending_for(&e.schedule(8), "w");
    assert_eq!(changed.len(), 1);
    assert!(
        changed[0].contains("2 more needed (2 requested, 0 available"),
        "{}",
        changed[0]
    );
}

pub(super) fn preempted(d: &[Decision]) -> Vec<String> {
    names(d, |d| match d {
        Decision::Preempt { victim, .. } => Some(victim),
        _ => None,
    })
}

#[test]
fn protected_workloads_are_not_preempted_and_the_engine_asks_to_wake_when_protection_ends() {
    let cluster = [
        cq(
            "a",
            Some("c"),
            "4",
            None,
            "withinClusterQueue: LowerPriority, reclaimWithinCohort: Any",
        ),
        cq("b", Some("c"), "4", None, ""),
    ];
    let config = EngineConfig {
        preemption_min_runtime: 1_000,
        ..EngineConfig::default()
    };
    let mut e = setup_with(config, &cluster);
    // b borrows 2 of a's quota at t=0; a admits its own low-priority one at t=200.
    e.apply(0, wl("b-borrower", "b", "6", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(0)), vec!["b-borrower"]);
    e.apply(200, wl("a-low", "a", "2", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(200)), vec!["a-low"]);
    assert_eq!(e.next_wakeup(), None, "nobody waits for a protection yet");

    // A high-priority workload in a needs 2 more, within a's nominal quota: the
    // cohort is full, so it must reclaim from b, whose workload is protected.
    e.apply(500, wl("a-high", "a", "2", 100)).unwrap();
    let d = e.schedule(500);
    assert!(preempted(&d).is_empty(), "{d:?}");
    assert!(admitted(&d).is_empty());
    assert_eq!(e.next_wakeup(), Some(1_000), "when b-borrower has run 1 s");
    assert!(
        e.schedule(999).is_empty(),
        "still protected, and nothing to report again"
    );

    // Nothing else happens: the shell runs the cycle the engine asked for.
    let d = e.schedule(1_000);
    assert_eq!(
        preempted(&d),
        vec!["b-borrower"],
        "reclaimed once protection ended"
    );
    assert_eq!(e.next_wakeup(), None, "a wake-up is used once");

    // Without protection, the same arrival preempts at once.
    let mut kueue = setup(&cluster);
    kueue.apply(0, wl("b-borrower", "b", "6", 0)).unwrap();
    kueue.schedule(0);
    kueue.apply(200, wl("a-low", "a", "2", 0)).unwrap();
    kueue.schedule(200);
    kueue.apply(500, wl("a-high", "a", "2", 100)).unwrap();
    assert_eq!(preempted(&kueue.schedule(500)), vec!["b-borrower"]);
    assert_eq!(kueue.next_wakeup(), None);
}

/// Memory quotas past what milli-units could hold (Kueue accepts them): admitted in whole
/// bytes, and the admission, the usage and the pending message print Kueue-style quantities.
#[test]
fn memory_quota_in_pebibytes_admits_and_prints_as_written() {
    let mut e = setup(&[]);
    e.apply(
        0,
        Event::ClusterQueueUpserted(obj(r#"
metadata: { name: big }
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - { name: cpu, nominalQuota: "1E" }
      - { name: memory, nominalQuota: "9Pi" }
"#)),
    )
    .unwrap();
    e.apply(
        0,
        Event::LocalQueueUpserted(obj(
            "metadata: {name: big, namespace: ns}\nspec: {clusterQueue: big}",
        )),
    )
    .unwrap();
    let job = |name: &str, mem: &str| {
        Event::WorkloadUpserted(obj(&format!(
            r#"
metadata: {{ name: {name}, namespace: ns }}
spec:
  queueName: big
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers: [{{ name: c, resources: {{ requests: {{ cpu: 500m, memory: "{mem}" }} }} }}]
"#
        )))
    };
    e.apply(1, job("fits", "4Pi")).unwrap();
    let d = e.schedule(2);
    assert_eq!(admitted(&d), vec!["fits"]);
    let Some(Decision::Admit { admission, .. }) = d.first() else {
        panic!("expected an admission: {d:?}");
    };
    let usage = &admission.pod_set_assignments[0].resource_usage;
    assert_eq!(usage["memory"].0, "8Pi");
    assert_eq!(usage["cpu"].0, "1");
    let r = e.cluster_queue_report("big").unwrap();
    let mem = &r.usage[&("default".to_string(), "memory".to_string())];
    assert_eq!(mem.total, 8 * (1i64 << 50));

    e.apply(3, job("waits", "1Pi")).unwrap();
    e.schedule(4);
    match e.workload_state(&key("waits")).unwrap() {
        WorkloadState::Pending { reason, message } => {
            assert_eq!(reason, PendingReason::WaitingForQuota);
            assert!(
                message.contains("1Pi more needed (2Pi requested, 1Pi available"),
                "{message}"
            );
        }
        s => panic!("unexpected {s:?}"),
    }
}

#[test]
fn an_unusable_quota_names_the_object_and_field_and_keeps_the_quantity_error() {
    let mut e = Engine::new(EngineConfig::default());
    let err = e
        .apply(
            0,
            Event::ClusterQueueUpserted(cq("team-a", None, "lots", None, "")),
        )
        .expect_err("the quota is not a quantity");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "ClusterQueue \"team-a\": spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: \
             invalid quantity \"lots\": "
        ),
        "{message}"
    );
    // The chain goes object -> field -> quantity, so callers can inspect each cause.
    let model = std::error::Error::source(&err).expect("the model error is kept");
    let quantity = model.source().expect("the quantity error is kept");
    assert!(
        quantity
            .downcast_ref::<crate::api::quantity::QuantityError>()
            .is_some(),
        "{quantity:?}"
    );
}

pub(super) fn pending_message(e: &Engine, name: &str) -> (PendingReason, String) {
    match e.workload_state(&key(name)).unwrap() {
        WorkloadState::Pending { reason, message } => (reason, message.to_string()),
        s => panic!("{name} is not pending: {s:?}"),
    }
}

/// Kueue's reserveCapacityForUnreclaimablePreempt: a head that would need preemption
/// but has nobody to preempt keeps other ClusterQueues from borrowing its quota in
/// that cycle, unless its ClusterQueue may reclaim from anyone later. Its own queue's
/// next workload is not kept out (kuota admits several per ClusterQueue per cycle).
#[test]
fn head_without_victims_holds_its_quota_against_other_queues_only() {
    for (reclaim, b1_admitted) in [
        ("reclaimWithinCohort: Never", false),
        ("reclaimWithinCohort: Any", true),
    ] {
        let mut e = setup(&[
            cq("a", Some("c"), "4", None, reclaim),
            cq("b", Some("c"), "0", None, ""),
        ]);
        e.apply(0, wl("a1", "a", "2", 0)).unwrap();
        assert_eq!(admitted(&e.schedule(1)), vec!["a1"]);
        e.apply(2, wl("big", "a", "4", 0)).unwrap();
        e.apply(3, wl("small", "a", "1", 0)).unwrap();
        e.apply(4, wl("b1", "b", "1", 0)).unwrap();
        let d = e.schedule(5);
        let mut want = vec!["small"];
        if b1_admitted {
            want.insert(0, "b1");
        }
        assert_eq!(admitted(&d), want, "{reclaim}");
        let (reason, message) = pending_message(&e, "big");
        assert_eq!(reason, PendingReason::WaitingForQuota);
        assert!(message.contains("2 more needed"), "{message}");
        // The hold lasts one cycle: between cycles the tree holds real usage only.
        let node = e.cqs[0].node;
        // One flavor and one resource: (flavor, resource) id 0 is (default, cpu).
        let cpu = 0;
        assert_eq!(e.names.frs.len(), 1);
        assert_eq!(
            e.tree.usage(node, cpu),
            3000,
            "{reclaim}: a1 and small only"
        );
    }
}

/// Two preemptors in a cohort want the same victim: `v` borrows from `b`, so `p1`
/// preempts it within `a` and `p2` would reclaim it for `b`. `p2` fits once `v` is
/// gone (`p1` reserved only half of what `v` frees), so it preempts nothing more and
/// waits for `v`, in Kueue's words for a deferred fit; both are admitted once `v`
/// stops, without over-committing the cohort.
#[test]
fn preemptor_that_fits_after_anothers_victims_waits_for_them() {
    let mut e = setup(&[
        cq(
            "a",
            Some("c"),
            "2",
            None,
            "withinClusterQueue: LowerPriority",
        ),
        cq("b", Some("c"), "2", None, "reclaimWithinCohort: Any"),
    ]);
    e.apply(0, wl("v", "a", "4", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1)), vec!["v"]);
    e.apply(2, wl("p1", "a", "2", 10)).unwrap();
    e.apply(3, wl("p2", "b", "2", 5)).unwrap();
    let d = e.schedule(4);
    let victims = names(&d, |d| match d {
        Decision::Preempt { victim, .. } => Some(victim),
        _ => None,
    });
    assert_eq!(victims, vec!["v"], "one preemption for both: {d:?}");
    // Whichever of the two is looked at first preempts; the other waits for its victim.
    let preemptor = match d.iter().find(|d| matches!(d, Decision::Preempt { .. })) {
        Some(Decision::Preempt { preemptor, .. }) => preemptor.name.to_string(),
        _ => unreachable!(),
    };
    let other = if preemptor == "p1" { "p2" } else { "p1" };
    let (reason, message) = pending_message(&e, &preemptor);
    assert_eq!(reason, PendingReason::WaitingForPreemption);
    assert!(
        message.ends_with("Pending the preemption of 1 workload(s)"),
        "{message}"
    );
    let (reason, message) = pending_message(&e, other);
    assert_eq!(reason, PendingReason::WaitingForPreemption);
    assert_eq!(
        message,
        "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
    );
    // Neither is admitted while the victim still runs.
    assert!(admitted(&e.schedule(5)).is_empty());
    e.apply(6, Event::WorkloadEvicted(key("v"))).unwrap();
    assert_eq!(admitted(&e.schedule(7)), vec!["p1", "p2"]);
}

/// A StrictFIFO ClusterQueue ordered by LocalQueue usage (8 cpu), with LocalQueues `a`
/// (no history) and `b` (8 cpu consumed before, from its status).
fn afs_engine(afs: bool) -> Engine {
    let config = EngineConfig {
        admission_fair_sharing: afs.then(|| AdmissionFairSharing {
            usage_half_life: 10_000,
            usage_sampling_interval: 1_000,
            resource_weights: BTreeMap::new(),
        }),
        ..EngineConfig::default()
    };
    let mut e = Engine::new(config);
    let objects = [
        Event::ResourceFlavorUpserted(obj("metadata: {name: default}\nspec: {}")),
        Event::ClusterQueueUpserted(obj(
            "metadata: {name: cq}\nspec: {namespaceSelector: {}, queueingStrategy: StrictFIFO, \
             admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}, resourceGroups: \
             [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 8}]}]}]}",
        )),
        Event::LocalQueueUpserted(obj(
            "metadata: {name: a, namespace: ns}\nspec: {clusterQueue: cq}",
        )),
        Event::LocalQueueUpserted(obj(
            "metadata: {name: b, namespace: ns}\nspec: {clusterQueue: cq}\nstatus: {fairSharing: \
             {admissionFairSharingStatus: {consumedResources: {cpu: \"8\"}, lastUpdate: \"2026-01-01T00:00:00Z\"}}}",
        )),
    ];
    for ev in objects {
        e.apply(0, ev).unwrap();
    }
    e
}

/// Under StrictFIFO a blocked head holds its whole ClusterQueue, and which LocalQueue's
/// workload is the head changes with the decaying usage alone. The engine asks to wake at
/// each sampling while that can happen, and admits the small workload at the first
/// sampling where its LocalQueue has become the less used one (16 s: lq a approaches the
/// 4 cpu it runs, lq b's 8 cpu of history halves every 10 s).
#[test]
fn admission_fair_sharing_wakes_at_the_sampling_that_changes_the_head() {
    let mut e = afs_engine(true);
    e.apply(0, wl("run", "a", "4", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(0)), vec!["run"]);
    assert_eq!(e.next_wakeup(), None, "nothing waits: no sampling matters");
    e.apply(10, wl("a-big", "a", "6", 0)).unwrap();
    e.apply(10, wl("b-small", "b", "2", 0)).unwrap();
    assert!(
        admitted(&e.schedule(10)).is_empty(),
        "a-big is the head, and blocks"
    );
    let mut admitted_at = None;
    while let Some(t) = e.next_wakeup() {
        assert!(t <= 60_000, "woke up too late");
        if !admitted(&e.schedule(t)).is_empty() {
            admitted_at = Some(t);
            break;
        }
    }
    assert_eq!(admitted_at, Some(16_000));
    let a = e.local_queue_usage("ns", "a").expect("lq a has a history");
    let b = e.local_queue_usage("ns", "b").expect("lq b has a history");
    // lq a: its entry penalty, then 16 samplings towards the 4 cpu it runs; lq b: its
    // 8 cpu halved 1.6 times, plus b-small's entry penalty.
    let penalty = 1.0 - 0.5f64.powf(0.1);
    let decayed = 0.5f64.powf(1.6);
    assert!((a.consumed["cpu"] - (4.0 - (4.0 - 4.0 * penalty) * decayed)).abs() < 1e-9);
    assert!((b.consumed["cpu"] - (8.0 * decayed + 2.0 * penalty)).abs() < 1e-9);
    // Once both LocalQueues' heads are gone or alone, no sampling matters any more.
    e.apply(
        16_000,
        Event::WorkloadDeleted(WorkloadKey::new("ns", "a-big")),
    )
    .unwrap();
    e.schedule(16_000);
    assert_eq!(e.next_wakeup(), None);
}

/// Without the configuration the same ClusterQueue ignores usage: FIFO, no wake-ups.
#[test]
fn without_admission_fair_sharing_the_queue_is_plain_fifo_and_never_wakes() {
    let mut e = afs_engine(false);
    e.apply(0, wl("run", "a", "4", 0)).unwrap();
    e.schedule(0);
    e.apply(10, wl("b-old", "b", "6", 0)).unwrap();
    e.apply(20, wl("a-small", "a", "2", 0)).unwrap();
    assert!(
        admitted(&e.schedule(20)).is_empty(),
        "b-old is the head, and blocks"
    );
    assert_eq!(e.next_wakeup(), None);
    assert_eq!(e.local_queue_usage("ns", "a"), None);
}

/// A restart: the engine is rebuilt from the API server, where a LocalQueue's status
/// carries its history. The rebuilt engine orders heads as the old one would have.
#[test]
fn a_restart_keeps_the_usage_history_from_the_local_queue_status() {
    let mut e = afs_engine(true);
    // lq b's 8 cpu of history (from its status) puts lq a first, although b's is older.
    e.apply(0, wl("b-old", "b", "8", 0)).unwrap();
    e.apply(1, wl("a-new", "a", "8", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(1)), vec!["a-new"]);
}

/// An admission whose write never lands is retried; its entry penalty comes off again,
/// so the retries do not pile up usage on its LocalQueue.
#[test]
fn a_failed_admission_takes_its_entry_penalty_back() {
    let mut e = afs_engine(true);
    e.apply(0, wl("run", "a", "4", 0)).unwrap();
    assert_eq!(admitted(&e.schedule(0)), vec!["run"]);
    let first = e.local_queue_usage("ns", "a").expect("history").consumed["cpu"];
    for _ in 0..3 {
        e.apply(0, Event::AdmissionFailed(WorkloadKey::new("ns", "run")))
            .unwrap();
        assert_eq!(admitted(&e.schedule(0)), vec!["run"]);
    }
    let again = e.local_queue_usage("ns", "a").expect("history").consumed["cpu"];
    assert!((again - first).abs() < 1e-9, "{first} then {again}");
}
