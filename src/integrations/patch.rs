//! Builds RFC 6902 JSON patches against an object whose shape is only partly known.
//!
//! Mutations add map entries and list items whose parent may be missing. The builder emits
//! `add parent {k: v}` for the first entry of a missing parent and folds later entries into
//! that same operation, so the patch never adds below a path that does not exist yet.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

/// Accumulates patch operations.
#[derive(Debug, Default, Clone)]
pub struct PatchBuilder {
    ops: Vec<PatchOperation>,
}

impl PatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no operation was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The recorded operations.
    pub fn into_ops(self) -> Vec<PatchOperation> {
        self.ops
    }

    /// Appends operations recorded elsewhere.
    pub fn extend(&mut self, other: PatchBuilder) {
        self.ops.extend(other.ops);
    }

    /// Sets `parent[key] = value`, creating `parent` (an object) when `parent_exists` is false.
    pub fn set_entry(&mut self, parent: &[&str], parent_exists: bool, key: &str, value: Value) {
        if parent_exists {
            self.push_add(pointer(parent.iter().copied().chain([key])), value);
        } else if let Some(Value::Object(map)) = self.pending_value(parent) {
            map.insert(key.to_string(), value);
        } else {
            let mut map = serde_json::Map::new();
            map.insert(key.to_string(), value);
            self.push_add(pointer(parent.iter().copied()), Value::Object(map));
        }
    }

    /// Appends `item` to the list at `list`, creating the list when `list_exists` is false.
    pub fn push_item(&mut self, list: &[&str], list_exists: bool, item: Value) {
        if list_exists {
            self.push_add(pointer(list.iter().copied().chain(["-"])), item);
        } else if let Some(Value::Array(items)) = self.pending_value(list) {
            items.push(item);
        } else {
            self.push_add(pointer(list.iter().copied()), Value::Array(vec![item]));
        }
    }

    fn push_add(&mut self, path: PointerBuf, value: Value) {
        self.ops
            .push(PatchOperation::Add(AddOperation { path, value }));
    }

    /// The value of an earlier `add` at exactly `path`, to fold more entries into it.
    fn pending_value(&mut self, path: &[&str]) -> Option<&mut Value> {
        let want = pointer(path.iter().copied());
        self.ops.iter_mut().find_map(|op| match op {
            PatchOperation::Add(a) if a.path == want => Some(&mut a.value),
            _ => None,
        })
    }
}

/// A JSON pointer from unescaped tokens (`/` and `~` in label keys are escaped).
pub fn pointer<'t>(tokens: impl IntoIterator<Item = &'t str>) -> PointerBuf {
    PointerBuf::from_tokens(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn folds_entries_into_a_created_parent_and_escapes_keys() {
        let mut b = PatchBuilder::new();
        b.set_entry(
            &["metadata", "labels"],
            false,
            "kueue.x-k8s.io/queue-name",
            json!("q"),
        );
        b.set_entry(&["metadata", "labels"], false, "a", json!("b"));
        b.set_entry(&["metadata", "annotations"], true, "x/y", json!("z"));
        b.push_item(&["spec", "schedulingGates"], false, json!({"name": "g1"}));
        b.push_item(&["spec", "schedulingGates"], false, json!({"name": "g2"}));
        b.push_item(&["metadata", "finalizers"], true, json!("f"));
        let patch = json_patch::Patch(b.into_ops());
        let text = serde_json::to_value(&patch).expect("serializable");
        assert_eq!(
            text,
            json!([
                {"op": "add", "path": "/metadata/labels", "value": {"kueue.x-k8s.io/queue-name": "q", "a": "b"}},
                {"op": "add", "path": "/metadata/annotations/x~1y", "value": "z"},
                {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "g1"}, {"name": "g2"}]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "f"},
            ])
        );
        let mut doc = json!({"metadata": {"annotations": {}, "finalizers": []}, "spec": {}});
        json_patch::patch(&mut doc, &patch).expect("applies");
        assert_eq!(doc["metadata"]["labels"]["a"], "b");
        assert_eq!(doc["metadata"]["finalizers"][0], "f");
    }
}
