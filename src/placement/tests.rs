//! Allocator tests on small, hand-built clusters (Kueue's documented TAS cases
//! and kuota's own). Larger cases live in the scenario suite.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::*;
use crate::api;
use crate::names::Names;

const GPU: &str = "nvidia.com/gpu";

fn node(name: &str, block: &str, rack: &str, gpus: i64) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": {
            "cloud/block": block, "cloud/rack": rack, "kubernetes.io/hostname": name } },
        "status": { "allocatable": { GPU: gpus.to_string(), "cpu": "64", "pods": "110" } }
    }))
    .expect("fixture")
}

fn cluster(nodes: &[(&str, &str, &str, i64)]) -> (Inventory, Names) {
    let mut inv = Inventory::default();
    let mut names = Names::default();
    let topo: api::Topology = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": { "name": "default" },
        "spec": { "levels": [ { "nodeLabel": "cloud/block" }, { "nodeLabel": "cloud/rack" }, { "nodeLabel": "kubernetes.io/hostname" } ] }
    }))
    .expect("fixture");
    inv.upsert_topology(&topo).expect("valid topology");
    let rf: api::ResourceFlavor = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": { "name": "tas" },
        "spec": { "topologyName": "default" }
    }))
    .expect("fixture");
    inv.set_flavor(&rf);
    for (n, b, r, g) in nodes {
        inv.upsert_node(&mut names, &node(n, b, r, *g))
            .expect("valid node");
    }
    inv.ensure_trees();
    (inv, names)
}

fn req(names: &mut Names, count: i32, gpus: i64, mode: TopologyMode) -> PodSetPlacementRequest {
    PodSetPlacementRequest {
        count,
        per_pod: vec![(names.resource(GPU), gpus)],
        mode,
        slice: None,
        tolerations: vec![],
        node_filter: NodeFilter::default(),
    }
}

fn placed(inv: &Inventory, nodes: &[(u32, i32)]) -> BTreeMap<String, i32> {
    nodes
        .iter()
        .map(|&(n, c)| (inv.node_name(n).to_string(), c))
        .collect()
}

/// Uses `used` GPUs on a node, as another workload would.
fn occupy(inv: &mut Inventory, names: &mut Names, owner: u32, node: &str, used: i64) {
    let idx = inv.node_idx(node).expect("node exists");
    inv.assign(owner, &[(names.resource(GPU), used)], &[(idx, 1)]);
}

#[test]
fn best_fit_puts_two_pods_on_the_node_with_exactly_two_free() {
    let (mut inv, mut names) = cluster(&[
        ("x1", "b1", "r1", 4),
        ("x2", "b1", "r1", 4),
        ("x3", "b1", "r1", 4),
    ]);
    occupy(&mut inv, &mut names, 100, "x2", 2);
    occupy(&mut inv, &mut names, 101, "x3", 3);
    let r = req(
        &mut names,
        2,
        1,
        TopologyMode::Required("kubernetes.io/hostname".into()),
    );
    let got = inv.find(&names, "tas", &r, Strategy::Kuota).expect("fits");
    assert_eq!(placed(&inv, &got), BTreeMap::from([("x2".to_string(), 2)]));
}

#[test]
fn required_block_picks_the_rack_needing_fewest_nodes() {
    let (inv, mut names) = cluster(&[
        ("a1", "b1", "r1", 1),
        ("a2", "b1", "r1", 1),
        ("a3", "b1", "r1", 1),
        ("c1", "b1", "r2", 4),
    ]);
    let r = req(
        &mut names,
        3,
        1,
        TopologyMode::Required("cloud/block".into()),
    );
    let got = inv.find(&names, "tas", &r, Strategy::Kuota).expect("fits");
    assert_eq!(placed(&inv, &got), BTreeMap::from([("c1".to_string(), 3)]));
}

