//! Kueue's visibility API on the wire (apis/visibility/v1beta2 and v1beta1): the paths,
//! the `limit`/`offset` options with Kueue's defaults and bounds, the discovery documents
//! and the `PendingWorkloadsSummary` and `Status` bodies. Pure: no I/O.

use serde_json::{Value, json};

use crate::controller::pending::{Estimates, PendingTarget};
use crate::engine::{Millis, PendingWorkload};

/// The API group kuota serves for Kueue.
pub const GROUP: &str = "visibility.kueue.x-k8s.io";
/// The versions, preferred first (Kueue's `PrioritizedVersions`).
pub const VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];
/// kuota's own group beside Kueue's: the same pages, each item with its start estimate
/// (Kueue's types stay byte for byte what Kueue serves).
pub const KUOTA_GROUP: &str = "visibility.kuota.dev";
pub const KUOTA_VERSIONS: [&str; 1] = ["v1alpha1"];

/// An API group this server serves, with its versions, preferred first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    pub name: &'static str,
    pub versions: &'static [&'static str],
}

/// Kueue's group.
pub const KUEUE: Group = Group {
    name: GROUP,
    versions: &VERSIONS,
};
/// kuota's group.
pub const KUOTA: Group = Group {
    name: KUOTA_GROUP,
    versions: &KUOTA_VERSIONS,
};

/// One served version of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupVersion {
    pub group: Group,
    pub version: &'static str,
}

impl GroupVersion {
    /// `<group>/<version>`.
    pub fn api_version(self) -> String {
        format!("{}/{}", self.group.name, self.version)
    }

    /// Whether items carry kuota's start estimates.
    pub fn has_estimates(self) -> bool {
        self.group == KUOTA
    }
}
/// Kueue's `DefaultPendingWorkloadsLimit` (pkg/constants).
pub const DEFAULT_LIMIT: i64 = 1000;
/// Kueue's `MaxPendingWorkloadsLimit` (pkg/constants): larger limits are cut to it.
pub const MAX_LIMIT: i64 = 100_000;

/// What a request under the group asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/apis/<group>`: the APIGroup document.
    Group(Group),
    /// `/apis/<group>/<version>`: the APIResourceList the aggregator and kubectl read.
    Resources { version: GroupVersion },
    /// `/apis/<group>/<version>/clusterqueues/<name>/pendingworkloads`.
    ClusterQueue { version: GroupVersion, name: String },
    /// `/apis/<group>/<version>/namespaces/<ns>/localqueues/<name>/pendingworkloads`.
    LocalQueue {
        version: GroupVersion,
        namespace: String,
        name: String,
    },
}

