//! The forms users write and export manifests in: `kind: List`, merge keys, YAML 1.1
//! booleans, generateName, strict string fields, duplicates and unsupported kinds.

use super::*;

fn err(yaml: &str) -> String {
    load_str("cluster.yaml", yaml)
        .expect_err("should fail")
        .to_string()
}

const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  suspend: yes
  template:
    spec:
      containers: [{name: c, image: busybox, resources: {requests: {cpu: 1}}}]
      restartPolicy: Never
";

#[test]
fn kind_list_items_are_loaded_as_objects() {
    let yaml = "apiVersion: v1
kind: List
metadata: {resourceVersion: \"\"}
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: a}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: q, namespace: ns}
  spec: {clusterQueue: cq, bogus: 1}
";
    let e = err(yaml);
    assert_eq!(
        e,
        "cluster.yaml:11: document 1 (LocalQueue \"q\"): spec.bogus: unknown field `bogus`"
    );
    let ms = load_str("l.yaml", &yaml.replace(", bogus: 1", "")).expect("a List loads");
    let kinds: Vec<&str> = ms.iter().map(Manifest::kind).collect();
    assert_eq!(kinds, ["ResourceFlavor", "LocalQueue"]);
}

#[test]
fn merge_keys_are_applied() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  cohortName: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: a
      resources:
      - &cpu {name: cpu, nominalQuota: 4}
    - name: b
      resources:
      - <<: *cpu
        borrowingLimit: 2
";
    let ms = load_str("m.yaml", yaml).expect("merge keys load");
    let Manifest::ClusterQueue(cq) = &ms[0] else {
        panic!("a ClusterQueue")
    };
    let b = &cq.spec.resource_groups[0].flavors[1].resources[0];
    assert_eq!(b.name, "cpu");
    assert_eq!(b.nominal_quota.0, "4");
    assert!(b.borrowing_limit.is_some());
}

#[test]
fn yaml11_booleans_where_a_bool_is_expected() {
    for (word, want) in [
        ("yes", true),
        ("On", true),
        ("Y", true),
        ("no", false),
        ("OFF", false),
    ] {
        let yaml = JOB.replace("suspend: yes", &format!("suspend: {word}"));
        let ms = load_str("j.yaml", &yaml).unwrap_or_else(|e| panic!("{word}: {e}"));
        let Manifest::Job(job) = &ms[0] else {
            panic!("a Job")
        };
        assert_eq!(
            job.spec.as_ref().and_then(|s| s.suspend),
            Some(want),
            "{word}"
        );
    }
    // Not a boolean in YAML 1.1 either.
    let e = err(&JOB.replace("suspend: yes", "suspend: yup"));
    assert!(e.starts_with("cluster.yaml:8: document 1 (Job \"sample-job-\"): spec.suspend: invalid type: string \"yup\", expected a boolean"), "{e}");
}

#[test]
fn generate_name_gives_a_generated_name() {
    let ms = load_str("j.yaml", JOB).expect("job loads");
    let name = ms[0].name().expect("a name").to_string();
    let suffix = name.strip_prefix("sample-job-").expect("the prefix kept");
    assert_eq!(suffix.len(), 5, "{name}");
    // The Workload built from it is named after the generated name, not `job--xxxxx`.
    let Manifest::Job(job) = &ms[0] else {
        panic!("a Job")
    };
    let wl = crate::integrations::batch_job::workload_for(job).expect("a workload");
    let wl_name = wl.metadata.name.expect("workload name");
    assert!(wl_name.starts_with(&format!("job-{name}-")), "{wl_name}");
    // Two Jobs from one generateName get two names; loading again gives the same ones.
    let two = format!("{JOB}---\n{JOB}");
    let names = |y: &str| -> Vec<String> {
        load_str("j.yaml", y)
            .expect("loads")
            .iter()
            .map(|m| m.name().unwrap_or("").to_string())
            .collect()
    };
    let first = names(&two);
    assert_ne!(first[0], first[1]);
    assert_eq!(first, names(&two));
}

#[test]
fn string_fields_refuse_unquoted_non_strings() {
    let e =
        err("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: 123\n");
    assert!(e.starts_with("cluster.yaml:4: document 1 (ResourceFlavor \"\"): metadata.name: invalid type: integer `123`, expected a string"), "{e}");
    let e = err(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: n}\nspec:\n  queueName: true\n  podSets: []\n",
    );
    assert!(e.starts_with("cluster.yaml:5: document 1 (Workload \"w\"): spec.queueName: invalid type: boolean `true`, expected a string"), "{e}");
    // Quoted, they are strings.
    load_str(
        "ok.yaml",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: \"123\"\n",
    )
    .expect("a quoted number is a string");
}