#[test]
fn required_rack_that_cannot_fit_says_how_much_does() {
    let (inv, mut names) = cluster(&[
        ("a1", "b1", "r1", 1),
        ("a2", "b1", "r1", 2),
        ("c1", "b1", "r2", 1),
    ]);
    let r = req(
        &mut names,
        4,
        1,
        TopologyMode::Required("cloud/rack".into()),
    );
    let err = inv
        .find(&names, "tas", &r, Strategy::Kuota)
        .expect_err("no rack has 4");
    assert!(
        err.message.contains("allows to fit only 3 out of 4 pod(s)"),
        "{}",
        err.message
    );
    assert!(
        err.message
            .contains("the largest free cloud/rack has 3 of the 4 nvidia.com/gpu needed"),
        "{}",
        err.message
    );
}

#[test]
fn preferred_spills_to_a_second_block() {
    let (inv, mut names) = cluster(&[("a1", "b1", "r1", 2), ("c1", "b2", "r2", 2)]);
    let r = req(
        &mut names,
        4,
        1,
        TopologyMode::Preferred("cloud/block".into()),
    );
    let got = inv
        .find(&names, "tas", &r, Strategy::Kuota)
        .expect("fits across blocks");
    assert_eq!(
        placed(&inv, &got),
        BTreeMap::from([("a1".to_string(), 2), ("c1".to_string(), 2)])
    );
    let strict = req(
        &mut names,
        4,
        1,
        TopologyMode::Required("cloud/block".into()),
    );
    assert!(inv.find(&names, "tas", &strict, Strategy::Kuota).is_err());
}

#[test]
fn spread_puts_every_pod_in_a_different_rack() {
    let (inv, mut names) = cluster(&[
        ("a1", "b1", "r1", 8),
        ("b1", "b1", "r2", 8),
        ("c1", "b1", "r3", 8),
    ]);
    let r = req(
        &mut names,
        3,
        1,
        TopologyMode::Spread {
            level: "cloud/rack".into(),
            within: None,
        },
    );
    let got = inv
        .find(&names, "tas", &r, Strategy::Kuota)
        .expect("three racks");
    assert_eq!(got.len(), 3);
    let four = req(
        &mut names,
        4,
        1,
        TopologyMode::Spread {
            level: "cloud/rack".into(),
            within: None,
        },
    );
    let err = inv
        .find(&names, "tas", &four, Strategy::Kuota)
        .expect_err("only three racks");
    assert!(err.message.contains("only 3"), "{}", err.message);
}

#[test]
fn small_jobs_go_to_fragmented_racks_and_keep_whole_nodes_free() {
    // r0 is one whole free node; r1 has the same 8 free GPUs spread over two used nodes.
    let (mut inv, mut names) = cluster(&[
        ("w1", "b1", "r0", 8),
        ("f1", "b1", "r1", 8),
        ("f2", "b1", "r1", 8),
    ]);
    occupy(&mut inv, &mut names, 100, "f1", 4);
    occupy(&mut inv, &mut names, 101, "f2", 4);
    let r = req(
        &mut names,
        1,
        2,
        TopologyMode::Required("cloud/rack".into()),
    );
    let kuota = inv.find(&names, "tas", &r, Strategy::Kuota).expect("fits");
    assert!(
        placed(&inv, &kuota).keys().all(|n| n.starts_with('f')),
        "kuota keeps the whole node: {kuota:?}"
    );
    // Kueue's best fit sees two equal racks and takes the first, breaking the whole node.
    let kueue = inv
        .find(&names, "tas", &r, Strategy::KueueBestFit)
        .expect("fits");
    assert_eq!(
        placed(&inv, &kueue),
        BTreeMap::from([("w1".to_string(), 1)])
    );
}

#[test]
fn assign_then_release_restores_every_aggregate() {
    let (mut inv, mut names) = cluster(&[
        ("a1", "b1", "r1", 8),
        ("a2", "b1", "r1", 8),
        ("c1", "b2", "r2", 8),
    ]);
    let before = format!("{:?}", inv.trees);
    let r = req(
        &mut names,
        3,
        4,
        TopologyMode::Required("cloud/block".into()),
    );
    let got = inv.find(&names, "tas", &r, Strategy::Kuota).expect("fits");
    inv.assign(7, &r.per_pod, &got);
    assert_ne!(format!("{:?}", inv.trees), before);
    inv.release(7);
    assert_eq!(format!("{:?}", inv.trees), before);
}

