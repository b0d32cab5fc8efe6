use super::*;
use proptest::prelude::*;

const GOOD: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: cluster-queue
spec:
  namespaceSelector: {}
  cohort: team
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
description: important
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pod-high}
value: 100
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {name: default}
spec:
  levels: [{nodeLabel: cloud.com/block}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata: {name: child}
spec: {parent: root}
"#;

fn err(yaml: &str) -> String {
    load_str("cluster.yaml", yaml)
        .expect_err("should fail")
        .to_string()
}

#[test]
fn loads_kueue_quickstart_unchanged() {
    let ms = load_str("q.yaml", GOOD).expect("quickstart loads");
    let kinds: Vec<&str> = ms.iter().map(Manifest::kind).collect();
    assert_eq!(
        kinds,
        [
            "ResourceFlavor",
            "ClusterQueue",
            "LocalQueue",
            "WorkloadPriorityClass",
            "Job",
            "PriorityClass",
            "Namespace",
            "Topology",
            "Cohort"
        ]
    );
    let Manifest::ClusterQueue(cq) = &ms[1] else {
        panic!("second is a ClusterQueue")
    };
    assert_eq!(cq.spec.cohort(), Some("team"), "v1beta1 cohort converted");
    let Manifest::Cohort(c) = &ms[8] else {
        panic!("last is a Cohort")
    };
    assert_eq!(c.spec.parent(), Some("root"), "v1alpha1 parent converted");
    assert_eq!(ms[2].namespace(), Some("default"));
}

#[test]
fn unknown_field_names_file_document_object_and_path() {
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: team-a\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: a\n      resources:\n      - name: cpu\n        nominalQuota: 1\n        nominalQuotaa: 2\n",
    );
    assert!(e.starts_with("cluster.yaml:17: document 2 (ClusterQueue \"team-a\"): spec.resourceGroups[0].flavors[0].resources[0].nominalQuotaa: unknown field `nominalQuotaa`"), "{e}");
}

#[test]
fn invalid_quantity_is_reported_with_path() {
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-a}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: a\n      resources:\n      - name: cpu\n        nominalQuota: abc\n",
    );
    assert!(e.starts_with("cluster.yaml:11: document 1 (ClusterQueue \"team-a\"): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"abc\": quantities must match"), "{e}");
}

#[test]
fn validation_errors_are_reported() {
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: a\n      resources: [{name: cpu, nominalQuota: 1, lendingLimit: 5}]\n",
    );
    assert!(e.contains("document 1 (ClusterQueue \"q\"): spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: \"5\": must be less than or equal to the nominalQuota"), "{e}");
    assert!(e.contains("must be nil when cohort is empty"), "{e}");
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\nspec: {cohort: Bad_Name}\n",
    );
    assert!(
        e.contains("spec.cohort: Invalid value: \"Bad_Name\""),
        "{e}"
    );
}

#[test]
fn unknown_top_level_and_nested_kubernetes_keys() {
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, namespace: d}\nspec: {clusterQueue: c}\nextra: 1\n",
    );
    assert!(e.contains("unknown field `extra`"), "{e}");
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q, nmespace: d}\nspec: {clusterQueue: c}\n",
    );
    assert!(
        e.contains("(LocalQueue \"q\"): metadata.nmespace: unknown field"),
        "{e}"
    );
    let e = err(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      containers: [{name: c, imagePullPolicyy: Always}]\n",
    );
    assert!(
        e.contains("(Job \"j\"): spec.template.spec.containers[0].imagePullPolicyy: unknown field"),
        "{e}"
    );
    let e = err("apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\nspecc: {a: 1}\n");
    assert!(e.contains("specc: unknown field"), "{e}");
}

#[test]
fn unknown_kind_and_version() {
    let e = err("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n");
    assert!(
        e.contains("document 1 (Deployment \"d\"): kind: Unsupported value: \"Deployment\""),
        "{e}"
    );
    let e = err("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ClusterQueue\nmetadata: {name: d}\n");
    assert!(e.contains("apiVersion: Unsupported value: \"kueue.x-k8s.io/v1alpha1\": ClusterQueue is served at kueue.x-k8s.io/v1beta2, kueue.x-k8s.io/v1beta1"), "{e}");
    let e = err("kind: ClusterQueue\n");
    assert!(e.contains("apiVersion: Required value"), "{e}");
    let e = err("- a\n- b\n");
    assert!(e.contains("expected a Kubernetes object"), "{e}");
}

