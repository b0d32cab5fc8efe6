//! Node events: applying Node and external-usage changes to the inventory, and
//! retrying only the parked workloads those changes can help.
//!
//! Kubelets report every few seconds, so most Node updates change nothing the
//! engine reads. Those cost one comparison. A real change touches only the TAS
//! flavors whose nodes changed: their domain trees are rebuilt at the next cycle,
//! and only ClusterQueues offering one of those flavors look at their parked
//! workloads again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::state::{Engine, EngineError, InvalidObject};
use crate::api;

impl Engine {
    pub(crate) fn node_upserted(&mut self, node: &Node) -> Result<(), EngineError> {
        let change = self
            .inventory
            .upsert_node(&mut self.names, node)
            .map_err(|e| EngineError::Invalid {
                kind: "Node",
                name: node.metadata.name.clone().unwrap_or_default(),
                source: e.into(),
            })?;
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if self.non_tas.has_node(name) {
            // Pods bound to it were seen before the node itself.
            self.push_non_tas_usage(name)?;
        }
        self.evict_owners(change.lost, "the node became unschedulable or not ready");
        if change.flavors.is_empty() {
            return Ok(());
        }
        if !self.unresolved_restores.is_empty() {
            self.resolve_restores();
        }
        self.revive_flavors(&change.flavors);
        Ok(())
    }

    pub(crate) fn node_deleted(&mut self, name: &str) {
        let change = self.inventory.remove_node(name);
        self.evict_owners(change.lost, &format!("node {name} was removed"));
        self.revive_flavors(&change.flavors);
    }

    pub(crate) fn node_external_usage(
        &mut self,
        node: &str,
        usage: &BTreeMap<String, Quantity>,
    ) -> Result<(), EngineError> {
        let invalid = |source: InvalidObject| EngineError::Invalid {
            kind: "Node",
            name: node.to_string(),
            source,
        };
        let mut milli = BTreeMap::new();
        for (k, q) in usage {
            let v = api::quantity::resource_value(k, q).map_err(|source| {
                invalid(InvalidObject::Usage {
                    resource: k.clone(),
                    source,
                })
            })?;
            milli.insert(k.clone(), v);
        }
        let flavors = self
            .inventory
            .set_external_usage(&mut self.names, node, &milli)
            .map_err(|e| invalid(e.into()))?;
        self.revive_flavors(&flavors);
        Ok(())
    }