#[test]
fn never_double_books_a_node() {
    let (mut inv, mut names) = cluster(&[("a1", "b1", "r1", 8)]);
    let r = req(&mut names, 1, 8, TopologyMode::Unconstrained);
    let got = inv.find(&names, "tas", &r, Strategy::Kuota).expect("fits");
    inv.assign(1, &r.per_pod, &[(got[0].0, 1)]);
    assert!(inv.find(&names, "tas", &r, Strategy::Kuota).is_err());
}

#[test]
fn bad_topologies_are_rejected_with_the_field() {
    let dup = validate_levels("t", &["rack".into(), "rack".into()]).expect_err("duplicate");
    assert_eq!(
        dup.to_string(),
        "Topology t: spec.levels[1].nodeLabel: Duplicate value: \"rack\""
    );
    let host = validate_levels("t", &["kubernetes.io/hostname".into(), "rack".into()])
        .expect_err("hostname first");
    let host = host.to_string();
    assert!(host.contains("must be the lowest level"), "{host}");
}

#[test]
fn nodes_without_level_labels_are_named_in_failures() {
    let (mut inv, mut names) = cluster(&[("a1", "b1", "r1", 1)]);
    let unlabeled: Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "stray", "labels": { "kubernetes.io/hostname": "stray" } },
        "status": { "allocatable": { GPU: "8" } }
    }))
    .expect("fixture");
    inv.upsert_node(&mut names, &unlabeled).expect("accepted");
    inv.ensure_trees();
    let r = req(&mut names, 2, 1, TopologyMode::Unconstrained);
    let err = inv
        .find(&names, "tas", &r, Strategy::Kuota)
        .expect_err("stray is not usable");
    assert!(
        err.message.contains("node stray has no label cloud/block"),
        "{}",
        err.message
    );
}

#[test]
fn a_bad_allocatable_quantity_names_the_node_and_keeps_the_parse_error() {
    let (mut inv, mut names) = cluster(&[("a1", "b1", "r1", 1)]);
    let bad: Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "odd", "labels": { "kubernetes.io/hostname": "odd" } },
        "status": { "allocatable": { GPU: "eight" } }
    }))
    .expect("fixture");
    let err = inv
        .upsert_node(&mut names, &bad)
        .expect_err("not a quantity");
    assert!(
        err.to_string().starts_with(
            "Node odd: status.allocatable[nvidia.com/gpu]: invalid quantity \"eight\""
        ),
        "{err}"
    );
    let source = std::error::Error::source(&err).expect("the quantity error is kept");
    assert!(
        matches!(
            source.downcast_ref::<crate::api::quantity::QuantityError>(),
            Some(crate::api::quantity::QuantityError::Format(q)) if q == "eight"
        ),
        "{source:?}"
    );
}

/// Adds `key=value` to a node's labels, as `kubectl label` would.
fn add_label(inv: &mut Inventory, names: &mut Names, n: (&str, &str, &str, i64), kv: (&str, &str)) {
    let mut node = node(n.0, n.1, n.2, n.3);
    node.metadata
        .labels
        .get_or_insert_default()
        .insert(kv.0.into(), kv.1.into());
    inv.upsert_node(names, &node).expect("valid node");
    inv.ensure_trees();
}

fn selector_filter(key: &str, value: &str) -> NodeFilter {
    NodeFilter {
        node_selector: BTreeMap::from([(key.to_string(), value.to_string())]),
        required_terms: vec![],
    }
}

