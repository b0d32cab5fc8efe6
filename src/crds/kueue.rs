//! What Kueue's CRDs declare beyond the schema of the types: short names, printer columns
//! and CEL rules (`x-kubernetes-validations`), per kind and version, at Kueue's schema
//! paths, so `kubectl get cq` and the API server's rejections read as under Kueue.
//!
//! Rules are kept only where every field they read exists in kuota's schema (a rule that
//! reads an unknown field does not compile in the API server). Kueue declares no
//! categories, so none are set here.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresources,
    CustomResourceValidation, JSONSchemaProps, ValidationRule,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A printer column (`kubectl get`).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header.
    pub name: &'static str,
    /// OpenAPI type of the value.
    pub type_: &'static str,
    /// JSONPath into the object.
    pub json_path: &'static str,
    /// Shown in `kubectl explain`/`-o wide` help.
    pub description: &'static str,
    /// 0 = always shown, 1 = only with `-o wide`.
    pub priority: i32,
}

impl Column {
    /// The apiextensions form.
    pub fn to_k8s(&self) -> CustomResourceColumnDefinition {
        CustomResourceColumnDefinition {
            name: self.name.into(),
            type_: self.type_.into(),
            json_path: self.json_path.into(),
            description: Some(self.description.into()),
            priority: (self.priority != 0).then_some(self.priority),
            format: None,
        }
    }
}

/// A CEL rule at a schema path (`spec.resourceGroups[]`; `""` is the object root).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Dotted path, `[]` descends into list items.
    pub path: &'static str,
    /// The CEL expression.
    pub rule: &'static str,
    /// The message the API server returns when it is false.
    pub message: &'static str,
}

impl Rule {
    /// The apiextensions form.
    pub fn to_k8s(&self) -> ValidationRule {
        ValidationRule {
            rule: self.rule.into(),
            message: Some(self.message.into()),
            ..ValidationRule::default()
        }
    }
}

/// Kueue's additions for one kind.
#[derive(Debug, Clone, Default)]
pub struct KindRules {
    /// Short names (`kubectl get cq`).
    pub short_names: &'static [&'static str],
    /// Printer columns by version.
    pub columns: BTreeMap<&'static str, &'static [Column]>,
    /// CEL rules by version.
    pub cel: BTreeMap<&'static str, &'static [Rule]>,
}

impl KindRules {
    /// The printer columns of a version.
    pub fn columns(&self, version: &str) -> &'static [Column] {
        self.columns.get(version).copied().unwrap_or(&[])
    }

    /// The CEL rules of a version.
    pub fn cel(&self, version: &str) -> &'static [Rule] {
        self.cel.get(version).copied().unwrap_or(&[])
    }
}

const CQ_COLUMNS_V1BETA2: &[Column] = &[
    col(
        "Cohort",
        "string",
        ".spec.cohortName",
        "Cohort that this ClusterQueue belongs to",
        0,
    ),
    col(
        "Strategy",
        "string",
        ".spec.queueingStrategy",
        "The queueing strategy used to prioritize workloads",
        1,
    ),
    col(
        "Pending Workloads",
        "integer",
        ".status.pendingWorkloads",
        "Number of pending workloads",
        0,
    ),
    col(
        "Admitted Workloads",
        "integer",
        ".status.admittedWorkloads",
        "Number of admitted workloads that haven't finished yet",
        1,
    ),
];

const CQ_COLUMNS_V1BETA1: &[Column] = &[
    col(
        "Cohort",
        "string",
        ".spec.cohort",
        "Cohort that this ClusterQueue belongs to",
        0,
    ),
    col(
        "Strategy",
        "string",
        ".spec.queueingStrategy",
        "The queueing strategy used to prioritize workloads",
        1,
    ),
    col(
        "Pending Workloads",
        "integer",
        ".status.pendingWorkloads",
        "Number of pending workloads",
        0,
    ),
    col(
        "Admitted Workloads",
        "integer",
        ".status.admittedWorkloads",
        "Number of admitted workloads that haven't finished yet",
        1,
    ),
];

const LQ_COLUMNS: &[Column] = &[
    col(
        "ClusterQueue",
        "string",
        ".spec.clusterQueue",
        "Backing ClusterQueue",
        0,
    ),
    col(
        "Pending Workloads",
        "integer",
        ".status.pendingWorkloads",
        "Number of pending workloads",
        0,
    ),
    col(
        "Admitted Workloads",
        "integer",
        ".status.admittedWorkloads",
        "Number of admitted workloads that haven't finished yet.",
        0,
    ),
];

