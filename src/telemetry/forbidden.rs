//! API calls the API server's authorizer refused (HTTP 403): kuota runs without a
//! permission it needs, usually because its ClusterRole was trimmed by hand.
//!
//! A tower layer on kuota's Kubernetes client sees every response, whichever module made
//! the call (watches, writes, Events, the Lease). For each refused verb and resource it
//! logs one error line naming them, counts `kuota_api_forbidden_total{verb,group,resource}`
//! and lists the refusal in `/readyz` (not ready) until the same verb on the same resource
//! succeeds again. The process keeps running: a crash loop would bury the log line that
//! says what to grant.
//!
//! Only the authorizer's refusals count (`... is forbidden: User "..." cannot ...`). Other
//! 403s are not permission problems: an admission webhook denying a request, or the
//! NamespaceLifecycle plugin refusing new content in a namespace being deleted.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::{BoxError, Layer, Service};

use super::labels::Value;

/// The body kube-rs's client stack answers with.
pub type DynBody = dyn http_body::Body<Data = Bytes, Error = BoxError> + Send + Unpin;

/// What a request asked for, in RBAC's terms: `verb` on `resource` (with its
/// subresource, e.g. `jobs/status`) in API `group` (`""` for the core group).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub verb: String,
    pub group: String,
    pub resource: String,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "\"\" (core)"
        } else {
            &self.group
        };
        write!(f, "{} {} in API group {group}", self.verb, self.resource)
    }
}

/// The labels of `kuota_api_forbidden_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AccessLabels {
    pub verb: Value,
    pub group: Value,
    pub resource: Value,
}

/// The RBAC verb and resource of a request to `method` `path_and_query`, as the API
/// server's request-info resolver derives them (`k8s.io/apiserver/pkg/endpoints/request`).
/// `None` for paths that are not resource requests (discovery, `/version`).
pub fn access(method: &http::Method, path_and_query: &str) -> Option<Access> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    if rest.is_empty() {
        return None;
    }
    // `namespaces/<ns>/<resource>...`, except a namespace's own subresources.
    let rest = match rest {
        ["namespaces", _ns, resource, ..] if !matches!(*resource, "status" | "finalize") => {
            &rest[2..]
        }
        _ => rest,
    };
    let resource = match rest {
        [resource, _name, sub, ..] => format!("{resource}/{sub}"),
        [resource, ..] => resource.to_string(),
        [] => return None,
    };
    let named = rest.len() > 1;
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match *method {
        http::Method::GET | http::Method::HEAD if watch => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => return None,
    };
    Some(Access {
        verb: verb.to_string(),
        group: group.to_string(),
        resource,
    })
}

/// Whether a 403's body is the authorizer's refusal (RBAC), not an admission plugin's.
/// The authorizer writes `<what> is forbidden: User "<name>" cannot <verb> ...`
/// (`responsewriters.ForbiddenStatusError`); admission plugins never name the user.
pub fn is_authorization_refusal(body: &[u8]) -> Option<String> {
    let status: serde_json::Value = serde_json::from_slice(body).ok()?;
    let message = status.get("message")?.as_str()?;
    message
        .contains("is forbidden: User \"")
        .then(|| message.to_string())
}

#[derive(Default)]
struct State {
    /// Refused accesses not yet seen succeeding, with the API server's last message.
    current: BTreeMap<Access, String>,
    /// Every access ever refused (the counter family does not iterate).
    seen: std::collections::BTreeSet<Access>,
}

struct Inner {
    counts: Family<AccessLabels, Counter>,
    state: Mutex<State>,
    /// Whether `current` may be non-empty (spares the success path a lock and a parse).
    any: AtomicBool,
}

/// Where refusals are recorded: cheap to clone (clones share the record).
#[derive(Clone)]
pub struct Forbidden(Arc<Inner>);

impl Default for Forbidden {
    fn default() -> Self {
        Self(Arc::new(Inner {
            counts: Family::default(),
            state: Mutex::new(State::default()),
            any: AtomicBool::new(false),
        }))
    }
}

impl std::fmt::Debug for Forbidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Forbidden").field(&self.current()).finish()
    }
}

static PROCESS: LazyLock<Forbidden> = LazyLock::new(Forbidden::default);

impl Forbidden {
    /// The record of this process's clients (`kuota serve`): every registry built by
    /// `Metrics::new` exposes its counts as `kuota_api_forbidden_total`.
    pub fn process() -> Self {
        PROCESS.clone()
    }

