//! Kueue's visibility API on the wire (apis/visibility/v1beta2 and v1beta1): the paths,
//! the `limit`/`offset` options with Kueue's defaults and bounds, the discovery documents
//! and the `PendingWorkloadsSummary` and `Status` bodies. Pure: no I/O.

use serde_json::{Value, json};

use crate::controller::pending::PendingTarget;
use crate::engine::{Millis, PendingWorkload};

/// The API group kuota serves for Kueue.
pub const GROUP: &str = "visibility.kueue.x-k8s.io";
/// The versions, preferred first (Kueue's `PrioritizedVersions`).
pub const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];
/// Kueue's `DefaultPendingWorkloadsLimit` (pkg/constants).
pub const DEFAULT_LIMIT: i64 = 1000;
/// Kueue's `MaxPendingWorkloadsLimit` (pkg/constants): larger limits are cut to it.
pub const MAX_LIMIT: i64 = 100_000;

/// What a request under the group asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/apis/<group>`: the APIGroup document.
    Group,
    /// `/apis/<group>/<version>`: the APIResourceList the aggregator and kubectl read.
    Resources { version: &'static str },
    /// `/apis/<group>/<version>/clusterqueues/<name>/pendingworkloads`.
    ClusterQueue { version: &'static str, name: String },
    /// `/apis/<group>/<version>/namespaces/<ns>/localqueues/<name>/pendingworkloads`.
    LocalQueue {
        version: &'static str,
        namespace: String,
        name: String,
    },
}

/// Reads a request path; `None` for anything this API does not serve.
pub fn route(path: &str) -> Option<Route> {
    let rest = path.strip_prefix("/apis/")?.trim_end_matches('/');
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.first() != Some(&GROUP) {
        return None;
    }
    let version = match parts.get(1) {
        None => return Some(Route::Group),
        Some(v) => *VERSIONS.iter().find(|known| *known == v)?,
    };
    let named = |s: &str| !s.is_empty();
    match parts[2..] {
        [] => Some(Route::Resources { version }),
        ["clusterqueues", name, "pendingworkloads"] if named(name) => Some(Route::ClusterQueue {
            version,
            name: name.into(),
        }),
        ["namespaces", ns, "localqueues", name, "pendingworkloads"] if named(ns) && named(name) => {
            Some(Route::LocalQueue {
                version,
                namespace: ns.into(),
                name: name.into(),
            })
        }
        _ => None,
    }
}

/// A page request after Kueue's defaulting and bounds (`boundedLimitOffset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageOptions {
    pub offset: usize,
    pub limit: usize,
}

/// Reads `limit` and `offset` from a query string as the API server's parameter codec
/// does: the first value of each, parsed as Go's `strconv.ParseInt` would, a `limit` of 0
/// (or none) defaulted to 1000; then Kueue's bounds: a negative limit lists nothing, a
/// larger one than 100,000 is cut to it, a negative offset counts from 0. The error is the
/// message of the 400 the API server's handler answers.
pub fn page_options(query: Option<&str>) -> Result<PageOptions, String> {
    let (mut limit, mut offset) = (None, None);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match key {
            "limit" => &mut limit,
            "offset" => &mut offset,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(parse_int(&percent_decode(value))?);
        }
    }
    let limit = match limit.unwrap_or(0) {
        0 => DEFAULT_LIMIT,
        l => l,
    };
    Ok(PageOptions {
        limit: limit.clamp(0, MAX_LIMIT) as usize,
        offset: usize::try_from(offset.unwrap_or(0).max(0)).unwrap_or(usize::MAX),
    })
}

/// Go's `strconv.ParseInt(s, 10, 64)` and its error text.
fn parse_int(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseInt: parsing {s:?}: invalid syntax"));
    }
    s.parse::<i64>()
        .map_err(|_| format!("strconv.ParseInt: parsing {s:?}: value out of range"))
}

