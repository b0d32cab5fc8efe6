//! Kueue's size bounds (`maxItems`, `maxLength`, `maxProperties`) at their schema paths.
//!
//! The API server estimates the worst-case cost of every CEL rule from these bounds and
//! refuses a CRD whose rules could exceed its budget, so Kueue's rules only install on a
//! schema bounded like Kueue's. They also reject oversized objects with Kueue's limits.
//! A bound is applied where kuota's schema has the field; fields kuota does not model are
//! skipped (nothing can be stored there anyway, as unknown fields are pruned).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

/// Which bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `maxItems` of a list.
    MaxItems,
    /// `maxLength` of a string.
    MaxLength,
    /// `maxProperties` of a map.
    MaxProperties,
    /// `minItems` of a list.
    MinItems,
    /// `minLength` of a string.
    MinLength,
}

/// One bound at a dotted schema path (`[]` list items, `{}` map values).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The path.
    pub path: &'static str,
    /// Which bound.
    pub limit: Limit,
    /// Its value.
    pub value: i64,
}

impl Bound {
    /// Sets the bound on a schema node.
    pub fn apply(&self, node: &mut JSONSchemaProps) {
        let slot = match self.limit {
            Limit::MaxItems => &mut node.max_items,
            Limit::MaxLength => &mut node.max_length,
            Limit::MaxProperties => &mut node.max_properties,
            Limit::MinItems => &mut node.min_items,
            Limit::MinLength => &mut node.min_length,
        };
        *slot = Some(self.value);
    }
}

use Limit::{MaxItems, MaxLength, MaxProperties, MinItems, MinLength};

const fn bound(path: &'static str, limit: Limit, value: i64) -> Bound {
    Bound { path, limit, value }
}

/// Kueue's bounds for `kind` (both versions; a path missing in one is skipped).
pub fn bounds(kind: &str) -> &'static [Bound] {
    match kind {
        "AdmissionCheck" => ADMISSION_CHECK,
        "ClusterQueue" => CLUSTER_QUEUE,
        "Cohort" => COHORT,
        "LocalQueue" => LOCAL_QUEUE,
        "MultiKueueCluster" => MULTIKUEUE_CLUSTER,
        "MultiKueueConfig" => MULTIKUEUE_CONFIG,
        "ProvisioningRequestConfig" => PROVISIONING_REQUEST_CONFIG,
        "ResourceFlavor" => RESOURCE_FLAVOR,
        "Topology" => TOPOLOGY,
        "WorkloadPriorityClass" => WORKLOAD_PRIORITY_CLASS,
        "Workload" => WORKLOAD,
        _ => &[],
    }
}

/// AdmissionCheck (Kueue's v1beta2 limits; v1beta1's are the same or absent).
const ADMISSION_CHECK: &[Bound] = &[
    bound("spec.controllerName", MaxLength, 253),
    bound("spec.controllerName", MinLength, 1),
    bound("spec.parameters.apiGroup", MaxLength, 253),
    bound("spec.parameters.apiGroup", MinLength, 1),
    bound("spec.parameters.kind", MaxLength, 63),
    bound("spec.parameters.kind", MinLength, 1),
    bound("spec.parameters.name", MaxLength, 63),
    bound("spec.parameters.name", MinLength, 1),
    bound("status.conditions", MaxItems, 16),
    bound("status.conditions[].message", MaxLength, 32768),
    bound("status.conditions[].reason", MaxLength, 1024),
    bound("status.conditions[].type", MaxLength, 316),
];

const CLUSTER_QUEUE: &[Bound] = &[
    bound("spec.admissionChecksStrategy.admissionChecks", MaxItems, 64),
    bound(
        "spec.admissionChecksStrategy.admissionChecks[].name",
        MaxLength,
        316,
    ),
    bound(
        "spec.admissionChecksStrategy.admissionChecks[].onFlavors",
        MaxItems,
        64,
    ),
    bound(
        "spec.admissionChecksStrategy.admissionChecks[].onFlavors[]",
        MaxLength,
        253,
    ),
    bound("spec.admissionChecks[]", MaxLength, 316),
    bound("spec.cohort", MaxLength, 253),
    bound("spec.cohortName", MaxLength, 253),
    bound(
        "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName",
        MaxLength,
        253,
    ),
    bound(
        "spec.concurrentAdmissionPolicy.migration.mode",
        MaxLength,
        253,
    ),
    bound("spec.resourceGroups", MaxItems, 16),
    bound("spec.resourceGroups[].coveredResources", MaxItems, 64),
    bound("spec.resourceGroups[].flavors", MaxItems, 64),
    bound("spec.resourceGroups[].flavors[].name", MaxLength, 253),
    bound("spec.resourceGroups[].flavors[].resources", MaxItems, 64),
    bound("status.conditions", MaxItems, 16),
    bound("status.conditions[].message", MaxLength, 32768),
    bound("status.conditions[].reason", MaxLength, 1024),
    bound("status.conditions[].type", MaxLength, 316),
    bound("status.flavorsReservation", MaxItems, 64),
    bound("status.flavorsReservation[].name", MaxLength, 253),
    bound("status.flavorsReservation[].resources", MaxItems, 64),
    bound("status.flavorsUsage", MaxItems, 64),
    bound("status.flavorsUsage[].name", MaxLength, 253),
    bound("status.flavorsUsage[].resources", MaxItems, 64),
];

