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
