//! Configuration loading: defaults, each field, unknown fields with paths, bad values.

use std::time::Duration;

use super::*;
use crate::engine::FairPreemptionStrategy::{LessThanInitialShare, LessThanOrEqualToFinalShare};

const HEAD: &str = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n";
const OWN: &str = "apiVersion: config.kuota.dev/v1alpha1\nkind: KuotaConfiguration\n";

fn parse(body: &str) -> Result<Settings, ConfigError> {
    Settings::parse("config.yaml", &format!("{HEAD}{body}"))
}

fn ok(body: &str) -> Settings {
    parse(body).unwrap_or_else(|e| panic!("{body}: {e}"))
}

fn err(body: &str) -> String {
    match parse(body) {
        Ok(_) => panic!("accepted: {body}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_empty_configuration_gets_kueues_defaults() {
    let s = ok("");
    assert_eq!(s.frameworks, vec!["batch/job"]);
    assert!(s.unsupported_frameworks.is_empty());
    assert!(!s.manage_jobs_without_queue_name);
    let expr = &s
        .managed_jobs_namespace_selector
        .match_expressions
        .as_ref()
        .unwrap()[0];
    assert_eq!(expr.key, "kubernetes.io/metadata.name");
    assert_eq!(expr.operator, "NotIn");
    assert_eq!(
        expr.values.as_deref(),
        Some(&["kube-system".to_string(), DEFAULT_NAMESPACE.to_string()][..])
    );
    assert!(s.engine.fair_sharing.is_none());
    assert_eq!(s.engine.placement, Strategy::Kuota);
    assert_eq!(s.engine.preemption_min_runtime, 0);
    assert!(s.wait_for_pods_ready.is_none());
    assert_eq!(
        s.client,
        ClientLimits {
            qps: 300.0,
            burst: 500
        }
    );
    let le = &s.leader_election;
    assert!(le.enabled);
    assert_eq!(le.lease_name, DEFAULT_LEASE_NAME);
    assert_eq!(le.namespace, DEFAULT_NAMESPACE);
    assert_eq!(le.lease_duration, Duration::from_secs(15));
    assert_eq!(le.renew_deadline, Duration::from_secs(10));
    assert_eq!(le.retry_period, Duration::from_secs(2));
    assert!(s.ignored.is_empty());
    // Settings::default() is the same as an empty file.
    assert_eq!(Settings::default().client, s.client);
}

#[test]
fn frameworks_split_into_run_and_not_run() {
    let s = ok("integrations:\n  frameworks: [batch/job, ray.io/rayjob, kubeflow.org/mpijob]\n");
    assert_eq!(s.frameworks, vec!["batch/job", "ray.io/rayjob"]);
    assert_eq!(s.unsupported_frameworks, vec!["kubeflow.org/mpijob"]);
    // An empty list means Kueue's default.
    assert_eq!(
        ok("integrations:\n  frameworks: []\n").frameworks,
        vec!["batch/job"]
    );
}

#[test]
fn unknown_and_duplicate_frameworks_are_errors_at_their_index() {
    let e = err("integrations:\n  frameworks: [batch/job, batch/jobs]\n");
    assert!(
        e.contains("integrations.frameworks[1]: Unsupported value: \"batch/jobs\""),
        "{e}"
    );
    let e = err("integrations:\n  frameworks: [batch/job, batch/job]\n");
    assert!(
        e.contains("integrations.frameworks[1]: Duplicate value: \"batch/job\""),
        "{e}"
    );
}

#[test]
fn manage_jobs_and_namespace_selector() {
    let s = ok(
        "manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector:\n  matchLabels: {team: a}\n",
    );
    assert!(s.manage_jobs_without_queue_name);
    let labels = s.managed_jobs_namespace_selector.match_labels.unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    // Kueue's own namespace is excluded by the default selector.
    let s = ok("namespace: kueue-system\n");
    let values = s.managed_jobs_namespace_selector.match_expressions.unwrap()[0]
        .values
        .clone()
        .unwrap();
    assert_eq!(values, vec!["kube-system", "kueue-system"]);
    assert_eq!(s.leader_election.namespace, "kueue-system");
}

#[test]
fn fair_sharing_strategies() {
    let s = ok("fairSharing:\n  enable: true\n");
    assert_eq!(
        s.engine.fair_sharing,
        Some(vec![LessThanOrEqualToFinalShare, LessThanInitialShare])
    );
    let s = ok("fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanInitialShare]\n");
    assert_eq!(s.engine.fair_sharing, Some(vec![LessThanInitialShare]));
    assert!(
        ok("fairSharing:\n  enable: false\n")
            .engine
            .fair_sharing
            .is_none()
    );
    let e = err(
        "fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n",
    );
    assert!(
        e.contains("fairSharing.preemptionStrategies: Unsupported value"),
        "{e}"
    );
}

#[test]
fn wait_for_pods_ready_defaults_and_values() {
    assert!(
        ok("waitForPodsReady:\n  enable: false\n  timeout: 1m\n")
            .wait_for_pods_ready
            .is_none()
    );
    let w = ok("waitForPodsReady:\n  enable: true\n")
        .wait_for_pods_ready
        .unwrap();
    assert_eq!(w.timeout, Duration::from_secs(300));
    assert_eq!(w.requeuing.timestamp, "Eviction");
    assert_eq!(w.requeuing.backoff_limit_count, None);
    assert_eq!(w.requeuing.backoff_base, Duration::from_secs(60));
    assert_eq!(w.requeuing.backoff_max, Duration::from_secs(3600));
    let w = ok("waitForPodsReady:\n  enable: true\n  timeout: 2m30s\n  requeuingStrategy:\n    timestamp: Creation\n    backoffLimitCount: 3\n    backoffBaseSeconds: 10\n    backoffMaxSeconds: 100\n")
        .wait_for_pods_ready
        .unwrap();
    assert_eq!(w.timeout, Duration::from_secs(150));
    assert_eq!(w.requeuing.timestamp, "Creation");
    assert_eq!(w.requeuing.backoff_limit_count, Some(3));
    assert_eq!(w.requeuing.backoff_base, Duration::from_secs(10));
    assert_eq!(w.requeuing.backoff_max, Duration::from_secs(100));
}

/// Kueue's v1beta1 defaults: blockAdmission follows `enable`, recoveryTimeout is the
/// timeout, and "0s" turns recovery off; the engine gets the same values in ms.
#[test]
fn wait_for_pods_ready_block_admission_and_recovery() {
    let s = ok("waitForPodsReady:\n  enable: true\n  timeout: 2m\n");
    let w = s.wait_for_pods_ready.clone().unwrap();
    assert!(w.block_admission);
    assert_eq!(w.recovery_timeout, Some(Duration::from_secs(120)));
    let e = s.engine.pods_ready.unwrap();
    assert_eq!((e.timeout, e.recovery_timeout), (120_000, Some(120_000)));
    assert!(e.block_admission && !e.requeue_by_creation);
    let w =
        ok("waitForPodsReady:\n  enable: true\n  blockAdmission: false\n  recoveryTimeout: 0s\n")
            .wait_for_pods_ready
            .unwrap();
    assert!(!w.block_admission);
    assert_eq!(w.recovery_timeout, None);
    assert!(ok("").engine.pods_ready.is_none());
}

#[test]
fn wait_for_pods_ready_bad_values() {
    let e = err("waitForPodsReady:\n  enable: true\n  timeout: 0s\n");
    assert!(
        e.contains("waitForPodsReady.timeout: Required value"),
        "{e}"
    );
    let e = err("waitForPodsReady:\n  enable: true\n  timeout: -5m\n");
    assert!(
        e.contains("waitForPodsReady.timeout: Invalid value: \"-5m\""),
        "{e}"
    );
    let e = err("waitForPodsReady:\n  enable: true\n  timeout: soon\n");
    assert!(
        e.contains("waitForPodsReady.timeout: Invalid value: \"soon\""),
        "{e}"
    );
    let e = err(
        "waitForPodsReady:\n  enable: true\n  requeuingStrategy:\n    timestamp: Later\n    backoffBaseSeconds: -1\n",
    );
    assert!(
        e.contains("waitForPodsReady.requeuingStrategy.timestamp: Unsupported value: \"Later\""),
        "{e}"
    );
    assert!(
        e.contains("waitForPodsReady.requeuingStrategy.backoffBaseSeconds: Invalid value: -1"),
        "{e}"
    );
}

#[test]
fn client_connection_values() {
    let s = ok("clientConnection:\n  qps: 50\n  burst: 100\n");
    assert_eq!(
        s.client,
        ClientLimits {
            qps: 50.0,
            burst: 100
        }
    );
    let e = err("clientConnection:\n  qps: -1\n");
    assert!(e.contains("clientConnection.qps: Invalid value: -1"), "{e}");
    let e = err("clientConnection:\n  burst: -3\n");
    assert!(
        e.contains("clientConnection.burst: Invalid value: -3"),
        "{e}"
    );
    let e = err("clientConnection:\n  qps: fast\n");
    assert!(
        e.contains("Configuration clientConnection.qps: invalid type"),
        "{e}"
    );
}

#[test]
fn leader_election_values() {
    let s = ok(
        "leaderElection:\n  leaderElect: false\n  leaseDuration: 6s\n  renewDeadline: 4s\n  retryPeriod: 1s\n  resourceName: my-lease\n  resourceNamespace: ops\n  resourceLock: leases\n",
    );
    let le = s.leader_election;
    assert!(!le.enabled);
    assert_eq!(le.lease_name, "my-lease");
    assert_eq!(le.namespace, "ops");
    assert_eq!(le.lease_duration, Duration::from_secs(6));
    assert_eq!(le.renew_deadline, Duration::from_secs(4));
    assert_eq!(le.retry_period, Duration::from_secs(1));
    let e = err("leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 5s\n");
    assert!(
        e.contains("leaderElection.renewDeadline: Invalid value"),
        "{e}"
    );
    let e = err("leaderElection:\n  resourceLock: endpoints\n");
    assert!(
        e.contains("leaderElection.resourceLock: Unsupported value: \"endpoints\""),
        "{e}"
    );
}

#[test]
fn unknown_fields_are_errors_naming_the_path() {
    let e = err("fairSharing:\n  enable: true\n  preemptionStrategy: []\n");
    assert!(
        e.contains(
            "Configuration fairSharing.preemptionStrategy: unknown field `preemptionStrategy`"
        ),
        "{e}"
    );
    let e = err("manageJobsWithoutQueueNames: true\n");
    assert!(
        e.contains("Configuration manageJobsWithoutQueueNames: unknown field"),
        "{e}"
    );
    let e = err("waitForPodsReady:\n  requeuingStrategy:\n    backoffLimit: 1\n");
    assert!(
        e.contains("waitForPodsReady.requeuingStrategy.backoffLimit: unknown field"),
        "{e}"
    );
    let e = Settings::parse(
        "k.yaml",
        &format!("{OWN}preemptionProtection:\n  minRunTime: 5m\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("k.yaml: KuotaConfiguration preemptionProtection.minRunTime: unknown field"),
        "{e}"
    );
}

#[test]
fn kueue_sections_kuota_does_not_use_are_accepted_and_listed() {
    let s = ok(
        "webhook:\n  port: 9443\nmetrics:\n  bindAddress: :8443\ninternalCertManagement:\n  enable: false\nfeatureGates:\n  TopologyAwareScheduling: true\nintegrations:\n  frameworks: [batch/job]\n  podOptions: {}\n",
    );
    assert_eq!(
        s.ignored,
        vec![
            "webhook",
            "metrics",
            "internalCertManagement",
            "featureGates",
            "integrations.podOptions"
        ]
    );
}

#[test]
fn kuota_additions_live_in_their_own_document() {
    let text = format!(
        "{HEAD}fairSharing:\n  enable: true\n---\n{OWN}preemptionProtection:\n  minRuntime: 5m\nplacement:\n  strategy: kueue-bestfit\n"
    );
    let s = Settings::parse("both.yaml", &text).unwrap();
    assert!(s.engine.fair_sharing.is_some());
    assert_eq!(s.engine.preemption_min_runtime, 300_000);
    assert_eq!(s.engine.placement, Strategy::KueueBestFit);
    // kuota's document alone keeps Kueue's defaults for the rest.
    let s = Settings::parse(
        "own.yaml",
        &format!("{OWN}placement:\n  strategy: first-fit\n"),
    )
    .unwrap();
    assert_eq!(s.engine.placement, Strategy::FirstFit);
    assert_eq!(s.frameworks, vec!["batch/job"]);
    let e = Settings::parse("own.yaml", &format!("{OWN}placement:\n  strategy: best\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("placement.strategy: Unsupported value: \"best\""),
        "{e}"
    );
    let e = Settings::parse(
        "own.yaml",
        &format!("{OWN}preemptionProtection:\n  minRuntime: \"5\"\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("preemptionProtection.minRuntime: Invalid value: \"5\""),
        "{e}"
    );
}

#[test]
fn documents_of_other_kinds_and_repeats_are_errors() {
    let e = Settings::parse("x.yaml", "apiVersion: v1\nkind: ConfigMap\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.yaml: document 1: apiVersion \"v1\" kind \"ConfigMap\""),
        "{e}"
    );
    let e = Settings::parse("x.yaml", &format!("{HEAD}---\n{HEAD}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a second Configuration document"), "{e}");
    let e = Settings::parse("x.yaml", &format!("{HEAD}integrations: [\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("x.yaml: document 1: not YAML"), "{e}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let e = err("clientConnection:\n  qps: -1\n  burst: -1\nintegrations:\n  frameworks: [nope]\n");
    assert!(
        e.contains("clientConnection.qps")
            && e.contains("clientConnection.burst")
            && e.contains("integrations.frameworks[0]"),
        "{e}"
    );
}

#[test]
fn files_load_and_merge() {
    let dir = std::env::temp_dir().join(format!("kuota-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("kueue.yaml");
    let b = dir.join("kuota.yaml");
    std::fs::write(&a, format!("{HEAD}clientConnection:\n  qps: 20\n")).unwrap();
    std::fs::write(
        &b,
        format!("{OWN}preemptionProtection:\n  minRuntime: 1s\n"),
    )
    .unwrap();
    let s = Settings::load(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(s.client.qps, 20.0);
    assert_eq!(s.engine.preemption_min_runtime, 1000);
    assert!(is_config_file(&a) && is_config_file(&b));
    let missing = dir.join("missing.yaml");
    let e = Settings::load(&[missing]).unwrap_err().to_string();
    assert!(e.contains("missing.yaml: cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn admission_fair_sharing_is_read_with_kueues_defaults() {
    let s = ok(
        "admissionFairSharing:\n  usageHalfLifeTime: 168h\n  resourceWeights: {nvidia.com/gpu: 10}\n",
    );
    let afs = s.engine.admission_fair_sharing.expect("on");
    assert_eq!(afs.usage_half_life, 168 * 3600 * 1000);
    // Kueue defaults the sampling interval to 5 minutes.
    assert_eq!(afs.usage_sampling_interval, 5 * 60 * 1000);
    assert_eq!(afs.resource_weights["nvidia.com/gpu"], 10.0);
    assert!(!s.ignored.iter().any(|f| f == "admissionFairSharing"));
    let s = ok("admissionFairSharing: {usageHalfLifeTime: 10s, usageSamplingInterval: 1s}\n");
    let afs = s.engine.admission_fair_sharing.expect("on");
    assert_eq!(
        (afs.usage_half_life, afs.usage_sampling_interval),
        (10_000, 1_000)
    );
    // Absent, or the feature gate off: Kueue's order, whatever the ClusterQueues say.
    assert!(ok("").engine.admission_fair_sharing.is_none());
    let off = "admissionFairSharing: {usageHalfLifeTime: 10s}\nfeatureGates: {AdmissionFairSharing: false}\n";
    assert!(ok(off).engine.admission_fair_sharing.is_none());
}

#[test]
fn admission_fair_sharing_bad_values_name_the_field() {
    let e = err("admissionFairSharing: {usageHalfLifeTime: -1s}\n");
    assert!(e.contains("admissionFairSharing.usageHalfLifeTime"), "{e}");
    let e = err("admissionFairSharing: {usageSamplingInterval: -5m}\n");
    assert!(
        e.contains("admissionFairSharing.usageSamplingInterval"),
        "{e}"
    );
    assert!(e.contains("must be greater than 0"), "{e}");
    let e = err("admissionFairSharing: {resourceWeights: {cpu: -1}}\n");
    assert!(
        e.contains("admissionFairSharing.resourceWeights[cpu]"),
        "{e}"
    );
    let e = err("admissionFairSharing: {usageHalfLife: 1h}\n");
    assert!(
        e.contains("admissionFairSharing") && e.contains("usageHalfLife"),
        "{e}"
    );
}
