use super::*;
use crate::api::selector::Labels;
use crate::webhook::index::IndexConfig;

fn dynamic(v: serde_json::Value) -> DynamicObject {
    serde_json::from_value(v).expect("dynamic object")
}

fn ns(name: &str, labels: &[(&str, &str)]) -> DynamicObject {
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    dynamic(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}
    }))
}

fn lq(ns: &str, name: &str, cq: &str) -> DynamicObject {
    dynamic(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": ns, "name": name}, "spec": {"clusterQueue": cq}
    }))
}

fn pc(name: &str, value: i32) -> DynamicObject {
    dynamic(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": name}, "value": value
    }))
}

/// Drives one kind's feed with synthetic watcher events, as `run` does.
struct Driver<'a> {
    index: &'a ClusterIndex,
    health: WatchHealth,
    feed: KindFeed,
    relist: Relist,
}

impl<'a> Driver<'a> {
    fn new(index: &'a ClusterIndex, kind: IndexKind) -> Self {
        let feed = feeds()
            .into_iter()
            .find(|f| f.kind == kind)
            .expect("a feed per kind");
        Self {
            index,
            health: WatchHealth::default(),
            feed,
            relist: Relist::new(kind),
        }
    }

    /// Returns true when the event completed a list.
    fn send(&mut self, event: Event<DynamicObject>) -> bool {
        let Some(event) = self.feed.convert(event, &self.health) else {
            return false;
        };
        match self.relist.step(event) {
            Some((e, done)) => {
                self.index.apply(e);
                done
            }
            None => false,
        }
    }
}

#[test]
fn lookups_answer_from_the_old_complete_set_until_a_relist_is_complete() {
    let index = ClusterIndex::new(IndexConfig {
        managed_jobs_namespace_selector: None,
    });
    let mut namespaces = Driver::new(&index, IndexKind::Namespace);
    let mut queues = Driver::new(&index, IndexKind::LocalQueue);
    let mut classes = Driver::new(&index, IndexKind::PriorityClass);
    for d in [&mut namespaces, &mut queues, &mut classes] {
        assert!(!d.send(Event::Init));
    }
    namespaces.send(Event::InitApply(ns("team", &[("gpu-policy", "strict")])));
    queues.send(Event::InitApply(lq("team", "default", "cq-a")));
    classes.send(Event::InitApply(pc("default", 100)));
    // Nothing shows before the list is complete.
    assert!(!index.has_default_local_queue("team"));
    assert!(namespaces.send(Event::InitDone));
    assert!(queues.send(Event::InitDone));
    assert!(classes.send(Event::InitDone));
    assert!(index.has_default_local_queue("team"));
    assert!(index.has_default_priority_class());
    assert_eq!(
        index
            .namespace_labels("team")
            .get("gpu-policy")
            .map(String::as_str),
        Some("strict")
    );

    // The watches break and re-list. Meanwhile every answer is the old one: the policy
    // selector still sees the namespace's labels, the default LocalQueue and the default
    // priority class still exist.
    for d in [&mut namespaces, &mut queues, &mut classes] {
        d.send(Event::Init);
    }
    namespaces.send(Event::InitApply(ns("other", &[])));
    queues.send(Event::InitApply(lq("other", "default", "cq-b")));
    for _ in 0..2 {
        assert!(index.has_default_local_queue("team"), "old LocalQueue kept");
        assert!(!index.has_default_local_queue("other"), "new one not yet");
        assert!(index.has_default_priority_class(), "old class kept");
        assert_eq!(
            index
                .namespace_labels("team")
                .get("gpu-policy")
                .map(String::as_str),
            Some("strict"),
            "old namespace labels kept"
        );
    }
    // The re-lists complete without the objects deleted while the watches were down.
    assert!(namespaces.send(Event::InitDone));
    assert!(queues.send(Event::InitDone));
    assert!(classes.send(Event::InitDone));
    assert!(!index.has_default_local_queue("team"));
    assert!(index.has_default_local_queue("other"));
    assert!(!index.has_default_priority_class());
    assert!(index.namespace_labels("team").get("gpu-policy").is_none());

    // Plain watch events apply at once.
    queues.send(Event::Delete(lq("other", "default", "cq-b")));
    assert!(!index.local_queue_exists("other", "default"));
    classes.send(Event::Apply(pc("default", 5)));
    assert_eq!(index.priority_class_value("default"), Some(5));
}