    /// Retries the parked workloads of every ClusterQueue offering one of `flavors`:
    /// their nodes changed, so a placement that failed may succeed now. Other
    /// ClusterQueues' answers cannot have changed.
    pub(super) fn revive_flavors(&mut self, flavors: &[String]) {
        if flavors.is_empty() {
            return;
        }
        // Flavor searches resume past flavors that did not fit; start over.
        self.quota_gen += 1;
        for c in &mut self.cqs {
            if c.spec.flavor_names.iter().any(|f| flavors.contains(f)) {
                c.queue.revive();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, Engine, Event, PendingReason, WorkloadKey, WorkloadState};

    fn obj<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_norway::from_str(yaml).expect("test fixture is valid")
    }

    /// Two pools, each with its own Topology, TAS flavor, ClusterQueue and one 4-GPU node.
    fn two_pools() -> Engine {
        let mut e = Engine::default();
        for p in ["a", "b"] {
            let events = [
                Event::TopologyUpserted(obj(&format!(
                    "metadata: {{name: topo-{p}}}\nspec:\n  levels:\n  - nodeLabel: rack\n  - nodeLabel: kubernetes.io/hostname"
                ))),
                Event::ResourceFlavorUpserted(obj(&format!(
                    "metadata: {{name: pool-{p}}}\nspec: {{nodeLabels: {{pool: {p}}}, topologyName: topo-{p}}}"
                ))),
                Event::ClusterQueueUpserted(obj(&format!(
                    r#"
metadata: {{name: cq-{p}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{{name: pool-{p}, resources: [{{name: nvidia.com/gpu, nominalQuota: "100"}}]}}]
"#
                ))),
                Event::LocalQueueUpserted(obj(&format!(
                    "metadata: {{name: lq-{p}, namespace: ns}}\nspec: {{clusterQueue: cq-{p}}}"
                ))),
                node(p, 4, "2026-01-01T00:00:00Z"),
            ];
            for ev in events {
                e.apply(0, ev).expect("fixture applies");
            }
        }
        e
    }

    /// Node `node-{pool}` with `gpus` allocatable, as a kubelet reporting at `heartbeat`.
    fn node(pool: &str, gpus: i64, heartbeat: &str) -> Event {
        named_node(&format!("node-{pool}"), pool, gpus, heartbeat)
    }

    fn named_node(name: &str, pool: &str, gpus: i64, heartbeat: &str) -> Event {
        Event::NodeUpserted(obj(&format!(
            r#"
metadata:
  name: {name}
  labels: {{pool: {pool}, rack: r1, kubernetes.io/hostname: {name}}}
status:
  allocatable: {{nvidia.com/gpu: "{gpus}", pods: "110"}}
  conditions: [{{type: Ready, status: "True", lastHeartbeatTime: "{heartbeat}"}}]
"#
        )))
    }

    /// A one-pod workload in pool `pool` that needs `gpus` GPUs on one node.
    fn gpu_job(name: &str, pool: &str, gpus: i64) -> Event {
        Event::WorkloadUpserted(obj(&format!(
            r#"
metadata: {{name: {name}, namespace: ns}}
spec:
  queueName: lq-{pool}
  podSets:
  - name: main
    count: 1
    topologyRequest: {{required: kubernetes.io/hostname}}
    template:
      spec:
        containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}}}]
"#
        )))
    }

    /// Parked (inadmissible) workloads per ClusterQueue, as the metrics report them.
    fn parked(e: &Engine) -> Vec<(String, usize)> {
        e.snapshot()
            .cluster_queues
            .iter()
            .map(|c| (c.name.clone(), c.pending_inadmissible))
            .collect()
    }

    fn pending_message(e: &Engine, name: &str) -> String {
        match e.workload_state(&WorkloadKey::new("ns", name)) {
            Some(WorkloadState::Pending { reason, message }) => {
                assert_eq!(reason, PendingReason::TopologyPlacementFailed, "{message}");
                message
            }
            other => panic!("{name} should be pending, is {other:?}"),
        }
    }

    /// Both pools hold one parked 8-GPU workload that no 4-GPU node can take.
    fn with_parked_jobs() -> Engine {
        let mut e = two_pools();
        e.apply(1, gpu_job("big-a", "a", 8)).unwrap();
        e.apply(1, gpu_job("big-b", "b", 8)).unwrap();
        let d = e.schedule(2);
        assert!(
            !d.iter().any(|d| matches!(d, Decision::Admit { .. })),
            "{d:?}"
        );
        assert_eq!(parked(&e), [("cq-a".into(), 1), ("cq-b".into(), 1)]);
        e
    }

    #[test]
    fn unchanged_node_heartbeats_rebuild_nothing_and_retry_nothing() {
        let mut e = with_parked_jobs();
        let message = pending_message(&e, "big-a");
        let built = e.inventory().trees_built();
        for i in 0..100 {
            let at = format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
            e.apply(3, node("a", 4, &at)).unwrap();
            e.apply(3, node("b", 4, &at)).unwrap();
        }
        // Still parked: a heartbeat cannot make an 8-GPU pod fit on a 4-GPU node.
        assert_eq!(parked(&e), [("cq-a".into(), 1), ("cq-b".into(), 1)]);
        assert_eq!(e.schedule(4), vec![]);
        assert_eq!(e.inventory().trees_built(), built);
        assert_eq!(pending_message(&e, "big-a"), message);
    }

    #[test]
    fn more_allocatable_on_one_node_admits_its_parked_workload_only() {
        let mut e = with_parked_jobs();
        let built = e.inventory().trees_built();
        let message_b = pending_message(&e, "big-b");
        e.apply(3, node("a", 8, "2026-01-01T00:01:00Z")).unwrap();
        // Pool b's workload is not retried: nothing about its nodes changed.
        assert_eq!(parked(&e), [("cq-a".into(), 0), ("cq-b".into(), 1)]);
        let d = e.schedule(4);
        let admitted: Vec<&str> = d
            .iter()
            .filter_map(|d| match d {
                Decision::Admit { workload, .. } => Some(&*workload.name),
                _ => None,
            })
            .collect();
        assert_eq!(admitted, ["big-a"]);
        let placed = e.placement(&WorkloadKey::new("ns", "big-a")).unwrap();
        assert_eq!(placed[0].nodes, [("node-a".to_string(), 1)]);
        // Only pool a's tree was rebuilt; pool b's domains were left alone.
        assert_eq!(e.inventory().trees_built(), built + 1);
        assert_eq!(pending_message(&e, "big-b"), message_b);
    }

    fn admitted_on(d: &[Decision], e: &Engine) -> Vec<(String, Vec<(String, i32)>)> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Admit { workload, .. } => {
                    let placed = e.placement(workload).expect("placed");
                    Some((workload.name.to_string(), placed[0].nodes.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// A node gaining GPUs within the range its tree already covers keeps its leaf: the
    /// leaf and its ancestors are updated in place, and the result is the one a rebuilt
    /// tree gives.
    #[test]
    fn an_allocatable_change_within_range_updates_the_domains_in_place() {
        let events = |gpus_a: i64| {
            vec![
                named_node("node-a2", "a", 8, "2026-01-01T00:00:00Z"),
                gpu_job("fill", "a", 8),
                gpu_job("six", "a", 6),
                node("a", gpus_a, "2026-01-01T00:01:00Z"),
            ]
        };
        let mut e = two_pools();
        // node-a (4 GPUs, from two_pools) grows to 6 in the last event.
        let mut evs = events(6);
        let grow = evs.pop().expect("last");
        for ev in evs {
            e.apply(1, ev).unwrap();
        }
        let first = e.schedule(2);
        assert_eq!(
            admitted_on(&first, &e),
            [("fill".into(), vec![("node-a2".into(), 1)])]
        );
        let built = e.inventory().trees_built();
        let grow_to = |gpus| named_node("node-a", "a", gpus, "2026-01-01T00:01:00Z");
        // Shrinking first: less room retries nothing and rebuilds nothing.
        e.apply(3, grow_to(3)).unwrap();
        assert_eq!(e.schedule(3), vec![]);
        e.apply(3, grow).unwrap();
        let second = e.schedule(4);
        assert_eq!(
            admitted_on(&second, &e),
            [("six".into(), vec![("node-a".into(), 1)])]
        );
        assert_eq!(e.inventory().trees_built(), built, "no tree was rebuilt");

        // The same cluster seen fresh (node-a at 6 GPUs from the start) places alike.
        let mut fresh = two_pools();
        for ev in events(6) {
            fresh.apply(1, ev).unwrap();
        }
        let d = fresh.schedule(2);
        let mut placed = admitted_on(&d, &fresh);
        placed.sort();
        assert_eq!(
            placed,
            [
                ("fill".to_string(), vec![("node-a2".to_string(), 1)]),
                ("six".to_string(), vec![("node-a".to_string(), 1)])
            ]
        );

        // The only node at the top of the range shrinking changes the range: rebuilt.
        e.apply(5, named_node("node-a2", "a", 7, "2026-01-01T00:02:00Z"))
            .unwrap();
        let _ = e.schedule(5);
        assert_eq!(e.inventory().trees_built(), built + 1);
    }

    #[test]
    fn external_usage_retries_only_when_it_changes() {
        let mut e = two_pools();
        let usage = |gpus: &str| Event::NodeExternalUsage {
            node: "node-a".into(),
            usage: [("nvidia.com/gpu".to_string(), obj(&format!("\"{gpus}\"")))].into(),
        };
        e.apply(1, usage("2")).unwrap();
        e.apply(1, gpu_job("half-a", "a", 4)).unwrap();
        e.apply(1, gpu_job("half-b", "b", 8)).unwrap();
        e.schedule(2);
        assert_eq!(parked(&e), [("cq-a".into(), 1), ("cq-b".into(), 1)]);
        e.apply(3, usage("2")).unwrap();
        assert_eq!(parked(&e), [("cq-a".into(), 1), ("cq-b".into(), 1)]);
        e.apply(3, usage("0")).unwrap();
        assert_eq!(parked(&e), [("cq-a".into(), 0), ("cq-b".into(), 1)]);
        let d = e.schedule(4);
        assert!(
            d.iter().any(
                |d| matches!(d, Decision::Admit { workload, .. } if &*workload.name == "half-a")
            ),
            "{d:?}"
        );
    }

    #[test]
    fn bad_allocatable_names_the_node_and_the_field() {
        let mut e = two_pools();
        let bad: Event = Event::NodeUpserted(obj(
            "metadata: {name: broken}\nstatus: {allocatable: {nvidia.com/gpu: \"four\"}}",
        ));
        let err = e.apply(1, bad).unwrap_err().to_string();
        assert!(
            err.contains("broken") && err.contains("status.allocatable[nvidia.com/gpu]"),
            "{err}"
        );
    }

    /// A pod kuota does not manage, bound to `node-a`, asking for `gpus` GPUs.
    fn unmanaged_pod(name: &str, gpus: i64, phase: &str, annotations: &str) -> Event {
        Event::PodUpserted(Box::new(obj(&format!(
            r#"
metadata: {{name: {name}, namespace: other, annotations: {{{annotations}}}}}
spec:
  nodeName: node-a
  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}}}]
status: {{phase: {phase}}}
"#
        ))))
    }

    fn admitted(d: &[Decision]) -> Vec<String> {
        d.iter()
            .filter_map(|d| match d {
                Decision::Admit { workload, .. } => Some(workload.name.to_string()),
                _ => None,
            })
            .collect()
    }

    const TAS_POD: &str = "kueue.x-k8s.io/podset-required-topology: rack";

    #[test]
    fn an_unmanaged_bound_pod_takes_room_until_it_finishes() {
        let mut e = two_pools();
        e.apply(0, unmanaged_pod("web", 3, "Running", "")).unwrap();
        // A TAS pod is not counted: its Workload's placement holds its room already.
        e.apply(0, unmanaged_pod("tas-pod", 4, "Running", TAS_POD))
            .unwrap();
        e.apply(1, gpu_job("two", "a", 2)).unwrap();
        assert!(admitted(&e.schedule(2)).is_empty(), "3 of 4 GPUs are taken");
        e.apply(3, unmanaged_pod("web", 3, "Succeeded", ""))
            .unwrap();
        assert_eq!(admitted(&e.schedule(4)), ["two"]);
    }

    #[test]
    fn a_pod_seen_before_its_node_counts_once_the_node_arrives_and_not_after_it_goes() {
        let mut e = two_pools();
        e.apply(0, Event::NodeDeleted("node-a".into())).unwrap();
        e.apply(1, unmanaged_pod("web", 3, "Running", "")).unwrap();
        e.apply(2, node("a", 4, "2026-01-01T00:00:00Z")).unwrap();
        e.apply(3, gpu_job("two", "a", 2)).unwrap();
        assert!(admitted(&e.schedule(4)).is_empty(), "applied on arrival");
        let gone = Event::PodDeleted {
            namespace: "other".into(),
            name: "web".into(),
        };
        e.apply(5, gone).unwrap();
        assert_eq!(admitted(&e.schedule(6)), ["two"]);
    }
}
