use super::*;
use crate::sim::{SimConfig, simulate};

const CLUSTER: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: rf}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: rf
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ns
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/performance-scheduler-running-ms: "1000"
spec:
  parallelism: 2
  completions: 2
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: "1"}}
"#;

#[test]
fn jobs_in_manifests_run_as_workloads() {
    let s = Scenario {
        name: "jobs".into(),
        manifests: vec![SourceFile::new("c.yaml", CLUSTER)],
        generator: None,
    };
    let r = simulate(&s, SimConfig::default()).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    assert_eq!(
        (r.totals.workloads, r.totals.finished, r.totals.makespan_ms),
        (1, 1, 1000)
    );
    assert_eq!(r.totals.capacity_bound_ms, Some(1000));
    assert_eq!(r.classes[0].class, "manifest");
}

#[test]
fn job_without_runtime_label_is_an_error() {
    let yaml = CLUSTER.replace(
        "    kueue.x-k8s.io/performance-scheduler-running-ms: \"1000\"\n",
        "",
    );
    let s = Scenario {
        name: "jobs".into(),
        manifests: vec![SourceFile::new("c.yaml", yaml)],
        generator: None,
    };
    let e = Scenario::plan(&s, 1).expect_err("needs a runtime");
    assert!(
        e.to_string().contains("performance-scheduler-running-ms"),
        "{e}"
    );
}

/// A JobSet of two replicated Jobs, both pods of 1 cpu: one gang of 4 cpu.
const JOBSET: &str = r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: sweep
  namespace: ns
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/performance-scheduler-running-ms: "2000"
spec:
  suspend: true
  replicatedJobs:
  - name: workers
    replicas: REPLICAS
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: c
              image: busybox
              resources: {requests: {cpu: "1"}}
"#;

/// The cluster of [`CLUSTER`] with 4 cpu and no Job.
fn cluster_of_4_cpu() -> String {
    let end = CLUSTER.find("---\napiVersion: batch/v1").expect("the Job");
    CLUSTER[..end].replace("nominalQuota: 2", "nominalQuota: 4")
}

/// A scenario of one manifest file.
fn scenario_of(yaml: String) -> Scenario {
    Scenario {
        name: "kinds".into(),
        manifests: vec![SourceFile::new("c.yaml", yaml)],
        generator: None,
    }
}

#[test]
fn a_jobset_in_manifests_runs_as_its_integrations_workload() {
    let yaml = format!(
        "{}---{}",
        cluster_of_4_cpu(),
        JOBSET.replace("REPLICAS", "2")
    );
    let s = scenario_of(yaml);
    let plan = s.plan(1).expect("plans");
    assert_eq!(plan.workloads.len(), 1);
    let r = simulate(&s, SimConfig::default()).expect("runs");
    assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
    // 4 pods of 1 cpu on 4 cpu: admitted at once, as one gang.
    assert_eq!(
        (r.totals.workloads, r.totals.finished, r.totals.makespan_ms),
        (1, 1, 2000)
    );
    // With 3 replicas (6 cpu) the gang never fits 4 cpu: all or nothing.
    let yaml = format!(
        "{}---{}",
        cluster_of_4_cpu(),
        JOBSET.replace("REPLICAS", "3")
    );
    let s = scenario_of(yaml);
    let r = simulate(&s, SimConfig::default()).expect("runs");
    assert_eq!((r.totals.workloads, r.totals.finished), (1, 0));
}

#[test]
fn kinds_the_simulator_cannot_build_alone_or_kuota_does_not_run_are_errors() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p0\n  namespace: ns\n  labels: {kueue.x-k8s.io/queue-name: lq, kueue.x-k8s.io/pod-group-name: g}\n  annotations: {kueue.x-k8s.io/pod-group-total-count: \"2\"}\nspec:\n  containers: [{name: c, image: busybox}]\n";
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: serve, namespace: ns}\nspec: {}\n";
    for (doc, want) in [
        (
            pod,
            "Pod ns/p0: the simulator cannot run a Pod from its manifest alone",
        ),
        (
            deployment,
            "kuota does not run Kueue's \"deployment\" framework",
        ),
    ] {
        let yaml = format!("{}---\n{doc}", cluster_of_4_cpu());
        let s = scenario_of(yaml);
        let e = s.plan(1).expect_err("refused");
        assert!(e.to_string().contains(want), "{e}");
    }
}