#[test]
fn duplicates_name_both_places() {
    let rf = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: a\n";
    let e = err(&format!("{rf}---\n{rf}"));
    assert_eq!(
        e,
        "cluster.yaml:9: document 2 (ResourceFlavor \"a\"): metadata.name: Duplicate value: \"a\": the same ResourceFlavor is also defined at cluster.yaml:4"
    );
    // Across files: the caller loads each and checks them together.
    let (mut all, p1) = load_partial("one.yaml", rf);
    let (two, p2) = load_partial("two.yaml", &format!("# comment\n{rf}"));
    assert!(p1.is_empty() && p2.is_empty());
    all.extend(two);
    let d = duplicates(&all);
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].to_string(),
        "two.yaml:5: document 1 (ResourceFlavor \"a\"): metadata.name: Duplicate value: \"a\": the same ResourceFlavor is also defined at one.yaml:4"
    );
    // Same name, other kind or namespace: not a duplicate.
    let lq = |ns: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{name: a, namespace: {ns}}}\nspec: {{clusterQueue: c}}\n"
        )
    };
    load_str("ok.yaml", &format!("{rf}---\n{}---\n{}", lq("x"), lq("y")))
        .expect("distinct objects");
}

#[test]
fn an_unsupported_kind_is_one_error_and_the_rest_still_loads() {
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a}\n";
    let (loaded, problems) = load_partial("mixed.yaml", yaml);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().starts_with(
            "mixed.yaml: document 1 (Deployment \"d\"): kind: Unsupported value: \"Deployment\""
        ),
        "{}",
        problems[0]
    );
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].manifest.name(), Some("a"));
}

/// Kueue's MultiKueue sample loads in both served versions (v1beta1's connection at the
/// spec root moves under `clusterSource`) and is validated.
#[test]
fn kueue_multikueue_objects_load_in_both_versions() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mk}\nspec: {clusters: [w1]}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: MultiKueueCluster\nmetadata: {name: w1}\nspec:\n  kubeConfig: {locationType: Secret, location: w1-secret}\n";
    let (loaded, problems) = load_partial("mk.yaml", yaml);
    assert!(problems.is_empty(), "{problems:?}");
    let kinds: Vec<&str> = loaded.iter().map(|l| l.manifest.kind()).collect();
    assert_eq!(kinds, ["MultiKueueConfig", "MultiKueueCluster"]);
    let Manifest::MultiKueueCluster(c) = &loaded[1].manifest else {
        panic!("a MultiKueueCluster")
    };
    let kc = c
        .spec
        .cluster_source
        .kube_config
        .as_ref()
        .expect("moved under clusterSource");
    assert_eq!(kc.location, "w1-secret");
    let bad = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mk}\nspec: {clusters: [w1, w1]}\n";
    let (_, problems) = load_partial("mk.yaml", bad);
    assert!(
        problems.iter().any(|p| p
            .to_string()
            .contains("spec.clusters: Invalid value: must be unique")),
        "{problems:?}"
    );
}

/// Kueue's AdmissionCheck sample loads in both served versions (v1beta1's deprecated
/// `retryDelayMinutes` is dropped, as Kueue's conversion drops it) and is validated.
#[test]
fn admission_checks_load_in_both_versions_and_are_validated() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: kueue.x-k8s.io/provisioning-request}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: AdmissionCheck\nmetadata: {name: old}\nspec: {controllerName: example.com/check, retryDelayMinutes: 15}\n";
    let (loaded, problems) = load_partial("ac.yaml", yaml);
    assert!(problems.is_empty(), "{problems:?}");
    let names: Vec<_> = loaded.iter().map(|l| l.manifest.kind()).collect();
    assert_eq!(names, ["AdmissionCheck", "AdmissionCheck"]);
    let bad = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: bad}\nspec: {controllerName: ''}\n";
    let (_, problems) = load_partial("bad.yaml", bad);
    assert!(
        problems.iter().any(|p| p
            .to_string()
            .contains("spec.controllerName: Required value")),
        "{problems:?}"
    );
}

#[test]
fn a_repeated_field_name_still_gets_its_own_line() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  cohortName: c
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: a
      resources:
      - name: cpu
        nominalQuota: 4
        lendingLimit: 1
    - name: b
      resources:
      - name: cpu
        nominalQuota: 1
        lendingLimit: 5
";
    let e = err(yaml);
    assert!(e.starts_with("cluster.yaml:18: document 1 (ClusterQueue \"q\"): spec.resourceGroups[0].flavors[1].resources[0].lendingLimit: Invalid value"), "{e}");
    let e = err(&yaml.replace(
        "        nominalQuota: 1\n",
        "        nominalQuota: 1\n        nominalQuotaa: 2\n",
    ));
    assert!(e.starts_with("cluster.yaml:18: document 1 (ClusterQueue \"q\"): spec.resourceGroups[0].flavors[1].resources[0].nominalQuotaa: unknown field `nominalQuotaa`"), "{e}");
}