const WL_COLUMNS: &[Column] = &[
    col(
        "Queue",
        "string",
        ".spec.queueName",
        "Name of the queue this workload was submitted to",
        0,
    ),
    col(
        "Reserved in",
        "string",
        ".status.admission.clusterQueue",
        "Name of the ClusterQueue where the workload is reserving quota",
        0,
    ),
    col(
        "Admitted",
        "string",
        ".status.conditions[?(@.type=='Admitted')].status",
        "Admission status",
        0,
    ),
    col(
        "Finished",
        "string",
        ".status.conditions[?(@.type=='Finished')].status",
        "Workload finished",
        0,
    ),
    col(
        "Age",
        "date",
        ".metadata.creationTimestamp",
        "Time this workload was created",
        0,
    ),
];

const WPC_COLUMNS: &[Column] = &[col(
    "Value",
    "integer",
    ".value",
    "Value of workloadPriorityClass's Priority",
    0,
)];

/// Quota of every flavor covers exactly the group's resources (ClusterQueue and Cohort).
const COVERED_RESOURCES: Rule = rule(
    "spec.resourceGroups[]",
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
    "flavors must have the same number of resources as the coveredResources",
);

const CQ_RULES_V1BETA2: &[Rule] = &[
    rule(
        "spec",
        "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true",
        "borrowingLimit must be nil when cohort is empty",
    ),
    COVERED_RESOURCES,
    rule(
        "spec.flavorFungibility",
        "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    rule(
        "spec.preemption",
        "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != 'Never')",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
];

const CQ_RULES_V1BETA1: &[Rule] = &[
    rule(
        "spec",
        "!has(self.cohort) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true",
        "borrowingLimit must be nil when cohort is empty",
    ),
    COVERED_RESOURCES,
    rule(
        "spec.flavorFungibility",
        "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    rule(
        "spec.preemption",
        "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != 'Never')",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
];

const COHORT_RULES: &[Rule] = &[COVERED_RESOURCES];

const LQ_RULES: &[Rule] = &[rule(
    "spec.clusterQueue",
    "self == oldSelf",
    "field is immutable",
)];

const RF_RULES: &[Rule] = &[
    rule(
        "spec",
        "!has(self.topologyName) || self.nodeLabels.size() >= 1",
        "at least one nodeLabel is required when topology is set",
    ),
    rule(
        "spec",
        "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName)",
        "topologyName is immutable when topologyName is set",
    ),
    rule(
        "spec.nodeTaints",
        "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
    rule(
        "spec.tolerations",
        "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ),
    rule(
        "spec.tolerations",
        "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    ),
    rule(
        "spec.tolerations",
        "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
        "supported toleration values: 'Equal'(default), 'Exists'",
    ),
    rule(
        "spec.tolerations",
        "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
        "a value must be empty when 'operator' is 'Exists'",
    ),
    rule(
        "spec.tolerations",
        "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
];

const TOPOLOGY_RULES: &[Rule] = &[
    rule(
        "spec.levels",
        "self == oldSelf || (self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname' && oldSelf[size(oldSelf) - 1].nodeLabel == 'kubernetes.io/hostname')",
        "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change",
    ),
    rule(
        "spec.levels",
        "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
        "must be unique",
    ),
    rule(
        "spec.levels",
        "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ),
];

/// Kueue's queueName immutability while quota is reserved (same in both versions).
const QUEUE_NAME_IMMUTABLE: Rule = rule(
    "",
    "((has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) && (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True'))) ? ((has(oldSelf.spec.queueName) == has(self.spec.queueName)) && (!has(oldSelf.spec.queueName) || oldSelf.spec.queueName == self.spec.queueName)) : true",
    "queueName is immutable while workload quota reserved",
);

const WL_RULES_V1BETA2: &[Rule] = &[
    rule(
        "",
        "has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(self.status.admission) ? size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
        "podSetAssignments must have the same number of podSets as the spec",
    ),
    QUEUE_NAME_IMMUTABLE,
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')) ? (!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) || (has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) : true",
        "priorityClassRef is immutable while workload quota reserved",
    ),
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) ? oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
        "priorityClassRef.group is immutable while workload quota reserved",
    ),
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)) ? oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
        "priorityClassRef.kind is immutable while workload quota reserved",
    ),
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef) && self.spec.priorityClassRef.group == 'scheduling.k8s.io' && self.spec.priorityClassRef.kind == 'PriorityClass') ? oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
        "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
    ),
    rule(
        "",
        "((has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')) && (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')))?((has(oldSelf.spec.maximumExecutionTimeSeconds)?oldSelf.spec.maximumExecutionTimeSeconds:0) ==  (has(self.spec.maximumExecutionTimeSeconds)?self.spec.maximumExecutionTimeSeconds:0)):true",
        "maximumExecutionTimeSeconds is immutable while workload quota reserved",
    ),
    rule(
        "spec",
        "!has(self.priorityClassRef) || has(self.priority)",
        "priority should not be nil when priorityClassRef is set",
    ),
    rule(
        "spec.priorityClassRef",
        "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
        "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
    ),
    rule(
        "spec.priorityClassRef",
        "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true",
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    ),
    rule(
        "spec.podSets[]",
        "has(self.minCount) ? self.minCount <= self.count : true",
        "minCount should be positive and less or equal to count",
    ),
    rule(
        "status.admission.podSetAssignments[].topologyAssignment",
        "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
        "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
    ),
    rule(
        "status.admission.podSetAssignments[].topologyAssignment.slices[]",
        "!has(self.podCounts.individual) || size(self.podCounts.individual) == self.domainCount",
        "podCounts.individual must have length equal to domainCount",
    ),
    rule(
        "status.admission.podSetAssignments[].topologyAssignment.slices[]",
        "self.valuesPerLevel.all(x, !has(x.individual) || size(x.individual.roots) == self.domainCount)",
        "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this TopologyAssignmentSlice",
    ),
    rule(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].podCounts",
        "[has(self.universal),has(self.individual)].filter(x,x==true).size() == 1",
        "exactly one of the fields in [universal individual] must be set",
    ),
    rule(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[]",
        "has(self.universal) != has(self.individual)",
        "exactly one of the fields in [universal individual] must be set",
    ),
];

