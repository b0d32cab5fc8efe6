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
    let s = ok(
        "integrations:\n  frameworks: [batch/job, ray.io/rayjob, sparkoperator.k8s.io/sparkapplication]\n",
    );
    assert_eq!(s.frameworks, vec!["batch/job", "ray.io/rayjob"]);
    assert_eq!(
        s.unsupported_frameworks,
        vec!["sparkoperator.k8s.io/sparkapplication"]
    );
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
        e.contains(
            "k.yaml: config.kuota.dev/v1alpha1 KuotaConfiguration preemptionProtection.minRunTime: unknown field"
        ),
        "{e}"
    );
}

#[test]
fn kueue_sections_kuota_does_not_use_are_accepted_and_listed() {
    let s = ok(
        "webhook:\n  port: 9443\nmetrics:\n  bindAddress: :8443\n  enableClusterQueueResources: true\ninternalCertManagement:\n  enable: false\nfeatureGates:\n  TopologyAwareScheduling: true\nintegrations:\n  frameworks: [batch/job]\n  podOptions: {}\n",
    );
    assert_eq!(
        s.ignored,
        vec![
            "metrics.enableClusterQueueResources",
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
fn api_writes_default_to_a_second_and_lean_events_and_refuse_bad_values() {
    let own = |body: &str| Settings::parse("own.yaml", &format!("{OWN}{body}"));
    let s = own("").unwrap();
    assert_eq!(s.api_writes.queue_status_interval, Duration::from_secs(1));
    assert_eq!(s.api_writes.events, WorkloadEvents::Lean);
    let s = own("apiWrites:\n  queueStatusInterval: 10s\n  events: Kueue\n").unwrap();
    assert_eq!(s.api_writes.queue_status_interval, Duration::from_secs(10));
    assert_eq!(s.api_writes.events, WorkloadEvents::Kueue);
    let e = own("apiWrites:\n  queueStatusInterval: 0s\n  events: kueue\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("apiWrites.queueStatusInterval: Invalid value: \"0s\": must be greater than 0"),
        "{e}"
    );
    assert!(
        e.contains(
            "apiWrites.events: Unsupported value: \"kueue\": supported values: \"Lean\", \"Kueue\""
        ),
        "{e}"
    );
    let e = own("apiWrites:\n  queueStatusInterval: soon\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("apiWrites.queueStatusInterval: Invalid value: \"soon\""),
        "{e}"
    );
}

#[test]
fn start_estimates_take_defaults_and_refuse_bad_values() {
    let own = |body: &str| Settings::parse("own.yaml", &format!("{OWN}{body}"));
    let d = own("").unwrap().start_estimates;
    assert!(d.enabled);
    assert_eq!(
        (d.interval, d.cpu_share, d.default_runtime),
        (Duration::from_secs(30), 0.1, None)
    );
    let s = own("startEstimates:\n  enabled: false\n  interval: 5s\n  cpuShare: 0.5\n  defaultRuntime: 1h\n  horizon: 24h\n")
        .unwrap()
        .start_estimates;
    assert!(!s.enabled);
    assert_eq!(s.interval, Duration::from_secs(5));
    assert_eq!(s.cpu_share, 0.5);
    assert_eq!(s.default_runtime, Some(Duration::from_secs(3600)));
    assert_eq!(s.horizon, Duration::from_secs(86_400));
    let e = own("startEstimates:\n  interval: 0s\n  cpuShare: 1.5\n  defaultRuntime: soon\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("startEstimates.interval: Invalid value: \"0s\": must be greater than 0"),
        "{e}"
    );
    assert!(
        e.contains(
            "startEstimates.cpuShare: Invalid value: \"1.5\": must be greater than 0 and at most 1"
        ),
        "{e}"
    );
    assert!(
        e.contains("startEstimates.defaultRuntime: Invalid value: \"soon\""),
        "{e}"
    );
    let e = own("startEstimates:\n  every: 5s\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("startEstimates.every: unknown field"), "{e}");
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

const V1BETA2: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n";

fn v1beta2(body: &str) -> Settings {
    Settings::parse("v1beta2.yaml", &format!("{V1BETA2}{body}"))
        .unwrap_or_else(|e| panic!("{body}: {e}"))
}

/// Kueue's apis/config/v1beta2/defaults.go: waitForPodsReady on with a 30-minute timeout
/// (0 means the default too), blockAdmission false, recoveryTimeout the timeout; fair
/// sharing on when its section is present.
#[test]
fn v1beta2_has_kueues_v1beta2_defaults() {
    let s = v1beta2("");
    let w = s
        .wait_for_pods_ready
        .expect("v1beta2 turns waitForPodsReady on");
    assert_eq!(w.timeout, Duration::from_secs(30 * 60));
    assert!(!w.block_admission);
    assert_eq!(w.recovery_timeout, Some(w.timeout));
    assert_eq!(w.requeuing.timestamp, "Eviction");
    assert_eq!(w.requeuing.backoff_base, Duration::from_secs(60));
    assert_eq!(w.requeuing.backoff_max, Duration::from_secs(3600));
    assert_eq!(w.requeuing.backoff_limit_count, None);
    assert!(s.engine.fair_sharing.is_none());
    assert_eq!(s.leader_election.lease_name, DEFAULT_LEASE_NAME);
    assert_eq!(s.listeners, Listeners::default());
    let w = v1beta2(
        "waitForPodsReady:\n  timeout: 0s\n  recoveryTimeout: 0s\n  blockAdmission: true\n",
    )
    .wait_for_pods_ready
    .unwrap();
    assert_eq!(w.timeout, Duration::from_secs(30 * 60));
    assert_eq!(w.recovery_timeout, None);
    assert!(w.block_admission);
    let w = v1beta2("waitForPodsReady:\n  timeout: 1.5h\n  recoveryTimeout: 90s\n")
        .wait_for_pods_ready
        .unwrap();
    assert_eq!(w.timeout, Duration::from_secs(5400));
    assert_eq!(w.recovery_timeout, Some(Duration::from_secs(90)));
    // Kueue's feature gate is the only way to turn it off in v1beta2.
    assert!(
        v1beta2("featureGates:\n  DisableWaitForPodsReady: true\n")
            .wait_for_pods_ready
            .is_none()
    );
    let fs = v1beta2("fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n");
    assert_eq!(fs.engine.fair_sharing, Some(vec![LessThanInitialShare]));
    let fs = v1beta2("fairSharing: {}\n");
    assert_eq!(
        fs.engine.fair_sharing,
        Some(vec![LessThanOrEqualToFinalShare, LessThanInitialShare])
    );
}

/// Kueue's apis/config/v1beta1/defaults.go: waitForPodsReady off unless enabled, then a
/// 5-minute timeout and blockAdmission true.
#[test]
fn v1beta1_has_kueues_v1beta1_defaults() {
    assert!(ok("").wait_for_pods_ready.is_none());
    let w = ok("waitForPodsReady:\n  enable: true\n")
        .wait_for_pods_ready
        .unwrap();
    assert_eq!(w.timeout, Duration::from_secs(5 * 60));
    assert!(w.block_admission);
    assert_eq!(w.recovery_timeout, Some(w.timeout));
    assert!(ok("fairSharing: {}\n").engine.fair_sharing.is_none());
    // No file at all: as an empty v1beta1 document, with the same Lease.
    let none = Settings::load(&[]).expect("no files");
    assert!(none.wait_for_pods_ready.is_none());
    assert_eq!(none.leader_election.lease_name, DEFAULT_LEASE_NAME);
}

#[test]
fn a_field_of_the_other_version_is_refused_naming_file_field_and_version() {
    let e = Settings::parse(
        "mixed.yaml",
        &format!("{V1BETA2}waitForPodsReady:\n  enable: true\nfairSharing:\n  enable: true\n"),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "mixed.yaml: config.kueue.x-k8s.io/v1beta2 Configuration has no field waitForPodsReady.enable, fairSharing.enable: they are fields of the other version; fix the field or the apiVersion"
    );
    let e = err("visibilityServer:\n  bindPort: 8082\n");
    assert!(
        e.starts_with(
            "config.yaml: config.kueue.x-k8s.io/v1beta1 Configuration has no field visibilityServer"
        ),
        "{e}"
    );
    // A wrong type and an unknown field name the file, the version and the field.
    let e = Settings::parse("t.yaml", &format!("{V1BETA2}webhook:\n  port: high\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "t.yaml: config.kueue.x-k8s.io/v1beta2 Configuration webhook.port: invalid type"
        ),
        "{e}"
    );
    let e = Settings::parse("u.yaml", &format!("{V1BETA2}health:\n  probeAddress: :1\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "u.yaml: config.kueue.x-k8s.io/v1beta2 Configuration health.probeAddress: unknown field"
        ),
        "{e}"
    );
    let e = Settings::parse(
        "v.yaml",
        "apiVersion: config.kueue.x-k8s.io/v1beta3\nkind: Configuration\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("v1beta3"), "{e}");
}

#[test]
fn listeners_are_read_from_the_webhook_metrics_and_health_sections() {
    let s = v1beta2(
        "webhook:\n  host: 127.0.0.1\n  port: 9444\n  certDir: /etc/certs\nmetrics:\n  bindAddress: \"0\"\nhealth:\n  healthProbeBindAddress: :8081\n  readinessEndpointName: ready\n  livenessEndpointName: live\n",
    );
    assert_eq!(
        s.listeners,
        Listeners {
            webhook: Some("127.0.0.1:9444".to_string()),
            cert_dir: Some(PathBuf::from("/etc/certs")),
            metrics: Some(Bind::Off),
            health: Some(Bind::Addr(":8081".to_string())),
            readiness_endpoint: Some("ready".to_string()),
            liveness_endpoint: Some("live".to_string()),
            visibility: None,
        }
    );
    // visibilityServer: Kueue's defaults field by field (every interface, port 8082).
    let visibility = |yaml: &str| v1beta2(yaml).listeners.visibility;
    assert_eq!(
        visibility("visibilityServer: {}\n").as_deref(),
        Some(":8082")
    );
    assert_eq!(
        visibility("visibilityServer:\n  bindAddress: 127.0.0.1\n  bindPort: 9082\n").as_deref(),
        Some("127.0.0.1:9082")
    );
    let e = Settings::parse(
        "p.yaml",
        &format!("{V1BETA2}visibilityServer:\n  bindPort: 0\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("visibilityServer.bindPort: Invalid value: 0"),
        "{e}"
    );
    assert_eq!(
        v1beta2("webhook:\n  host: \"::1\"\n")
            .listeners
            .webhook
            .as_deref(),
        Some("[::1]:9443")
    );
    let e = Settings::parse("p.yaml", &format!("{V1BETA2}webhook:\n  port: 70000\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("webhook.port: Invalid value: 70000"), "{e}");
}

/// Kueue's own shipped file loads unchanged (tests/fixtures/kueue-config/SOURCE.md).
#[test]
fn kueues_shipped_configuration_loads_unchanged() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kueue-config/controller_manager_config.yaml");
    let s = Settings::load(&[path]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.leader_election.lease_name, "c1f6bfd2.kueue.x-k8s.io");
    assert_eq!(s.listeners.health, Some(Bind::Addr(":8081".to_string())));
    assert_eq!(s.listeners.metrics, Some(Bind::Addr(":8443".to_string())));
    assert_eq!(s.listeners.webhook.as_deref(), Some(":9443"));
    assert_eq!(
        s.client,
        ClientLimits {
            qps: 300.0,
            burst: 500
        }
    );
    assert_eq!(
        s.frameworks,
        [
            "batch/job",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/raycluster",
            "jobset.x-k8s.io/jobset",
            "trainer.kubeflow.org/trainjob",
            "pod",
            "leaderworkerset.x-k8s.io/leaderworkerset"
        ]
    );
    assert!(s.unsupported_frameworks.contains(&"deployment".to_string()));
    assert_eq!(
        s.wait_for_pods_ready.map(|w| w.timeout),
        Some(Duration::from_secs(1800))
    );
    assert!(
        s.ignored.contains(&"controller".to_string()),
        "{:?}",
        s.ignored
    );
}

/// The configuration kuota's own manifests ship (kustomize and Helm) loads, with one Lease.
#[test]
fn the_shipped_configurations_load() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = std::fs::read_to_string(root.join("manifests/base/configuration.yaml")).unwrap();
    // The chart writes its values' `configuration` with apiVersion, kind and frameworks.
    let values: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(root.join("manifests/helm/kuota/values.yaml")).unwrap(),
    )
    .unwrap();
    let mut chart = values["configuration"].clone();
    chart["apiVersion"] = "config.kueue.x-k8s.io/v1beta2".into();
    chart["kind"] = "Configuration".into();
    chart["integrations"] = serde_json::json!({"frameworks": values["integrations"]["frameworks"]});
    let chart = serde_norway::to_string(&chart).unwrap();
    for (name, text) in [("base", embedded_config(&base)), ("helm", chart)] {
        let s = Settings::parse(name, &text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(s.leader_election.lease_name, DEFAULT_LEASE_NAME, "{name}");
        assert_eq!(
            s.listeners.cert_dir,
            Some(PathBuf::from("/certs")),
            "{name}"
        );
        assert_eq!(
            s.listeners.health,
            Some(Bind::Addr(":8080".to_string())),
            "{name}"
        );
    }
}

/// The `controller_manager_config.yaml: |` block of a ConfigMap, unindented.
fn embedded_config(configmap: &str) -> String {
    let mut lines = configmap.lines().skip_while(|l| {
        !l.trim_start()
            .starts_with("controller_manager_config.yaml:")
    });
    lines.next().expect("the ConfigMap key");
    let body: Vec<&str> = lines
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .collect();
    body.iter()
        .map(|l| l.get(4..).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn multikueue_gets_kueues_defaults_and_rules() {
    use crate::config::multikueue::{Dispatcher, MultiKueue};
    assert_eq!(ok("").multikueue, MultiKueue::default());
    assert_eq!(ok("multiKueue: {}\n").multikueue.origin, "multikueue");
    let s = ok(
        "multiKueue:\n  origin: mgr-a\n  workerLostTimeout: 90s\n  gcInterval: 2m\n  \
                dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n  \
                incrementalDispatcherConfig: {stepSize: 2}\n",
    );
    assert_eq!(s.multikueue.origin, "mgr-a");
    assert_eq!(s.multikueue.worker_lost_timeout, Duration::from_secs(90));
    assert_eq!(s.multikueue.dispatcher, Dispatcher::Incremental { step: 2 });
    let s = ok("multiKueue: {dispatcherName: example.com/mine, externalFrameworks: []}\n");
    assert_eq!(
        s.multikueue.dispatcher,
        Dispatcher::External("example.com/mine".into())
    );
    assert!(
        s.ignored
            .contains(&"multiKueue.externalFrameworks".to_string())
    );
    let e = err("multiKueue: {incrementalDispatcherConfig: {stepSize: 0}}\n");
    assert!(
        e.contains("incrementalDispatcherConfig is only valid when dispatcherName is set"),
        "{e}"
    );
    assert!(
        e.contains("multiKueue.incrementalDispatcherConfig.stepSize"),
        "{e}"
    );
    let e = err("multiKueue: {workerLostTimeout: soon, origin: \"not a label!\"}\n");
    assert!(e.contains("multiKueue.workerLostTimeout"), "{e}");
    assert!(e.contains("multiKueue.origin"), "{e}");
    let e = err("multiKueue: {workerLostTimout: 1m}\n");
    assert!(e.contains("workerLostTimout"), "{e}");
}
