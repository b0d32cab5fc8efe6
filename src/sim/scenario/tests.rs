use super::*;

#[test]
fn demo_plans() {
    let plan = Scenario::demo().plan(1).expect("demo is valid");
    assert!(
        plan.workloads.len() >= 200,
        "{} workloads",
        plan.workloads.len()
    );
    assert_eq!(plan.cluster_queues.len(), 4);
    assert!(plan.capacity.get("nvidia.com/gpu").is_some_and(|&g| g > 0));
    assert!(
        plan.setup
            .iter()
            .any(|(_, e)| matches!(e, Event::LocalQueueUpserted(_)))
    );
}

#[test]
fn demo_directory_matches_embedded_copy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo");
    let s = Scenario::from_dir(&dir).expect("loads");
    assert_eq!(s.manifests.len(), 1);
    assert_eq!(s.manifests[0].text, DEMO_CLUSTER);
    assert_eq!(
        s.generator.as_ref().map(|g| g.text.as_str()),
        Some(DEMO_GENERATOR)
    );
}

/// Every built-in scenario is its `examples/<name>/` directory, byte for byte.
#[test]
fn builtin_scenarios_match_their_directories() {
    let base = |f: &SourceFile| f.base_name().to_string();
    for name in Scenario::builtin_names() {
        let embedded = Scenario::builtin(name).expect("listed");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(name);
        let on_disk = Scenario::from_dir(&dir).expect("loads");
        let files = |s: &Scenario| -> Vec<(String, String)> {
            s.generator
                .iter()
                .chain(&s.manifests)
                .map(|f| (base(f), f.text.clone()))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        assert_eq!(files(&embedded), files(&on_disk), "{name}");
    }
    assert!(Scenario::builtin("nope").is_none());
}

#[test]
fn builtin_scenarios_plan() {
    for name in Scenario::builtin_names() {
        let plan = Scenario::builtin(name)
            .expect("listed")
            .plan(1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!plan.workloads.is_empty(), "{name}");
    }
    let tas = Scenario::builtin("kueue-tas")
        .expect("listed")
        .plan(1)
        .expect("plans");
    let nodes = tas
        .setup
        .iter()
        .filter(|(_, e)| matches!(e, Event::NodeUpserted(_)))
        .count();
    assert_eq!(nodes, 640);
    assert_eq!(tas.workloads.len(), 4500);
}

#[test]
fn check_warns_on_dangling_references() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: ns}
spec: {clusterQueue: missing}
"#;
    let d = check(&[SourceFile::new("a.yaml", yaml)]);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(!d[0].error);
    assert!(d[0].message.contains("missing"));
}

/// A flavor that a ClusterQueue or a Cohort names and no file defines is a warning each;
/// one defined in another file of the same check is none.
#[test]
fn check_warns_about_a_flavor_defined_nowhere() {
    let queues = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: shared, resources: [{name: cpu, nominalQuota: 1}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: org
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - {name: default-flavor, resources: [{name: cpu, nominalQuota: 1}]}
    - {name: spot, resources: [{name: cpu, nominalQuota: 1}]}
"#;
    let flavor = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n";
    let d = check(&[
        SourceFile::new("queues.yaml", queues),
        SourceFile::new("flavor.yaml", flavor),
    ]);
    let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert!(d.iter().all(|d| !d.error), "{d:?}");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with("Cohort org: ResourceFlavor \"shared\" is not defined"),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("ClusterQueue cq: ResourceFlavor \"spot\" is not defined"),
        "{messages:?}"
    );
}

#[test]
fn check_warns_that_kuota_does_not_run_elastic_jobs() {
    let job = |value: &str| {
        format!(
            r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: trainer
  namespace: team-a
  labels: {{kueue.x-k8s.io/queue-name: lq}}
  annotations: {{kueue.x-k8s.io/elastic-job: "{value}"}}
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"#
        )
    };
    let d = check(&[SourceFile::new("job.yaml", job("true"))]);
    let elastic: Vec<_> = d
        .iter()
        .filter(|d| d.message.contains("elastic-job"))
        .collect();
    assert_eq!(elastic.len(), 1, "{d:?}");
    assert!(!elastic[0].error, "a warning, not an error: {d:?}");
    assert_eq!(elastic[0].file, "job.yaml");
    assert!(
        elastic[0]
            .message
            .starts_with("Job team-a/trainer: metadata.annotations[kueue.x-k8s.io/elastic-job]")
            && elastic[0].message.contains("kuota does not support"),
        "{}",
        elastic[0].message
    );
    // Kueue turns elastic jobs on only for the value "true".
    let d = check(&[SourceFile::new("job.yaml", job("false"))]);
    assert!(
        d.iter().all(|d| !d.message.contains("elastic-job")),
        "{d:?}"
    );
}

