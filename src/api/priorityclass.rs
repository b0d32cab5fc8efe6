//! WorkloadPriorityClass (kueue.x-k8s.io/v1beta2, cluster-scoped).
//!
//! Kueue keeps `value` and `description` at the top level rather than in a spec, so the
//! type is written by hand instead of derived with `CustomResource`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ClusterResourceScope;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A named priority value for Workloads, independent of pod priority.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClass {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Priority given to workloads using this class.
    pub value: i32,
    /// Free-form guidance on when to use this class (at most 2048 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl WorkloadPriorityClass {
    /// A class with the given name and value.
    pub fn new(name: &str, value: i32) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            value,
            description: None,
        }
    }
}

impl Serialize for WorkloadPriorityClass {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let fields = 4 + usize::from(self.description.is_some());
        let mut s = ser.serialize_struct("WorkloadPriorityClass", fields)?;
        s.serialize_field("apiVersion", "kueue.x-k8s.io/v1beta2")?;
        s.serialize_field("kind", "WorkloadPriorityClass")?;
        s.serialize_field("metadata", &self.metadata)?;
        s.serialize_field("value", &self.value)?;
        if let Some(d) = &self.description {
            s.serialize_field("description", d)?;
        }
        s.end()
    }
}

impl kube::Resource for WorkloadPriorityClass {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "WorkloadPriorityClass".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "kueue.x-k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1beta2".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "workloadpriorityclasses".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::{Resource, ResourceExt};

    #[test]
    fn round_trips_with_type_meta() {
        let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 1000\ndescription: hi\n";
        let w: WorkloadPriorityClass = serde_norway::from_str(yaml).expect("valid");
        assert_eq!(w.value, 1000);
        assert_eq!(w.name_any(), "high");
        let out = serde_json::to_value(&w).expect("serializable");
        assert_eq!(out["kind"], "WorkloadPriorityClass");
        assert_eq!(out["value"], 1000);
        assert_eq!(
            WorkloadPriorityClass::api_version(&()),
            "kueue.x-k8s.io/v1beta2"
        );
    }
}