/// Reads a request path; `None` for anything this API does not serve.
pub fn route(path: &str) -> Option<Route> {
    let rest = path.strip_prefix("/apis/")?.trim_end_matches('/');
    let parts: Vec<&str> = rest.split('/').collect();
    let group = [KUEUE, KUOTA]
        .into_iter()
        .find(|g| parts.first() == Some(&g.name))?;
    let version = match parts.get(1) {
        None => return Some(Route::Group(group)),
        Some(v) => GroupVersion {
            group,
            version: group.versions.iter().find(|known| *known == v)?,
        },
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

/// Kueue's `PendingWorkloadsSummary` for a page; in kuota's group each item also has its
/// `startEstimate`, and the summary the forecast's time.
pub fn summary(version: GroupVersion, page: &[PendingWorkload], estimates: &Estimates) -> Value {
    let items: Vec<Value> = page
        .iter()
        .map(|w| {
            let mut item = json!({
                "metadata": {
                    "name": &*w.key.name,
                    "namespace": &*w.key.namespace,
                    "creationTimestamp": timestamp(w.created),
                },
                "priority": w.priority,
                "localQueueName": w.local_queue,
                "positionInClusterQueue": w.position_in_cluster_queue,
                "positionInLocalQueue": w.position_in_local_queue,
            });
            if version.has_estimates() {
                item["startEstimate"] = start_estimate(w, estimates);
            }
            item
        })
        .collect();
    let mut out = json!({
        "kind": "PendingWorkloadsSummary",
        "apiVersion": version.api_version(),
        "metadata": {},
        "items": items,
    });
    if let (true, Estimates::Latest(f)) = (version.has_estimates(), estimates) {
        out["forecastTime"] = timestamp(f.at);
    }
    out
}

/// One workload's `startEstimate`: the estimated admission (`time`, the middle run) with
/// its range (`earliest`, `latest`), the wait from the forecast's time, the weakest
/// runtime source it rests on; or `unknown`, saying why there is none.
fn start_estimate(w: &PendingWorkload, estimates: &Estimates) -> Value {
    let f = match estimates {
        Estimates::Off => return json!({"unknown": "start estimates are turned off"}),
        Estimates::NotYet => return json!({"unknown": "no forecast has finished yet"}),
        Estimates::Latest(f) => f,
    };
    let Some(e) = f.estimates.get(&w.key) else {
        return json!({"unknown": "queued after the last forecast"});
    };
    let Some(p50) = e.p50 else {
        let why = e
            .unknown
            .map_or("not admitted in the forecast", |u| u.as_str());
        return json!({"unknown": why});
    };
    let mut out = json!({
        "time": timestamp(p50),
        "waitSeconds": (p50 - f.at).max(0) / 1000,
        // `none`: it is admitted without waiting for anything to end.
        "source": e.source.map_or("none", |s| s.as_str()),
    });
    if let Some(low) = e.low {
        out["earliest"] = timestamp(low);
    }
    if let Some(high) = e.high {
        out["latest"] = timestamp(high);
    }
    out
}

/// The APIGroup document of `/apis/<group>`.
pub fn group(group: Group) -> Value {
    let versions: Vec<Value> = group
        .versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{}/{v}", group.name), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group.name,
        "versions": versions,
        "preferredVersion": versions[0],
    })
}