const WL_RULES_V1BETA1: &[Rule] = &[
    rule(
        "",
        "has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(self.status.admission) ? size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
        "podSetAssignments must have the same number of podSets as the spec",
    ),
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource)) ? (oldSelf.spec.priorityClassSource == self.spec.priorityClassSource) : true",
        "priorityClassSource is immutable while workload quota reserved",
    ),
    rule(
        "",
        "(has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True') && has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource) && (self.spec.priorityClassSource != 'kueue.x-k8s.io/workloadpriorityclass') && has(oldSelf.spec.priorityClassName) && has(self.spec.priorityClassName)) ? (oldSelf.spec.priorityClassName == self.spec.priorityClassName) : true",
        "priorityClassName is immutable while workload quota reserved and priorityClassSource is not equal to kueue.x-k8s.io/workloadpriorityclass",
    ),
    rule(
        "",
        "((has(oldSelf.status) && has(oldSelf.status.conditions) && oldSelf.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')) && (has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')))?((has(oldSelf.spec.maximumExecutionTimeSeconds)?oldSelf.spec.maximumExecutionTimeSeconds:0) ==  (has(self.spec.maximumExecutionTimeSeconds)?self.spec.maximumExecutionTimeSeconds:0)):true",
        "maximumExecutionTimeSeconds is immutable while workload quota reserved",
    ),
    rule(
        "spec",
        "has(self.priorityClassName) ? has(self.priority) : true",
        "priority should not be nil when priorityClassName is set",
    ),
    QUEUE_NAME_IMMUTABLE,
    rule(
        "spec.podSets[]",
        "has(self.minCount) ? self.minCount <= self.count : true",
        "minCount should be positive and less or equal to count",
    ),
];

/// AdmissionCheck: `controllerName` cannot change (Kueue's only rule on this kind).
const AC_RULES: &[Rule] = &[rule(
    "spec.controllerName",
    "self == oldSelf",
    "field is immutable",
)];

/// MultiKueueConfig: its clusters are unique (v1beta2).
const MKCONF_RULES: &[Rule] = &[rule(
    "spec.clusters",
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
    "must be unique",
)];

/// MultiKueueCluster: one connection source (v1beta2).
const MKC_RULES: &[Rule] = &[rule(
    "spec.clusterSource",
    "[has(self.kubeConfig),has(self.clusterProfileRef)].filter(x,x==true).size() == 1",
    "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
)];

const MKC_COLUMNS: &[Column] = &[
    col(
        "Connected",
        "string",
        ".status.conditions[?(@.type=='Active')].status",
        "MultiKueueCluster is connected",
        0,
    ),
    col(
        "Age",
        "date",
        ".metadata.creationTimestamp",
        "Time this workload was created",
        0,
    ),
];