const COHORT: &[Bound] = &[
    bound("spec.parentName", MaxLength, 253),
    bound("spec.resourceGroups", MaxItems, 16),
    bound("spec.resourceGroups[].coveredResources", MaxItems, 64),
    bound("spec.resourceGroups[].flavors", MaxItems, 64),
    bound("spec.resourceGroups[].flavors[].name", MaxLength, 253),
    bound("spec.resourceGroups[].flavors[].resources", MaxItems, 64),
];

const LOCAL_QUEUE: &[Bound] = &[
    bound("spec.clusterQueue", MaxLength, 253),
    bound("status.conditions", MaxItems, 16),
    bound("status.conditions[].message", MaxLength, 32768),
    bound("status.conditions[].reason", MaxLength, 1024),
    bound("status.conditions[].type", MaxLength, 316),
    bound("status.flavorUsage", MaxItems, 64),
    bound("status.flavorUsage[].name", MaxLength, 253),
    bound("status.flavorUsage[].resources", MaxItems, 64),
    bound("status.flavors", MaxItems, 64),
    bound("status.flavorsReservation", MaxItems, 64),
    bound("status.flavorsReservation[].name", MaxLength, 253),
    bound("status.flavorsReservation[].resources", MaxItems, 64),
    bound("status.flavorsUsage", MaxItems, 64),
    bound("status.flavorsUsage[].name", MaxLength, 253),
    bound("status.flavorsUsage[].resources", MaxItems, 64),
    bound("status.flavors[].name", MaxLength, 253),
    bound("status.flavors[].nodeLabels", MaxProperties, 8),
    bound("status.flavors[].nodeTaints", MaxItems, 8),
    bound("status.flavors[].resources", MaxItems, 64),
    bound("status.flavors[].topology.levels", MaxItems, 16),
    bound("status.flavors[].topology.name", MaxLength, 253),
];

const RESOURCE_FLAVOR: &[Bound] = &[
    bound("spec.nodeLabels", MaxProperties, 8),
    bound("spec.nodeTaints", MaxItems, 8),
    bound("spec.tolerations", MaxItems, 8),
    bound("spec.topologyName", MaxLength, 253),
];

const TOPOLOGY: &[Bound] = &[
    bound("spec.levels", MaxItems, 16),
    bound("spec.levels[].nodeLabel", MaxLength, 316),
];

const WORKLOAD_PRIORITY_CLASS: &[Bound] = &[bound("description", MaxLength, 2048)];