/// The APIResourceList of `/apis/<group>/<version>`: the two queue kinds (no verbs of
/// their own; Kueue installs them only to hang the subresource on) and their
/// `pendingworkloads` subresources (get).
pub fn resources(version: GroupVersion) -> Value {
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
        "groupVersion": version.api_version(),
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
pub fn not_found(group: Group, kind: &str, name: &str) -> Value {
    let group = group.name;
    status(
        404,
        "NotFound",
        &format!("{kind}.{group} {name:?} not found"),
        Some(json!({"name": name, "group": group, "kind": kind})),
    )
}

/// The API server's 403 for a request its authorizer denied (`errors.NewForbidden` with
/// the authorizer's wording), `reason` appended when the authorizer gave one.
pub fn forbidden(group: Group, user: &str, target: &PendingTarget, reason: &str) -> Value {
    let group = group.name;
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
        "User {user:?} cannot get resource \"{resource}/pendingworkloads\" in API group {group:?} {scope}"
    );
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    status(
        403,
        "Forbidden",
        &format!("{resource}.{group} {name:?} is forbidden: {why}"),
        Some(json!({"name": name, "group": group, "kind": resource})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::WorkloadKey;

    #[test]
    fn routes_follow_kueues_paths() {
        let base = "/apis/visibility.kueue.x-k8s.io";
        let v = |version| GroupVersion {
            group: KUEUE,
            version,
        };
        assert_eq!(route(base), Some(Route::Group(KUEUE)));
        assert_eq!(
            route(&format!("{base}/v1beta1")),
            Some(Route::Resources {
                version: v("v1beta1")
            })
        );
        assert_eq!(
            route(&format!(
                "{base}/v1beta2/clusterqueues/cq-a/pendingworkloads"
            )),
            Some(Route::ClusterQueue {
                version: v("v1beta2"),
                name: "cq-a".into()
            })
        );
        assert_eq!(
            route(&format!(
                "{base}/v1beta2/namespaces/team/localqueues/lq/pendingworkloads"
            )),
            Some(Route::LocalQueue {
                version: v("v1beta2"),
                namespace: "team".into(),
                name: "lq".into()
            })
        );
        assert_eq!(
            route("/apis/visibility.kuota.dev/v1alpha1/clusterqueues/cq-a/pendingworkloads"),
            Some(Route::ClusterQueue {
                version: GroupVersion {
                    group: KUOTA,
                    version: "v1alpha1"
                },
                name: "cq-a".into()
            })
        );
        for bad in [
            format!("{base}/v1/clusterqueues/a/pendingworkloads"),
            format!("{base}/v1beta2/clusterqueues/a"),
            format!("{base}/v1beta2/clusterqueues//pendingworkloads"),
            format!("{base}/v1beta2/localqueues/a/pendingworkloads"),
            "/apis/kueue.x-k8s.io/v1beta2".into(),
            "/apis/visibility.kuota.dev/v1beta2".into(),
            "/apis/visibility.kueue.x-k8s.io/v1alpha1".into(),
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
        let v = |version| GroupVersion {
            group: KUEUE,
            version,
        };
        let s = summary(v("v1beta1"), &page, &Estimates::NotYet);
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
        assert_eq!(
            summary(v("v1beta2"), &[], &Estimates::NotYet)["items"],
            json!([])
        );
    }

    /// kuota's group: Kueue's fields, then each item's start estimate from the latest
    /// forecast (or why there is none), and the forecast's time.
    #[test]
    fn kuotas_summary_adds_each_items_start_estimate() {
        use crate::forecast::{Estimate, Forecast, RuntimeSource, Unknown};
        let item = |name: &str| PendingWorkload {
            key: WorkloadKey::new("team", name),
            local_queue: "lq".into(),
            priority: 0,
            created: 1_700_000_000_000,
            position_in_cluster_queue: 0,
            position_in_local_queue: 0,
        };
        let mut forecast = Forecast {
            at: 1_700_000_000_000,
            ..Forecast::default()
        };
        forecast.estimates.insert(
            WorkloadKey::new("team", "a"),
            Estimate {
                low: Some(1_700_000_060_000),
                p50: Some(1_700_000_120_000),
                high: Some(1_700_000_600_000),
                source: Some(RuntimeSource::Learned),
                unknown: None,
            },
        );
        forecast.estimates.insert(
            WorkloadKey::new("team", "b"),
            Estimate {
                low: None,
                p50: None,
                high: None,
                source: None,
                unknown: Some(Unknown::NoRuntimeKnowledge),
            },
        );
        let kuota = GroupVersion {
            group: KUOTA,
            version: "v1alpha1",
        };
        let latest = Estimates::Latest(std::sync::Arc::new(forecast));
        let s = summary(kuota, &[item("a"), item("b"), item("c")], &latest);
        assert_eq!(s["apiVersion"], "visibility.kuota.dev/v1alpha1");
        assert_eq!(s["forecastTime"], "2023-11-14T22:13:20Z");
        assert_eq!(
            s["items"][0]["startEstimate"],
            json!({"time": "2023-11-14T22:15:20Z", "earliest": "2023-11-14T22:14:20Z",
                   "latest": "2023-11-14T22:23:20Z", "waitSeconds": 120, "source": "learned"})
        );
        assert_eq!(s["items"][0]["positionInLocalQueue"], 0);
        assert_eq!(
            s["items"][1]["startEstimate"],
            json!({"unknown": "no runtime knowledge"})
        );
        assert_eq!(
            s["items"][2]["startEstimate"],
            json!({"unknown": "queued after the last forecast"})
        );
        let off = summary(kuota, &[item("a")], &Estimates::Off);
        assert_eq!(
            off["items"][0]["startEstimate"],
            json!({"unknown": "start estimates are turned off"})
        );
        // Kueue's group stays Kueue's: no estimate, no forecast time.
        let kueue = GroupVersion {
            group: KUEUE,
            version: "v1beta2",
        };
        let s = summary(kueue, &[item("a")], &latest);
        assert!(s.get("forecastTime").is_none());
        assert!(s["items"][0].get("startEstimate").is_none());
    }

    #[test]
    fn errors_are_the_api_servers_statuses() {
        let s = not_found(KUEUE, "clusterqueue", "nope");
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
        let s = forbidden(KUEUE, "alice", &target, "");
        assert_eq!(
            s["message"],
            "localqueues.visibility.kueue.x-k8s.io \"lq\" is forbidden: User \"alice\" cannot get \
             resource \"localqueues/pendingworkloads\" in API group \"visibility.kueue.x-k8s.io\" \
             in the namespace \"b\""
        );
        assert_eq!(s["code"], 403);
    }
}