/// Kueue's additions for `kind`.
pub fn rules(kind: &str) -> KindRules {
    let both = |v2: &'static [Rule], v1: &'static [Rule]| {
        BTreeMap::from([("v1beta2", v2), ("v1beta1", v1)])
    };
    let cols = |v2: &'static [Column], v1: &'static [Column]| {
        BTreeMap::from([("v1beta2", v2), ("v1beta1", v1)])
    };
    match kind {
        "AdmissionCheck" => KindRules {
            short_names: &["ac"],
            columns: BTreeMap::new(),
            cel: both(AC_RULES, AC_RULES),
        },
        "MultiKueueConfig" => KindRules {
            short_names: &["mkconf"],
            columns: BTreeMap::new(),
            cel: BTreeMap::from([("v1beta2", MKCONF_RULES)]),
        },
        "MultiKueueCluster" => KindRules {
            short_names: &["mkc"],
            columns: cols(MKC_COLUMNS, MKC_COLUMNS),
            cel: BTreeMap::from([("v1beta2", MKC_RULES)]),
        },
        "ProvisioningRequestConfig" => KindRules {
            short_names: &["prc"],
            columns: BTreeMap::new(),
            cel: BTreeMap::new(),
        },
        "ClusterQueue" => KindRules {
            short_names: &["cq"],
            columns: cols(CQ_COLUMNS_V1BETA2, CQ_COLUMNS_V1BETA1),
            cel: both(CQ_RULES_V1BETA2, CQ_RULES_V1BETA1),
        },
        "Cohort" => KindRules {
            short_names: &["co"],
            columns: BTreeMap::new(),
            cel: both(COHORT_RULES, COHORT_RULES),
        },
        "LocalQueue" => KindRules {
            short_names: &["queue", "queues", "lq"],
            columns: cols(LQ_COLUMNS, LQ_COLUMNS),
            cel: both(LQ_RULES, LQ_RULES),
        },
        "ResourceFlavor" => KindRules {
            short_names: &["flavor", "flavors", "rf"],
            columns: BTreeMap::new(),
            cel: both(RF_RULES, RF_RULES),
        },
        "Topology" => KindRules {
            short_names: &["topo"],
            columns: BTreeMap::new(),
            cel: both(TOPOLOGY_RULES, TOPOLOGY_RULES),
        },
        "WorkloadPriorityClass" => KindRules {
            short_names: &["wpc"],
            columns: cols(WPC_COLUMNS, WPC_COLUMNS),
            cel: BTreeMap::new(),
        },
        "Workload" => KindRules {
            short_names: &["kwl", "kueueworkload", "kueueworkloads"],
            columns: cols(WL_COLUMNS, WL_COLUMNS),
            cel: both(WL_RULES_V1BETA2, WL_RULES_V1BETA1),
        },
        _ => KindRules::default(),
    }
}

/// WorkloadPriorityClass keeps `value` and `description` at the top level (no spec), so its
/// schema is written here rather than derived.
pub fn workload_priority_class(version: &str) -> CustomResourceDefinition {
    let prop = |type_: &str, description: &str| JSONSchemaProps {
        type_: Some(type_.into()),
        description: Some(description.into()),
        ..JSONSchemaProps::default()
    };
    let mut description = prop(
        "string",
        "Guidance on when to use this class (at most 2048 characters).",
    );
    description.max_length = Some(2048);
    let mut value = prop("integer", "Priority given to workloads using this class.");
    value.format = Some("int32".into());
    let schema = JSONSchemaProps {
        type_: Some("object".into()),
        description: Some(
            "A named priority value for Workloads, independent of pod priority.".into(),
        ),
        required: Some(vec!["value".into()]),
        properties: Some(BTreeMap::from([
            (
                "apiVersion".into(),
                prop("string", "APIVersion of this object."),
            ),
            ("kind".into(), prop("string", "Kind of this object.")),
            (
                "metadata".into(),
                JSONSchemaProps {
                    type_: Some("object".into()),
                    ..JSONSchemaProps::default()
                },
            ),
            ("value".into(), value),
            ("description".into(), description),
        ])),
        ..JSONSchemaProps::default()
    };
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some("workloadpriorityclasses.kueue.x-k8s.io".into()),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: super::GROUP.into(),
            names: CustomResourceDefinitionNames {
                kind: "WorkloadPriorityClass".into(),
                plural: "workloadpriorityclasses".into(),
                singular: Some("workloadpriorityclass".into()),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Cluster".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: version.into(),
                served: true,
                storage: version == super::STORAGE_VERSION,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                // Kueue declares an empty subresources block for this kind.
                subresources: Some(CustomResourceSubresources::default()),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

const fn col(
    name: &'static str,
    type_: &'static str,
    json_path: &'static str,
    description: &'static str,
    priority: i32,
) -> Column {
    Column {
        name,
        type_,
        json_path,
        description,
        priority,
    }
}

const fn rule(path: &'static str, rule: &'static str, message: &'static str) -> Rule {
    Rule {
        path,
        rule,
        message,
    }
}