    /// A tower layer that records into this record.
    pub fn layer(&self) -> ForbiddenLayer {
        ForbiddenLayer(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A map of strings: a panic elsewhere cannot leave it in a state worth refusing.
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a refusal of `access` with the API server's `message`; logs it the first
    /// time (and again after it succeeded in between).
    pub fn record_refusal(&self, access: Access, message: String) {
        self.0
            .counts
            .get_or_create(&AccessLabels {
                verb: Value::new(&access.verb),
                group: Value::new(&access.group),
                resource: Value::new(&access.resource),
            })
            .inc();
        let mut state = self.lock();
        if !state.current.contains_key(&access) {
            tracing::error!(
                verb = %access.verb,
                group = %access.group,
                resource = %access.resource,
                api_server = %message,
                "kuota is not permitted to {access}: grant it in kuota's ClusterRole \
                 (manifests/base/rbac, docs/controller.md lists what kuota needs); \
                 not ready until it succeeds"
            );
        }
        state.seen.insert(access.clone());
        state.current.insert(access, message);
        self.0.any.store(true, Ordering::Release);
    }

    /// `access` succeeded: it is no longer refused.
    pub fn record_success(&self, access: &Access) {
        let mut state = self.lock();
        if state.current.remove(access).is_some() {
            tracing::info!(%access, "kuota is permitted again to {access}");
        }
        self.0
            .any
            .store(!state.current.is_empty(), Ordering::Release);
    }

    /// Refusals not yet followed by a success of the same access.
    pub fn current(&self) -> Vec<Access> {
        self.lock().current.keys().cloned().collect()
    }

    /// Every refusal counted so far, with its count.
    pub fn counts(&self) -> BTreeMap<Access, u64> {
        let state = self.lock();
        state
            .seen
            .iter()
            .map(|a| {
                let n = self
                    .0
                    .counts
                    .get_or_create(&AccessLabels {
                        verb: Value::new(&a.verb),
                        group: Value::new(&a.group),
                        resource: Value::new(&a.resource),
                    })
                    .get();
                (a.clone(), n)
            })
            .collect()
    }

    /// The `/readyz` lines of the current refusals (each makes kuota not ready).
    pub fn failing(&self) -> Vec<String> {
        self.lock()
            .current
            .iter()
            .map(|(access, message)| format!("not permitted to {access}: {message}"))
            .collect()
    }

    fn maybe_refused(&self) -> bool {
        self.0.any.load(Ordering::Acquire)
    }
}

/// Wraps a client's service in [`Recorded`].
#[derive(Clone)]
pub struct ForbiddenLayer(Forbidden);

impl<S> Layer<S> for ForbiddenLayer {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Recorded {
            inner,
            record: self.0.clone(),
        }
    }
}

/// A client service that records the authorizer's refusals of its requests.
#[derive(Clone)]
pub struct Recorded<S> {
    inner: S,
    record: Forbidden,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<Box<DynBody>>, BoxError>> + Send>>;

impl<S, B> Service<Request<B>> for Recorded<S>
where
    S: Service<Request<B>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().clone();
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let record = self.record.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await?;
            let status = response.status();
            if status == StatusCode::FORBIDDEN {
                let (parts, body) = response.into_parts();
                let bytes = body.collect().await?.to_bytes();
                if let (Some(message), Some(access)) =
                    (is_authorization_refusal(&bytes), access(&method, &path))
                {
                    record.record_refusal(access, message);
                }
                let body: Box<DynBody> =
                    Box::new(http_body_util::Full::new(bytes).map_err(|never| match never {}));
                return Ok(Response::from_parts(parts, body));
            }
            if status.is_success()
                && record.maybe_refused()
                && let Some(access) = access(&method, &path)
            {
                record.record_success(&access);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn a(verb: &str, group: &str, resource: &str) -> Option<Access> {
        Some(Access {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
        })
    }

    #[test]
    fn requests_map_to_rbac_verbs_and_resources() {
        let cases = [
            (
                Method::PATCH,
                "/apis/batch/v1/namespaces/ns/jobs/j/status?fieldManager=kuota",
                a("patch", "batch", "jobs/status"),
            ),
            (
                Method::GET,
                "/apis/batch/v1/jobs?watch=true&resourceVersion=1",
                a("watch", "batch", "jobs"),
            ),
            (
                Method::GET,
                "/apis/batch/v1/jobs?limit=500",
                a("list", "batch", "jobs"),
            ),
            (
                Method::GET,
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w",
                a("get", "kueue.x-k8s.io", "workloads"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/events",
                a("create", "", "events"),
            ),
            (
                Method::PUT,
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq/status",
                a("update", "kueue.x-k8s.io", "clusterqueues/status"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                a("list", "", "namespaces"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kuota-system",
                a("get", "", "namespaces"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/finalize",
                a("update", "", "namespaces/finalize"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods/p",
                a("delete", "", "pods"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods",
                a("deletecollection", "", "pods"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/serviceaccounts/sa/token",
                a("create", "", "serviceaccounts/token"),
            ),
            (
                Method::PATCH,
                "/apis/coordination.k8s.io/v1/namespaces/kuota-system/leases/l",
                a("patch", "coordination.k8s.io", "leases"),
            ),
            (Method::GET, "/apis/batch/v1", None),
            (Method::GET, "/version", None),
        ];
        for (method, path, want) in cases {
            assert_eq!(access(&method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn only_the_authorizers_refusals_count() {
        let rbac = br#"{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,
            "message":"jobs.batch \"j\" is forbidden: User \"system:serviceaccount:kuota-system:kuota-controller\" cannot patch resource \"jobs/status\" in API group \"batch\" in the namespace \"ns\""}"#;
        assert!(is_authorization_refusal(rbac).is_some());
        let terminating = br#"{"kind":"Status","reason":"Forbidden","code":403,
            "message":"events is forbidden: unable to create new content in namespace ns because it is being terminated",
            "details":{"causes":[{"reason":"NamespaceTerminating"}]}}"#;
        assert_eq!(is_authorization_refusal(terminating), None);
        let webhook = br#"{"kind":"Status","reason":"Forbidden","code":403,
            "message":"admission webhook \"vjob.kb.io\" denied the request: policy says no"}"#;
        assert_eq!(is_authorization_refusal(webhook), None);
        assert_eq!(is_authorization_refusal(b"not json"), None);
    }

    #[test]
    fn a_refusal_is_current_until_the_same_access_succeeds() {
        let record = Forbidden::default();
        let patch = a("patch", "batch", "jobs/status").expect("access");
        record.record_refusal(patch.clone(), "no".into());
        record.record_refusal(patch.clone(), "no".into());
        assert_eq!(record.current(), vec![patch.clone()]);
        assert_eq!(record.counts()[&patch], 2);
        assert!(record.failing()[0].contains("patch jobs/status in API group batch"));
        record.record_success(&a("get", "batch", "jobs/status").expect("access"));
        assert_eq!(record.current().len(), 1, "another verb does not clear it");
        record.record_success(&patch);
        assert!(record.current().is_empty() && record.failing().is_empty());
    }

    #[tokio::test]
    async fn the_layer_records_refusals_and_hands_the_body_on() {
        use tower::ServiceExt;
        let record = Forbidden::default();
        let refusal = r#"{"kind":"Status","code":403,"message":"workloads.kueue.x-k8s.io \"w\" is forbidden: User \"u\" cannot patch resource \"workloads/status\" in API group \"kueue.x-k8s.io\" in the namespace \"ns\""}"#;
        let forbidden_next = Arc::new(AtomicBool::new(true));
        let service = tower::service_fn({
            let forbidden_next = forbidden_next.clone();
            move |_req: Request<()>| {
                let forbidden = forbidden_next.load(Ordering::Relaxed);
                async move {
                    let (status, text) = if forbidden {
                        (StatusCode::FORBIDDEN, refusal)
                    } else {
                        (StatusCode::OK, "{}")
                    };
                    let body: Box<DynBody> = Box::new(
                        http_body_util::Full::new(Bytes::from(text))
                            .map_err(|never| match never {}),
                    );
                    let mut response = Response::new(body);
                    *response.status_mut() = status;
                    Ok::<_, BoxError>(response)
                }
            }
        });
        let mut service = record.layer().layer(service);
        let request = || {
            Request::patch("/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w/status")
                .body(())
                .expect("request")
        };
        let response = service
            .ready()
            .await
            .expect("ready")
            .call(request())
            .await
            .expect("response");
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(
            body,
            Bytes::from(refusal),
            "the caller still reads the Status"
        );
        let want = a("patch", "kueue.x-k8s.io", "workloads/status").expect("access");
        assert_eq!(record.current(), vec![want.clone()]);

        forbidden_next.store(false, Ordering::Relaxed);
        let response = service
            .ready()
            .await
            .expect("ready")
            .call(request())
            .await
            .expect("response");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(record.current().is_empty());
        assert_eq!(
            record.counts().get(&want).copied(),
            Some(1),
            "the counter keeps counting after recovery"
        );
    }
}
