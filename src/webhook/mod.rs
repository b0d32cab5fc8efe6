//! The admission webhook: request handlers (review codec, mutation, validation) served over
//! TLS by a small axum + rustls server.
//!
//! Request handling (see docs/webhook.md):
//! - `review`: AdmissionReview decoding and encoding;
//! - `routes`: Kueue's paths, the axum [`router`] and the [`handle`] entry point;
//! - `jobs`: mutation and validation of job kinds (through `integrations`), plus policies;
//! - `crd`: defaulting and validation of Kueue's kinds (through `api::validate`);
//! - `index`: the watch-fed [`ClusterIndex`] answering lookups without the API server;
//! - `feed`: the watches that fill it, and `health`: how those watches are doing.
//!
//! `server`, `tls` and `certs` are the serving half: listeners, TLS with certificate hot
//! reload, graceful shutdown, limits, and cert tooling. See docs/webhook-server.md.
//! `kuota serve` wires this server to the rest of the process in `crate::serve`.

pub mod certs;
pub mod convert;
pub mod crd;
pub mod feed;
pub mod health;
pub mod index;
pub mod jobs;
pub mod review;
pub mod routes;
pub mod routing;
pub mod server;
pub mod tls;

pub use health::index_readiness;
pub use index::{ClusterIndex, IndexConfig, IndexEvent, IndexKind};
pub use routes::{Op, Route, Target, handle, router, routes, webhook_path};

use crate::policy::PolicyHandle;
use review::Verdict;
use std::sync::Arc;

/// Kueue configuration switches the handlers follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Kueue's `manageJobsWithoutQueueName`: suspend jobs without a queue name too (in
    /// namespaces the index's managed-namespace selector selects).
    pub manage_jobs_without_queue_name: bool,
    /// Kueue's `LocalQueueDefaulting`: jobs without a queue name get `default` when the
    /// namespace has a LocalQueue of that name.
    pub local_queue_defaulting: bool,
    /// Kueue's `WorkloadPriorityClassDefaulting`: managed jobs without a priority class get
    /// `default` when a WorkloadPriorityClass of that name exists.
    pub workload_priority_class_defaulting: bool,
    /// Kueue's `PartialAdmission`: when off, Workload `minCount`s are dropped on creation.
    pub partial_admission: bool,
    /// Kueue's `TopologyAwareScheduling`: validate the topology annotations.
    pub topology_aware_scheduling: bool,
    /// Kueue's `integrations.frameworks` in force: a kind whose framework is not listed
    /// is never mutated or validated (Kueue installs no-op webhooks for it).
    pub frameworks: Vec<String>,
}

impl WebhookConfig {
    /// Whether the integration's framework is enabled, by name or implicitly by an
    /// enabled framework that needs it (Kueue's `ImplicitlyEnabledFrameworkNames`: a
    /// LeaderWorkerSet's pods are gated by the pod webhook).
    pub fn enables(&self, integration: &dyn crate::integrations::JobIntegration) -> bool {
        let name = integration.framework();
        self.frameworks.iter().any(|f| {
            f == name
                || crate::integrations::for_framework(f)
                    .is_some_and(|i| i.implicitly_enables().contains(&name))
        })
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            manage_jobs_without_queue_name: false,
            local_queue_defaulting: true,
            workload_priority_class_defaulting: true,
            partial_admission: true,
            topology_aware_scheduling: true,
            // Every framework kuota runs (a configuration file names its own).
            frameworks: crate::integrations::run_frameworks()
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }
}

/// Counters of answered reviews, kept in kuota's metric registry
/// ([`crate::telemetry::Metrics`]). Dry-run requests are counted like the others (metrics
/// are not side effects in the sense of `sideEffects: None`) and also as dry runs.
#[derive(Debug, Default, Clone)]
pub struct WebhookMetrics {
    metrics: crate::telemetry::Metrics,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Allowed without a patch.
    pub allowed: u64,
    /// Allowed with a patch.
    pub patched: u64,
    /// Denied.
    pub denied: u64,
    /// Bodies that were not AdmissionReviews (HTTP 400).
    pub bad_requests: u64,
    /// Dry-run reviews (also counted above).
    pub dry_run: u64,
}

impl WebhookMetrics {
    /// Counters recorded into `metrics` (shared with the rest of the process).
    pub fn new(metrics: crate::telemetry::Metrics) -> Self {
        Self { metrics }
    }

    /// The registry the counters live in (served on `/metrics`).
    pub fn registry(&self) -> &crate::telemetry::Metrics {
        &self.metrics
    }

    fn record(&self, v: &Verdict, dry_run: bool) {
        let result = match (v.allowed, v.patch.is_empty()) {
            (false, _) => "denied",
            (true, true) => "allowed",
            (true, false) => "patched",
        };
        self.metrics.record_webhook_review(result, dry_run);
    }

    fn record_bad_request(&self) {
        self.metrics.record_webhook_review("bad_request", false);
    }

    /// The current counts.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            allowed: self.metrics.webhook_reviews("allowed"),
            patched: self.metrics.webhook_reviews("patched"),
            denied: self.metrics.webhook_reviews("denied"),
            bad_requests: self.metrics.webhook_reviews("bad_request"),
            dry_run: self.metrics.webhook_dry_run_reviews(),
        }
    }
}

/// Everything a handler reads: the cluster index, the policies, the configuration.
#[derive(Debug)]
pub struct WebhookState {
    /// Watch-fed lookups.
    pub index: Arc<ClusterIndex>,
    /// Admission policies in force.
    pub policies: PolicyHandle,
    /// Kueue configuration switches.
    pub config: WebhookConfig,
    /// Review counters.
    pub metrics: WebhookMetrics,
}

impl WebhookState {
    /// A state over an index, policies and configuration.
    pub fn new(index: Arc<ClusterIndex>, policies: PolicyHandle, config: WebhookConfig) -> Self {
        Self {
            index,
            policies,
            config,
            metrics: WebhookMetrics::default(),
        }
    }

    /// Empty (unsynced) index, no policies, default configuration.
    pub fn for_tests() -> Self {
        Self::new(
            Arc::new(ClusterIndex::default()),
            PolicyHandle::empty(),
            WebhookConfig::default(),
        )
    }
}