#[test]
fn an_undecodable_object_is_named_with_its_field_and_left_out() {
    let index = ClusterIndex::default();
    let mut queues = Driver::new(&index, IndexKind::LocalQueue);
    queues.send(Event::Init);
    queues.send(Event::InitApply(lq("team", "default", "cq-a")));
    queues.send(Event::InitApply(dynamic(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": "team", "name": "bad"}, "spec": {"clusterQueue": 7}
    }))));
    assert!(queues.send(Event::InitDone));
    assert!(
        index.local_queue_exists("team", "default"),
        "the rest of the list"
    );
    assert!(!index.local_queue_exists("team", "bad"));
    let listed = queues.health.undecodable();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].starts_with("LocalQueue team/bad skipped: spec.clusterQueue: invalid type"),
        "{listed:?}"
    );
    // Fixed by its owner: gone from the report, present in the index.
    queues.send(Event::Apply(lq("team", "bad", "cq-b")));
    assert!(queues.health.undecodable().is_empty());
    assert_eq!(
        index.cluster_queue_of("team", "bad").as_deref(),
        Some("cq-b")
    );
}

#[test]
fn namespace_labels_reach_the_index() {
    let index = ClusterIndex::new(IndexConfig::default());
    let mut namespaces = Driver::new(&index, IndexKind::Namespace);
    namespaces.send(Event::Apply(ns(
        "kube-system",
        &[("kubernetes.io/metadata.name", "kube-system")],
    )));
    namespaces.send(Event::Apply(ns(
        "team",
        &[("kubernetes.io/metadata.name", "team")],
    )));
    // Kueue's default managedJobsNamespaceSelector leaves kube-system alone.
    assert!(!index.is_namespace_managed("kube-system"));
    assert!(index.is_namespace_managed("team"));
}

#[test]
fn a_relist_failing_halfway_keeps_the_old_set_and_turns_unhealthy() {
    let index = Arc::new(ClusterIndex::default());
    let health = Arc::new(WatchHealth::default());
    let feed = feeds()
        .into_iter()
        .find(|f| f.kind == IndexKind::LocalQueue)
        .expect("LocalQueue feed");
    let mut watch = KindWatch {
        feed,
        relist: Relist::new(IndexKind::LocalQueue),
        index: index.clone(),
        health: health.clone(),
    };
    let t0 = Instant::now();
    assert!(!watch.handle(Ok(Event::Init), t0));
    assert!(!watch.handle(Ok(Event::InitApply(lq("team", "default", "cq-a"))), t0));
    assert!(watch.handle(Ok(Event::InitDone), t0));
    assert!(index.has_default_local_queue("team"));
    // The watch breaks; every re-list gets one object in, then fails. kube-rs starts each
    // attempt with Init, which must not count as a working watch.
    for i in 0..3u64 {
        let at = t0 + std::time::Duration::from_secs(i + 1);
        assert!(!watch.handle(Ok(Event::Init), at));
        watch.handle(Ok(Event::InitApply(lq("other", "default", "cq-b"))), at);
        watch.handle(Err(watcher::Error::NoResourceVersion), at);
        assert!(index.has_default_local_queue("team"), "old set kept");
        assert!(
            !index.has_default_local_queue("other"),
            "partial list not shown"
        );
    }
    let failing = health.failing(t0 + std::time::Duration::from_secs(4));
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert!(failing[0].starts_with("watch of LocalQueue keeps failing (3 errors in a row)"));
    // The next complete list replaces the set and the watch is healthy again.
    let at = t0 + std::time::Duration::from_secs(5);
    watch.handle(Ok(Event::Init), at);
    watch.handle(Ok(Event::InitApply(lq("other", "default", "cq-b"))), at);
    assert!(watch.handle(Ok(Event::InitDone), at));
    assert!(!index.has_default_local_queue("team"));
    assert!(index.has_default_local_queue("other"));
    assert!(health.failing(at).is_empty());
}

#[test]
fn a_field_from_a_newer_kueue_is_ignored_and_counted() {
    let before = crate::api::lenient::unknown_fields("LocalQueue");
    let obj = dynamic(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": "ns", "name": "q"},
        "spec": {"clusterQueue": "cq", "aFutureKnob": {"on": true}},
        "status": {"aFutureCount": 3}
    }));
    let lq: LocalQueue = decode(IndexKind::LocalQueue, obj).expect("decodes leniently");
    assert_eq!(lq.spec.cluster_queue, "cq");
    assert_eq!(
        crate::api::lenient::unknown_fields("LocalQueue") - before,
        2
    );
    // A known field of the wrong type still names the object and the field.
    let bad = dynamic(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"namespace": "ns", "name": "q"}, "spec": {"clusterQueue": 7}
    }));
    let e = decode::<LocalQueue>(IndexKind::LocalQueue, bad).expect_err("wrong type");
    assert!(
        e.to_string()
            .starts_with("LocalQueue ns/q: spec.clusterQueue: invalid type"),
        "{e}"
    );
}
