//! kueue.x-k8s.io API types (v1beta2 is the hub; v1beta1 is converted), plus
//! quantity math, validation, manifest loading and label selectors.

#![warn(missing_docs)]

pub mod admissioncheck;
pub mod clusterqueue;
pub mod cohort;
pub mod common;
pub mod constants;
pub mod lenient;
pub mod localqueue;
pub mod manifest;
pub mod multikueue;
pub mod priorityclass;
pub mod provisioning;
pub mod quantity;
pub mod resourceflavor;
pub mod selector;
pub mod tas_encoding;
pub mod topology;
pub mod v1beta1;
pub mod validate;
pub mod workload;
pub mod workload_status;

pub use admissioncheck::*;
pub use clusterqueue::*;
pub use cohort::*;
pub use common::*;
pub use localqueue::*;
pub use multikueue::*;
pub use priorityclass::*;
pub use provisioning::*;
pub use resourceflavor::*;
pub use topology::*;
pub use workload::*;
pub use workload_status::*;

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crds_have_kueue_names_scopes_and_short_names() {
        let crds = [
            (ClusterQueue::crd(), "Cluster", vec!["cq"]),
            (Cohort::crd(), "Cluster", vec![]),
            (
                LocalQueue::crd(),
                "Namespaced",
                vec!["queue", "queues", "lq"],
            ),
            (
                ResourceFlavor::crd(),
                "Cluster",
                vec!["flavor", "flavors", "rf"],
            ),
            (Topology::crd(), "Cluster", vec![]),
            (Workload::crd(), "Namespaced", vec!["wl"]),
            (v1beta1::ClusterQueue::crd(), "Cluster", vec!["cq"]),
            (v1beta1::Workload::crd(), "Namespaced", vec!["wl"]),
        ];
        for (crd, scope, short) in crds {
            assert_eq!(crd.spec.group, "kueue.x-k8s.io");
            assert_eq!(crd.spec.scope, scope, "{}", crd.spec.names.kind);
            assert_eq!(crd.spec.names.short_names.unwrap_or_default(), short);
            let schema = serde_json::to_string(&crd.spec.versions[0].schema).unwrap_or_default();
            assert!(
                schema.contains("\"spec\""),
                "{} has a spec schema",
                crd.spec.names.kind
            );
        }
    }
}