#[test]
fn the_pods_node_selector_keeps_them_on_matching_nodes_under_every_strategy() {
    let nodes = [
        ("a1", "b1", "r1", 8),
        ("a2", "b1", "r1", 8),
        ("c1", "b1", "r2", 8),
        ("c2", "b1", "r2", 8),
    ];
    let (mut inv, mut names) = cluster(&nodes);
    for n in &nodes[2..] {
        add_label(&mut inv, &mut names, *n, ("pool", "spot"));
    }
    let mut r = req(
        &mut names,
        2,
        8,
        TopologyMode::Required("cloud/rack".into()),
    );
    let spot = BTreeMap::from([("c1".to_string(), 1), ("c2".to_string(), 1)]);
    for strategy in [Strategy::Kuota, Strategy::KueueBestFit, Strategy::FirstFit] {
        // Without the selector every strategy takes the first rack, so the selector
        // is what moves the pods.
        r.node_filter = NodeFilter::default();
        let free = inv.find(&names, "tas", &r, strategy).expect("fits");
        assert_ne!(placed(&inv, &free), spot, "{strategy:?}");
        r.node_filter = selector_filter("pool", "spot");
        let got = inv.find(&names, "tas", &r, strategy).expect("fits on spot");
        assert_eq!(placed(&inv, &got), spot, "{strategy:?}");
    }
    // A third pod has no spot node left: the failure says the selector is why.
    r.count = 3;
    let err = inv
        .find(&names, "tas", &r, Strategy::Kuota)
        .expect_err("only two spot nodes");
    assert!(
        err.message
            .contains("of the flavor's 4 node(s), the pod set's nodeSelector excludes 2"),
        "{}",
        err.message
    );
    let err = inv
        .find(&names, "tas", &r, Strategy::KueueBestFit)
        .expect_err("only two spot nodes");
    assert!(
        err.message.ends_with(
            "allows to fit only 2 out of 3 pod(s). Total nodes: 4; excluded: nodeSelector: 2"
        ),
        "{}",
        err.message
    );
}

#[test]
fn required_node_affinity_excludes_nodes_and_is_counted_apart_from_the_selector() {
    let nodes = [("a1", "b1", "r1", 8), ("c1", "b2", "r2", 8)];
    let (inv, mut names) = cluster(&nodes);
    let affinity: k8s_openapi::api::core::v1::NodeSelectorTerm =
        serde_json::from_value(serde_json::json!({
            "matchExpressions": [{ "key": "cloud/block", "operator": "NotIn", "values": ["b1"] }]
        }))
        .expect("fixture");
    let mut r = req(&mut names, 1, 8, TopologyMode::Unconstrained);
    r.node_filter.required_terms = vec![affinity];
    for strategy in [Strategy::Kuota, Strategy::KueueBestFit] {
        let got = inv.find(&names, "tas", &r, strategy).expect("fits on c1");
        assert_eq!(placed(&inv, &got), BTreeMap::from([("c1".to_string(), 1)]));
    }
    r.count = 2;
    let err = inv
        .find(&names, "tas", &r, Strategy::KueueBestFit)
        .expect_err("a1 is excluded");
    assert!(
        err.message
            .ends_with("Total nodes: 2; excluded: affinity: 1"),
        "{}",
        err.message
    );
}

#[test]
fn a_selector_the_flavor_labels_already_pin_costs_no_per_node_check() {
    let flavor = BTreeMap::from([("pool".to_string(), "gpu".to_string())]);
    let same = selector_filter("pool", "gpu").narrowed_to(&flavor);
    assert!(same.is_empty(), "{same:?}");
    let other = selector_filter("pool", "cpu").narrowed_to(&flavor);
    assert_eq!(other, selector_filter("pool", "cpu"));
    let term: k8s_openapi::api::core::v1::NodeSelectorTerm =
        serde_json::from_value(serde_json::json!({
            "matchExpressions": [{ "key": "pool", "operator": "In", "values": ["gpu", "tpu"] }]
        }))
        .expect("fixture");
    let by_affinity = NodeFilter {
        node_selector: BTreeMap::new(),
        required_terms: vec![term],
    };
    assert!(by_affinity.narrowed_to(&flavor).is_empty());
    // A selector every node of the tree happens to match excludes none: the search keeps
    // its histograms (no allowed-node list).
    let (inv, _) = cluster(&[("a1", "b1", "r1", 8), ("a2", "b1", "r2", 8)]);
    let tree = &inv.trees["tas"];
    let (allowed, counts) = inv.allowed_nodes(tree, &selector_filter("cloud/block", "b1"));
    assert!(allowed.is_none());
    assert_eq!(counts, (2, 0, 0));
    let (allowed, counts) = inv.allowed_nodes(tree, &selector_filter("cloud/rack", "r2"));
    assert_eq!(allowed.map(|a| a.iter().filter(|x| **x).count()), Some(1));
    assert_eq!(counts, (2, 1, 0));
}