/// Percent-decoding of a query value (`+` is a space, as Go's url.ParseQuery reads it).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 2;
            }
            (b, _, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// RFC 3339 in seconds, as apimachinery writes a `metav1.Time`.
fn timestamp(ms: Millis) -> Value {
    match k8s_openapi::jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => Value::String(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        Err(_) => Value::Null,
    }
}

/// Kueue's `PendingWorkloadsSummary` for a page.
pub fn summary(version: &str, page: &[PendingWorkload]) -> Value {
    let items: Vec<Value> = page
        .iter()
        .map(|w| {
            json!({
                "metadata": {
                    "name": &*w.key.name,
                    "namespace": &*w.key.namespace,
                    "creationTimestamp": timestamp(w.created),
                },
                "priority": w.priority,
                "localQueueName": w.local_queue,
                "positionInClusterQueue": w.position_in_cluster_queue,
                "positionInLocalQueue": w.position_in_local_queue,
            })
        })
        .collect();
    json!({
        "kind": "PendingWorkloadsSummary",
        "apiVersion": format!("{GROUP}/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// The APIGroup document of `/apis/<group>`.
pub fn group() -> Value {
    let versions: Vec<Value> = VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    })
}

/// The APIResourceList of `/apis/<group>/<version>`: the two queue kinds (no verbs of
/// their own; Kueue installs them only to hang the subresource on) and their
/// `pendingworkloads` subresources (get).
pub fn resources(version: &str) -> Value {
    let resource = |name: &str, singular: &str, namespaced: bool, verbs: &[&str]| {
        json!({
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": "PendingWorkloadsSummary",
            "verbs": verbs,
        })
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{version}"),
        "resources": [
            resource("clusterqueues", "clusterqueue", false, &[]),
            resource("clusterqueues/pendingworkloads", "", false, &["get"]),
            resource("localqueues", "localqueue", true, &[]),
            resource("localqueues/pendingworkloads", "", true, &["get"]),
        ],
    })
}

/// A `metav1.Status` failure, as apimachinery's `errors.New...` build them.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

/// Kueue's 404 for a queue it does not know: `errors.NewNotFound(visibility.Resource(kind),
/// name)`, with `kind` `clusterqueue` or `localqueue`.
pub fn not_found(kind: &str, name: &str) -> Value {
    status(
        404,
        "NotFound",
        &format!("{kind}.{GROUP} {name:?} not found"),
        Some(json!({"name": name, "group": GROUP, "kind": kind})),
    )
}

/// The API server's 403 for a request its authorizer denied (`errors.NewForbidden` with
/// the authorizer's wording), `reason` appended when the authorizer gave one.
pub fn forbidden(user: &str, target: &PendingTarget, reason: &str) -> Value {
    let (resource, name, scope) = match target {
        PendingTarget::ClusterQueue(name) => {
            ("clusterqueues", name, "at the cluster scope".to_string())
        }
        PendingTarget::LocalQueue { namespace, name } => (
            "localqueues",
            name,
            format!("in the namespace {namespace:?}"),
        ),
    };
    let mut why = format!(
        "User {user:?} cannot get resource \"{resource}/pendingworkloads\" in API group {GROUP:?} {scope}"
    );
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    status(
        403,
        "Forbidden",
        &format!("{resource}.{GROUP} {name:?} is forbidden: {why}"),
        Some(json!({"name": name, "group": GROUP, "kind": resource})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::WorkloadKey;

    #[test]
    fn routes_follow_kueues_paths() {
        let base = "/apis/visibility.kueue.x-k8s.io";
        assert_eq!(route(base), Some(Route::Group));
        assert_eq!(
            route(&format!("{base}/v1beta1")),
            Some(Route::Resources { version: "v1beta1" })
        );
        assert_eq!(
            route(&format!(
                "{base}/v1beta2/clusterqueues/cq-a/pendingworkloads"
            )),
            Some(Route::ClusterQueue {
                version: "v1beta2",
                name: "cq-a".into()
            })
        );
        assert_eq!(
            route(&format!(
                "{base}/v1beta2/namespaces/team/localqueues/lq/pendingworkloads"
            )),
            Some(Route::LocalQueue {
                version: "v1beta2",
                namespace: "team".into(),
                name: "lq".into()
            })
        );
        for bad in [
            format!("{base}/v1/clusterqueues/a/pendingworkloads"),
            format!("{base}/v1beta2/clusterqueues/a"),
            format!("{base}/v1beta2/clusterqueues//pendingworkloads"),
            format!("{base}/v1beta2/localqueues/a/pendingworkloads"),
            "/apis/kueue.x-k8s.io/v1beta2".into(),
        ] {
            assert_eq!(route(&bad), None, "{bad}");
        }
    }

    #[test]
    fn limit_and_offset_take_kueues_defaults_and_bounds() {
        let page = |q: &str| page_options(Some(q));
        let ok = |offset, limit| Ok(PageOptions { offset, limit });
        assert_eq!(page_options(None), ok(0, 1000));
        assert_eq!(page("limit=0"), ok(0, 1000));
        assert_eq!(page("limit=5&offset=2"), ok(2, 5));
        assert_eq!(page("limit=-1"), ok(0, 0));
        assert_eq!(page("offset=-7&limit=3"), ok(0, 3));
        assert_eq!(page("limit=100000000"), ok(0, 100_000));
        assert_eq!(page("limit=3&limit=9"), ok(0, 3));
        assert_eq!(page("limit=%2B4&pretty=true"), ok(0, 4));
        assert_eq!(
            page("limit=abc"),
            Err("strconv.ParseInt: parsing \"abc\": invalid syntax".into())
        );
        assert_eq!(
            page("offset=99999999999999999999"),
            Err("strconv.ParseInt: parsing \"99999999999999999999\": value out of range".into())
        );
        assert_eq!(
            page("limit="),
            Err("strconv.ParseInt: parsing \"\": invalid syntax".into())
        );
    }

    #[test]
    fn summary_has_kueues_fields() {
        let page = [PendingWorkload {
            key: WorkloadKey::new("team", "job-a"),
            local_queue: "lq".into(),
            priority: 7,
            created: 1_700_000_000_500,
            position_in_cluster_queue: 3,
            position_in_local_queue: 1,
        }];
        let s = summary("v1beta1", &page);
        assert_eq!(s["apiVersion"], "visibility.kueue.x-k8s.io/v1beta1");
        assert_eq!(
            s["items"][0],
            json!({
                "metadata": {"name": "job-a", "namespace": "team",
                             "creationTimestamp": "2023-11-14T22:13:20Z"},
                "priority": 7, "localQueueName": "lq",
                "positionInClusterQueue": 3, "positionInLocalQueue": 1,
            })
        );
        assert_eq!(summary("v1beta2", &[])["items"], json!([]));
    }

    #[test]
    fn errors_are_the_api_servers_statuses() {
        let s = not_found("clusterqueue", "nope");
        assert_eq!(
            s["message"],
            "clusterqueue.visibility.kueue.x-k8s.io \"nope\" not found"
        );
        assert_eq!(
            (s["code"].as_u64(), s["reason"].as_str()),
            (Some(404), Some("NotFound"))
        );
        let target = PendingTarget::LocalQueue {
            namespace: "b".into(),
            name: "lq".into(),
        };
        let s = forbidden("alice", &target, "");
        assert_eq!(
            s["message"],
            "localqueues.visibility.kueue.x-k8s.io \"lq\" is forbidden: User \"alice\" cannot get \
             resource \"localqueues/pendingworkloads\" in API group \"visibility.kueue.x-k8s.io\" \
             in the namespace \"b\""
        );
        assert_eq!(s["code"], 403);
    }
}
