//! Strict typed decoding of what users write: every field the type does not know is an
//! error naming its path, and YAML 1.1 booleans are read as kubectl reads them.

use serde::de::DeserializeOwned;
use serde_norway::Value;

use super::locate::{self, Seg};
use super::yaml11::Yaml11;

/// Why a value does not decode: the field and the reason.
#[derive(Debug)]
pub(super) struct FieldProblem {
    /// Path of the offending field within the decoded value.
    pub path: Vec<Seg>,
    /// The reason, without the path.
    pub message: String,
}

/// Decodes `value` as `T`. Unknown fields come first (all of them): a misspelt required
/// field is reported as the unknown field it is, not as the missing one it causes.
pub(super) fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, Vec<FieldProblem>> {
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| {
        // apiVersion and kind were read by the loader, not by the types' own fields.
        if !crate::api::lenient::is_type_meta(&path) {
            unknown.push(locate::from_ignored(&path));
        }
    };
    let decoded: Result<T, _> = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
        Yaml11(value),
        &mut note,
    ));
    if !unknown.is_empty() {
        return Err(unknown
            .into_iter()
            .map(|path| {
                let name = match path.last() {
                    Some(Seg::Key(k)) => k.clone(),
                    _ => String::new(),
                };
                FieldProblem {
                    path,
                    message: format!("unknown field `{name}`"),
                }
            })
            .collect());
    }
    decoded.map_err(|e| {
        vec![FieldProblem {
            path: locate::from_error_path(e.path()),
            message: strip_prefix_path(&e.inner().to_string()),
        }]
    })
}

/// Drops a leading `path: ` that serde_norway may put in front of its message (we print
/// the path our way).
fn strip_prefix_path(msg: &str) -> String {
    if let Some((head, tail)) = msg.split_once(": ")
        && !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/[]".contains(c))
        && !tail.is_empty()
    {
        return tail.to_string();
    }
    msg.to_string()
}

/// `kuota check`'s strictness for one YAML snippet, for the API types' own tests: the
/// types decode leniently, so a test that a field is unknown goes through here.
#[cfg(test)]
pub(crate) fn strict_from_yaml<T: DeserializeOwned>(yaml: &str) -> Option<T> {
    let value: Value = serde_norway::from_str(yaml).ok()?;
    decode(&value).ok()
}
