//! End-to-end tests against a real Kubernetes API server.
//!
//! Built only with `--features e2e`: `cargo test --features e2e --test e2e`.
//! Point them at a cluster with `KUOTA_E2E_KUBECONFIG=/path/to/kubeconfig` (a kind
//! cluster, or any cluster where you may create namespaces, CRDs, Nodes and webhook
//! configurations). Asked for without one, every test fails and says how to set it.
//!
//! kuota itself (the in-process controller and webhook, and `kuota serve` processes) runs
//! with the ServiceAccounts and roles of the shipped install, never as admin, and any
//! permission the API server refuses it fails the test (see `rbac`). The one exception is
//! `kuota serve --local-webhooks` (`local_webhooks`), a developer's tool that runs with the
//! developer's own kubeconfig by design.
//!
//! Each test works in a namespace of its own and gives cluster-wide objects unique
//! names, so the tests run in parallel and leave other tenants of the cluster alone.

mod support;

mod absent_parts;
mod admission_checks;
mod api_compat;
mod bad_input;
mod controller;
mod execution_time;
mod in_use;
mod install;
mod kinds;
mod local_webhooks;
mod managed_namespaces;
mod metrics;
mod migration;
mod multikueue;
mod multikueue_dispatch;
mod pods_ready;
mod preemption;
mod provisioning;
mod rbac;
mod replicas;
mod tas;
mod visibility;
mod webhook;
mod worker_clusters;
