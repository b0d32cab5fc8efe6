//! Robustness: arbitrary bytes and mutated valid reviews never panic the handlers, and every
//! answer is well formed (a 400 JSON Status, or a review echoing the uid whose patch applies).

mod webhook_common;

use base64::Engine as _;
use kuota::webhook::{Route, WebhookState, handle, routes};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};
use webhook_common::*;

fn state() -> &'static Arc<WebhookState> {
    static S: OnceLock<Arc<WebhookState>> = OnceLock::new();
    S.get_or_init(synced_state)
}

fn all_routes() -> &'static [Route] {
    static R: OnceLock<Vec<Route>> = OnceLock::new();
    R.get_or_init(routes)
}

/// Checks the answer's shape; returns the decoded patch of an allowed review, if any.
fn well_formed(
    body: &[u8],
    result: Result<Vec<u8>, kuota::webhook::review::BadRequest>,
) -> Option<json_patch::Patch> {
    match result {
        Err(bad) => {
            let v: Value = serde_json::from_slice(&bad.to_json()).expect("400 body is JSON");
            assert_eq!(v["code"], 400);
            assert!(!bad.to_string().is_empty());
            None
        }
        Ok(out) => {
            let v: Value = serde_json::from_slice(&out).expect("review is JSON");
            assert_eq!(v["kind"], "AdmissionReview");
            let sent: Value = serde_json::from_slice(body).expect("an answered body was JSON");
            assert_eq!(v["response"]["uid"], sent["request"]["uid"]);
            let allowed = v["response"]["allowed"]
                .as_bool()
                .expect("allowed is a bool");
            if !allowed {
                let code = v["response"]["status"]["code"]
                    .as_u64()
                    .expect("denials carry a code");
                assert!([400, 403, 422].contains(&code), "{v}");
            }
            v["response"]["patch"].as_str().map(|p| {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(p)
                    .expect("base64");
                serde_json::from_slice(&raw).expect("patch is a JSON patch")
            })
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-zA-Z0-9./_~ -]{0,12}".prop_map(Value::from),
        Just(json!("kueue.x-k8s.io/queue-name")),
        Just(json!("-1")),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z/.-]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer inside `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn base_reviews() -> Vec<(Value, &'static str)> {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "labels": {"kueue.x-k8s.io/pod-group-name": "g"},
                     "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}});
    vec![
        (
            review(JOB, "CREATE", Some(&job()), None),
            "/mutate-batch-v1-job",
        ),
        (
            review(JOB, "UPDATE", Some(&job()), Some(&job())),
            "/validate-batch-v1-job",
        ),
        (review(POD, "CREATE", Some(&pod), None), "/mutate--v1-pod"),
        (
            review(POD, "UPDATE", Some(&pod), Some(&pod)),
            "/validate--v1-pod",
        ),
        (
            review(
                ("kueue.x-k8s.io", "v1beta2", "ClusterQueue"),
                "CREATE",
                Some(&cq),
                None,
            ),
            "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        ),
        (
            review(
                ("kueue.x-k8s.io", "v1beta2", "ClusterQueue"),
                "UPDATE",
                Some(&cq),
                Some(&cq),
            ),
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        ),
    ]
}

proptest! {
    // 256 cases by default; set PROPTEST_CASES for a longer run.
    #![proptest_config(ProptestConfig::default())]

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512), route in any::<prop::sample::Index>()) {
        let r = route.get(all_routes());
        let result = handle(state(), r, &body);
        if let Ok(out) = &result {
            // Only a decodable review can be answered with 200.
            let v: Value = serde_json::from_slice(out).expect("JSON");
            prop_assert_eq!(&v["kind"], "AdmissionReview");
        } else {
            well_formed(&body, result);
        }
    }

    #[test]
    fn mutated_reviews_get_well_formed_answers(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), arb_json(), any::<bool>()), 1..4),
    ) {
        let bases = base_reviews();
        let (mut review, path) = which.get(&bases).clone();
        for (at, value, remove) in edits {
            let mut ps = Vec::new();
            pointers(&review, String::new(), &mut ps);
            let p = at.get(&ps).clone();
            if p.is_empty() {
                review = value;
                continue;
            }
            let (parent, key) = p.rsplit_once('/').expect("non-root pointer has a parent");
            match review.pointer_mut(parent) {
                Some(Value::Object(m)) => {
                    let key = key.replace("~1", "/").replace("~0", "~");
                    if remove { m.remove(&key); } else { m.insert(key, value); }
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = key.parse::<usize>() && i < a.len() {
                        if remove { a.remove(i); } else { a[i] = value; }
                    }
                }
                _ => {}
            }
        }
        let body = serde_json::to_vec(&review).expect("JSON");
        let route = all_routes().iter().find(|r| r.path == path).expect("route exists");
        let result = handle(state(), route, &body);
        let patch = well_formed(&body, result);
        if let Some(patch) = patch {
            // A patch must apply to the object it was computed for.
            let mut obj = review["request"]["object"].clone();
            prop_assert!(json_patch::patch(&mut obj, &patch).is_ok(), "patch {:?} does not apply to {}", patch, review["request"]["object"]);
        }
    }
}
