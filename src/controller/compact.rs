//! A watched object kept small in a reflector store: its metadata decoded, its spec and
//! status kept as the JSON text the API server sent.
//!
//! Why: a `DynamicObject` holds its body as a `serde_json::Value` tree, about seven times
//! the size of its JSON text. The controller keeps every Job and every Workload of the
//! cluster in memory, and reads a stored one only to decode it into its typed form, so the
//! tree buys nothing. Kept as text, 10,000 Jobs with their Workloads fit in a fraction of
//! the memory.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// An object with a spec and a status, as [`DynamicObject`] but with its body as text.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CompactObject {
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text"
    )]
    pub spec: Option<Box<RawValue>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "text"
    )]
    pub status: Option<Box<RawValue>>,
}

/// Reads a part as a value and keeps its text. Not `RawValue`'s own reader: that one
/// works only straight from serde_json's parser, and a watch event whose `object` comes
/// before its `type` is buffered by serde first (the API server sends `type` first, but
/// nothing promises it).
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    let Some(value) = Option::<serde_json::Value>::deserialize(d)? else {
        return Ok(None);
    };
    RawValue::from_string(value.to_string())
        .map(Some)
        .map_err(D::Error::custom)
}

impl CompactObject {
    /// The object built from JSON.
    pub fn from_value(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// The spec decoded into `T`, which names only the fields it reads (serde skips the
    /// rest of the text without building it); `None` without a spec.
    pub fn spec_as<'a, T: Deserialize<'a>>(&'a self) -> Option<Result<T, serde_json::Error>> {
        self.spec.as_deref().map(|s| serde_json::from_str(s.get()))
    }

    /// The status decoded into `T`, as [`Self::spec_as`].
    pub fn status_as<'a, T: Deserialize<'a>>(&'a self) -> Option<Result<T, serde_json::Error>> {
        self.status
            .as_deref()
            .map(|s| serde_json::from_str(s.get()))
    }
}

impl Resource for CompactObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Cow::from(&dt.kind)
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Cow::from(&dt.group)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::from(&dt.version)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Cow::from(&dt.api_version)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Cow::from(&dt.plural)
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
    use kube::api::WatchEvent;
    use serde_json::json;

    fn workload() -> serde_json::Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-a-1", "namespace": "team", "labels": {"x": "y"}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2}],
                     "aFieldFromANewerKueue": {"kept": true}},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]},
        })
    }

    #[test]
    fn an_object_read_from_a_watch_event_comes_back_whole() {
        // As the API server sends it: the event's type first.
        let line = format!(r#"{{"type":"MODIFIED","object":{}}}"#, workload());
        let event: WatchEvent<CompactObject> = serde_json::from_str(&line).expect("an event");
        let WatchEvent::Modified(obj) = event else {
            panic!("a modified event");
        };
        assert_eq!(obj.metadata.name.as_deref(), Some("job-a-1"));
        assert_eq!(serde_json::to_value(&obj).expect("json"), workload());
    }

    #[test]
    fn an_event_with_its_object_before_its_type_is_read_too() {
        let line = format!(r#"{{"object":{},"type":"ADDED"}}"#, workload());
        let event: WatchEvent<CompactObject> = serde_json::from_str(&line).expect("an event");
        assert!(matches!(event, WatchEvent::Added(o) if o.spec.is_some() && o.status.is_some()));
    }

    #[test]
    fn a_part_of_the_spec_or_status_is_read_without_the_rest() {
        #[derive(Deserialize)]
        struct Queue<'a> {
            #[serde(rename = "queueName", borrow)]
            queue_name: Cow<'a, str>,
        }
        let obj = CompactObject::from_value(workload()).expect("an object");
        let spec: Queue = obj.spec_as().expect("a spec").expect("decodes");
        assert_eq!(spec.queue_name, "lq");
        let no_status = CompactObject::from_value(json!({"metadata": {"name": "n"}}));
        assert!(no_status.expect("an object").status_as::<Queue>().is_none());
    }

    #[test]
    fn a_spec_of_the_wrong_shape_is_an_error_not_a_panic() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Count {
            count: i64,
        }
        let obj = CompactObject::from_value(json!({"metadata": {}, "spec": {"count": "two"}}))
            .expect("an object");
        assert!(obj.spec_as::<Count>().expect("a spec").is_err());
    }
}