#[test]
fn syntax_errors_stop_with_a_line() {
    let e = err("apiVersion: v1\nkind: Namespace\nmetadata: {name: [\n");
    assert!(e.starts_with("cluster.yaml:4: document 1: "), "{e}");
}

#[test]
fn type_errors_carry_line_and_path() {
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: p}\nvalue: high\n",
    );
    assert!(e.starts_with("cluster.yaml:4: document 1 (WorkloadPriorityClass \"p\"): value: invalid type: string \"high\", expected i32"), "{e}");
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec: {queueingStrategy: FIFO}\n",
    );
    assert!(e.contains("spec.queueingStrategy: unknown variant `FIFO`, expected `StrictFIFO` or `BestEffortFIFO`"), "{e}");
}

#[test]
fn all_documents_are_checked() {
    let e = err("apiVersion: v1\nkind: Nope\n---\napiVersion: v1\nkind: Nope2\n");
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(
        e.lines().nth(1).is_some_and(|l| l.contains("document 2")),
        "{e}"
    );
}

#[test]
fn empty_input_and_comments() {
    assert_eq!(load_str("e.yaml", "").map(|v| v.len()), Ok(0));
    assert_eq!(
        load_str("e.yaml", "# nothing\n---\n").map(|v| v.len()),
        Ok(0)
    );
}

#[test]
fn load_file_reports_missing_file() {
    let e = load_file("/nonexistent/x.yaml")
        .expect_err("missing")
        .to_string();
    assert!(
        e.starts_with("/nonexistent/x.yaml: cannot read file"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_text(s in "\\PC{0,200}") {
        let _ = load_str("fuzz.yaml", &s);
    }

    #[test]
    fn never_panics_on_mutated_manifests(cut in 0usize..2000, len in 0usize..20, insert in "[ -~\\n]{0,12}") {
        let bytes = GOOD.as_bytes();
        let start = cut.min(bytes.len());
        let end = (start + len).min(bytes.len());
        let mut s = String::from_utf8_lossy(&bytes[..start]).into_owned();
        s.push_str(&insert);
        s.push_str(&String::from_utf8_lossy(&bytes[end..]));
        let _ = load_str("fuzz.yaml", &s);
    }
}

#[test]
fn v1beta1_workload_with_status_converts() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: team-a, creationTimestamp: null}
spec:
  queueName: user-queue
  priorityClassName: high
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  priority: 100
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
status:
  accumulatedPastExexcutionTimeSeconds: 3
  conditions:
  - type: QuotaReserved
    status: "True"
    reason: QuotaReserved
    message: ok
    lastTransitionTime: "2024-01-01T00:00:00Z"
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 2
      flavors: {cpu: default}
      resourceUsage: {cpu: "2"}
      topologyAssignment:
        levels: [kubernetes.io/hostname]
        domains: [{values: [n1], count: 2}]
"#;
    let ms = load_str("w.yaml", yaml).expect("v1beta1 workload loads");
    let Manifest::Workload(w) = &ms[0] else {
        panic!("a workload")
    };
    assert_eq!(
        w.spec.priority_class_ref,
        Some(crate::api::PriorityClassRef::workload("high"))
    );
    let status = w.status.as_ref().expect("status kept");
    assert_eq!(status.accumulated_past_execution_time_seconds, Some(3));
    let psa = &status
        .admission
        .as_ref()
        .expect("admitted")
        .pod_set_assignments[0];
    let slices = &psa.topology_assignment.as_ref().expect("tas").slices;
    assert_eq!(slices[0].pod_counts.universal, Some(2));
}

#[test]
fn line_lookup_follows_the_path() {
    use locate::{Seg, line_of, parse};
    let y = "a: 1\n---\nb:\n  c: 2\n  d: 3\n---\nc: 4\n";
    assert_eq!(line_of(y, 2, &parse("b.c")), Some(4));
    assert_eq!(line_of(y, 3, &parse("c")), Some(7));
    assert_eq!(line_of(y, 2, &parse("zz")), None);
    // A missing field is placed at its closest written ancestor.
    assert_eq!(line_of(y, 2, &parse("b.zz")), Some(3));
    // The same key in several places: the path decides, not the key name.
    let y = "l:\n- {name: a, q: 1}\n- name: b\n  q: 2\n";
    assert_eq!(line_of(y, 1, &parse("l[1].q")), Some(4));
    assert_eq!(line_of(y, 1, &parse("l[0].q")), Some(2));
    assert_eq!(
        line_of(y, 1, &[Seg::Key("l".into()), Seg::Index(1)]),
        Some(3)
    );
}
