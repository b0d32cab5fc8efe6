//! kueue.x-k8s.io API types (v1beta2 is the hub; v1beta1 is converted), plus
//! quantity math, validation, manifest loading and label selectors.

pub mod clusterqueue;
pub mod cohort;
pub mod common;
pub mod constants;
pub mod localqueue;
pub mod priorityclass;
pub mod quantity;
pub mod resourceflavor;
pub mod selector;
pub mod topology;
pub mod v1beta1;
pub mod workload;
pub mod workload_status;

pub use clusterqueue::*;
pub use cohort::*;
pub use common::*;
pub use localqueue::*;
pub use priorityclass::*;
pub use resourceflavor::*;
pub use topology::*;
pub use workload::*;
pub use workload_status::*;