const WORKLOAD: &[Bound] = &[
    bound("spec.podSets", MaxItems, 18),
    bound("spec.podSets[].name", MaxLength, 63),
    bound(
        "spec.podSets[].topologyRequest.podIndexLabel",
        MaxLength,
        317,
    ),
    bound(
        "spec.podSets[].topologyRequest.podSetGroupName",
        MaxLength,
        256,
    ),
    bound(
        "spec.podSets[].topologyRequest.podSetSliceRequiredTopology",
        MaxLength,
        63,
    ),
    bound(
        "spec.podSets[].topologyRequest.podsetSliceRequiredTopologyConstraints",
        MaxItems,
        3,
    ),
    bound(
        "spec.podSets[].topologyRequest.podsetSliceRequiredTopologyConstraints[].topology",
        MaxLength,
        63,
    ),
    bound("spec.podSets[].topologyRequest.preferred", MaxLength, 63),
    bound("spec.podSets[].topologyRequest.required", MaxLength, 63),
    bound(
        "spec.podSets[].topologyRequest.subGroupIndexLabel",
        MaxLength,
        317,
    ),
    bound("spec.preemptionGates", MaxItems, 8),
    bound("spec.preemptionGates[].name", MaxLength, 63),
    bound("spec.priorityClassName", MaxLength, 253),
    bound("spec.priorityClassRef.name", MaxLength, 253),
    bound("spec.queueName", MaxLength, 253),
    bound("status.admission.clusterQueue", MaxLength, 253),
    bound("status.admission.podSetAssignments", MaxItems, 18),
    bound(
        "status.admission.podSetAssignments[].delayedTopologyRequest",
        MaxLength,
        7,
    ),
    bound(
        "status.admission.podSetAssignments[].flavors{}",
        MaxLength,
        253,
    ),
    bound("status.admission.podSetAssignments[].name", MaxLength, 63),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.domains[].values",
        MaxItems,
        16,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.levels",
        MaxItems,
        16,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.levels[]",
        MaxLength,
        317,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices",
        MaxItems,
        1000,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].podCounts.individual",
        MaxItems,
        100000,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel",
        MaxItems,
        16,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[].individual.prefix",
        MaxLength,
        63,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[].individual.roots",
        MaxItems,
        100000,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[].individual.roots[]",
        MaxLength,
        63,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[].individual.suffix",
        MaxLength,
        63,
    ),
    bound(
        "status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[].universal",
        MaxLength,
        63,
    ),
    bound("status.clusterName", MaxLength, 256),
    bound("status.conditions", MaxItems, 16),
    bound("status.conditions[].message", MaxLength, 32768),
    bound("status.conditions[].reason", MaxLength, 1024),
    bound("status.conditions[].type", MaxLength, 316),
    bound("status.nominatedClusterNames", MaxItems, 20),
    bound("status.nominatedClusterNames[]", MaxLength, 256),
    bound("status.preemptionGates", MaxItems, 8),
    bound("status.preemptionGates[].name", MaxLength, 63),
    bound("status.reclaimablePods", MaxItems, 18),
    bound("status.reclaimablePods[].name", MaxLength, 63),
    bound("status.resourceRequests", MaxItems, 18),
    bound("status.resourceRequests[].name", MaxLength, 63),
    bound("status.schedulingStats.evictions", MaxItems, 256),
    bound("status.schedulingStats.evictions[].reason", MaxLength, 316),
    bound(
        "status.schedulingStats.evictions[].underlyingCause",
        MaxLength,
        316,
    ),
    bound("status.unhealthyNodes", MaxItems, 8),
    bound("status.unhealthyNodes[].name", MaxLength, 63),
];

/// MultiKueueConfig (v1beta1 has no item length bound).
const MULTIKUEUE_CONFIG: &[Bound] = &[
    bound("spec.clusters", MaxItems, 20),
    bound("spec.clusters", MinItems, 1),
    bound("spec.clusters[]", MaxLength, 256),
];

/// MultiKueueCluster (v1beta2 paths under `clusterSource`, v1beta1's at the spec root).
const MULTIKUEUE_CLUSTER: &[Bound] = &[
    bound("spec.clusterSource.kubeConfig.location", MaxLength, 256),
    bound("spec.clusterSource.kubeConfig.location", MinLength, 1),
    bound("spec.clusterSource.clusterProfileRef.name", MaxLength, 256),
    bound("spec.clusterSource.clusterProfileRef.name", MinLength, 1),
    bound("spec.kubeConfig.location", MaxLength, 256),
    bound("spec.kubeConfig.location", MinLength, 1),
    bound("spec.clusterProfileRef.name", MaxLength, 256),
    bound("spec.clusterProfileRef.name", MinLength, 1),
    bound("status.conditions", MaxItems, 16),
    bound("status.conditions[].message", MaxLength, 32768),
];

/// ProvisioningRequestConfig (the same in both versions).
const PROVISIONING_REQUEST_CONFIG: &[Bound] = &[
    bound("spec.provisioningClassName", MaxLength, 253),
    bound("spec.provisioningClassName", MinLength, 1),
    bound("spec.parameters", MaxProperties, 100),
    bound("spec.parameters{}", MaxLength, 255),
    bound("spec.managedResources", MaxItems, 100),
    bound("spec.podSetUpdates.nodeSelector", MaxItems, 8),
    bound("spec.podSetUpdates.nodeSelector[].key", MaxLength, 317),
    bound("spec.podSetUpdates.nodeSelector[].key", MinLength, 1),
    bound(
        "spec.podSetUpdates.nodeSelector[].valueFromProvisioningClassDetail",
        MaxLength,
        32768,
    ),
    bound(
        "spec.podSetUpdates.nodeSelector[].valueFromProvisioningClassDetail",
        MinLength,
        1,
    ),
];

/// Kueue's `pattern`s at their schema paths (kinds without a webhook of their own, whose
/// schema is all the validation the API server does).
pub fn patterns(kind: &str) -> &'static [(&'static str, &'static str)] {
    match kind {
        "AdmissionCheck" => &[
            (
                "spec.parameters.apiGroup",
                "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            ),
            ("spec.parameters.kind", "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"),
            ("spec.parameters.name", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        ],
        "ProvisioningRequestConfig" => &[
            (
                "spec.provisioningClassName",
                "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            ),
            (
                "spec.podSetUpdates.nodeSelector[].key",
                "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
        ],
        _ => &[],
    }
}
