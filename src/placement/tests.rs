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