#[test]
fn check_warns_that_a_queue_with_admission_checks_stays_inactive() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gated}
spec:
  admissionChecksStrategy:
    admissionChecks: [{name: prov-req}]
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: old-style}
spec:
  admissionChecks: [multikueue]
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
"#;
    let d = check(&[SourceFile::new("q.yaml", yaml)]);
    let msgs: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d.iter().all(|d| !d.error && d.file == "q.yaml"), "{d:?}");
    for (queue, check) in [("gated", "prov-req"), ("old-style", "multikueue")] {
        assert!(
            msgs.iter()
                .any(|m| m.starts_with(&format!("ClusterQueue {queue}:"))
                    && m.contains(&format!("AdmissionCheck(s) {check};"))
                    && m.contains("stays inactive")),
            "{msgs:?}"
        );
    }
}

#[test]
fn check_names_cross_file_duplicates_and_reads_past_an_unsupported_kind() {
    let rf = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: rf}\n";
    let a = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\n---\n{rf}---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: cq}}\nspec: {{namespaceSelector: {{}}}}\n"
    );
    let b = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: q, namespace: ns}}\nspec: {{clusterQueue: cq}}\n---\n{rf}"
    );
    let d = check(&[SourceFile::new("a.yaml", &a), SourceFile::new("b.yaml", &b)]);
    let errors: Vec<String> = d
        .iter()
        .filter(|d| d.error)
        .map(|d| d.to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{d:?}");
    assert!(
        errors[0].contains("kind: Unsupported value: \"Deployment\""),
        "{d:?}"
    );
    assert!(errors[1].contains("b.yaml:8"), "{d:?}");
    assert!(errors[1].contains("also defined at a.yaml:7"), "{d:?}");
    // The ClusterQueue after the unsupported document was still seen by the LocalQueue.
    assert!(!d.iter().any(|d| d.message.contains("cq")), "{d:?}");
}

#[test]
fn check_runs_each_job_kinds_own_rules_and_names_kinds_kuota_does_not_run() {
    let jobset = |replicas: &str, queue: &str| {
        format!(
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: js\n  namespace: ns\n  labels: {{kueue.x-k8s.io/queue-name: {queue}}}\nspec:\n  replicatedJobs:\n  - name: w\n    replicas: {replicas}\n    template:\n      spec:\n        template:\n          spec:\n            containers: [{{name: c, image: busybox}}]\n"
        )
    };
    let lq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\nspec: {clusterQueue: cq}\n";
    // A valid JobSet's Workload is checked like a Job's: its LocalQueue exists here.
    let d = check(&[SourceFile::new(
        "js.yaml",
        format!("{lq}---\n{}", jobset("2", "lq")),
    )]);
    assert!(!d.iter().any(|d| d.error), "{d:?}");
    assert!(!d.iter().any(|d| d.message.contains("JobSet")), "{d:?}");
    // Naming a queue defined nowhere warns, as for a Job.
    let d = check(&[SourceFile::new("js.yaml", jobset("2", "elsewhere"))]);
    assert!(
        d.iter()
            .any(|d| !d.error && d.message.contains("elsewhere")),
        "{d:?}"
    );
    // A bad field in its metadata is an error naming it.
    let d = check(&[SourceFile::new(
        "js.yaml",
        jobset("2", "lq").replace("  name: js\n", "  name: js\n  lables: {}\n"),
    )]);
    assert!(
        d.iter()
            .any(|d| d.error && d.message.contains("metadata.lables")),
        "{d:?}"
    );
    // Kueue's Deployment framework is named as one kuota does not run.
    let d = check(&[SourceFile::new(
        "serve.yaml",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s, namespace: ns}\nspec: {}\n",
    )]);
    assert!(
        d.iter().any(|d| d.error
            && d.message
                .contains("kuota does not run Kueue's \"statefulset\" framework")),
        "{d:?}"
    );
}

#[test]
fn check_reports_errors_with_file() {
    let d = check(&[SourceFile::new(
        "bad.yaml",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: x}\nspec: {bogus: 1}\n",
    )]);
    assert!(
        d.iter()
            .any(|d| d.error && d.file.starts_with("bad.yaml") && d.message.contains("spec.bogus")),
        "{d:?}"
    );
}
