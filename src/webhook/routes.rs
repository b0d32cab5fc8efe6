//! The webhook's routes (Kueue's paths) and the request entry point shared by the axum
//! router, the tests and the benchmark.
//!
//! Paths follow Kueue's (kubebuilder) convention `/{mutate,validate}-{group with dots as
//! dashes}-{version}-{kind in lower case}`, e.g. `/mutate-batch-v1-job`, `/validate--v1-pod`
//! (core group), `/validate-kueue-x-k8s-io-v1beta2-clusterqueue`. Kueue kinds are served at
//! both v1beta2 and v1beta1 paths; the handler looks at the object's own `apiVersion`.

use super::WebhookState;
use super::crd::{self, CrdKind};
use super::jobs;
use super::review::{self, BadRequest, Decoded, Verdict};
use crate::integrations::{self, JobIntegration, JobObject};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::sync::Arc;

/// Mutating (defaulting) or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Mutating webhook: may return a patch.
    Mutate,
    /// Validating webhook: allows or denies.
    Validate,
}

impl Op {
    fn prefix(self) -> &'static str {
        match self {
            Op::Mutate => "mutate",
            Op::Validate => "validate",
        }
    }
}

/// What a route reviews.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A job kind.
    Job(&'static dyn JobIntegration),
    /// A Kueue kind.
    Crd(CrdKind),
}

/// One webhook endpoint.
#[derive(Debug, Clone)]
pub struct Route {
    /// URL path.
    pub path: String,
    /// Mutating or validating.
    pub op: Op,
    /// What it reviews.
    pub target: Target,
}

/// Kubebuilder's webhook path for a group/version/kind.
pub fn webhook_path(op: Op, group: &str, version: &str, kind: &str) -> String {
    format!(
        "/{}-{}-{}-{}",
        op.prefix(),
        group.replace('.', "-"),
        version,
        kind.to_lowercase()
    )
}

/// Every route the webhook serves.
pub fn routes() -> Vec<Route> {
    let mut out = Vec::new();
    for integ in integrations::all() {
        let gvk = integ.gvk();
        for op in [Op::Mutate, Op::Validate] {
            out.push(Route {
                path: webhook_path(op, &gvk.group, &gvk.version, &gvk.kind),
                op,
                target: Target::Job(integ),
            });
        }
    }
    for kind in CrdKind::ALL {
        for version in ["v1beta2", "v1beta1"] {
            let ops: &[Op] = if kind.has_defaults() {
                &[Op::Mutate, Op::Validate]
            } else {
                &[Op::Validate]
            };
            for &op in ops {
                out.push(Route {
                    path: webhook_path(op, "kueue.x-k8s.io", version, kind.name()),
                    op,
                    target: Target::Crd(kind),
                });
            }
        }
    }
    out
}

/// The admission router: `POST` on every path of [`routes`]. The server wraps it with TLS,
/// the body limit and timeouts.
pub fn router(state: Arc<WebhookState>) -> Router {
    let mut r = Router::new();
    for route in routes() {
        let path = route.path.clone();
        let route = Arc::new(route);
        r = r.route(
            &path,
            post(move |State(st): State<Arc<WebhookState>>, body: Bytes| {
                let route = Arc::clone(&route);
                async move {
                    let start = std::time::Instant::now();
                    let resp = respond(&st, &route, &body);
                    let result = if resp.status().is_success() {
                        "success"
                    } else {
                        "bad_request"
                    };
                    st.metrics.registry().record_webhook_request(
                        &route.path,
                        result,
                        start.elapsed(),
                    );
                    resp
                }
            }),
        );
    }
    r.with_state(state)
        .route(super::convert::CONVERT_PATH, post(super::convert::serve))
}

fn respond(state: &WebhookState, route: &Route, body: &[u8]) -> Response {
    match handle(state, route, body) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(bad) => (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            bad.to_json(),
        )
            .into_response(),
    }
}

/// Answers one review body: decode, mutate or validate, encode. `Err` means the body is not
/// an AdmissionReview with a request (answer HTTP 400 with [`BadRequest::to_json`]).
pub fn handle(state: &WebhookState, route: &Route, body: &[u8]) -> Result<Vec<u8>, BadRequest> {
    let span = crate::telemetry::trace::review_span(&route.path);
    let _entered = span.enter();
    let result = match route.target {
        Target::Job(integ) => match review::decode::<JobObject<'_>>(body) {
            Ok(Decoded::Ok(env, req)) => {
                let v = match route.op {
                    Op::Mutate => jobs::mutate(state, integ, &req),
                    Op::Validate => jobs::validate(state, integ, &req),
                };
                trace(route, &env.uid, &v);
                state.metrics.record(&v, req.is_dry_run());
                Ok(review::encode(&env, &v))
            }
            Ok(Decoded::ObjectError(env, msg)) => Ok(object_error(state, route, &env, msg)),
            Err(e) => Err(e),
        },
        Target::Crd(kind) => match review::decode::<serde_json::Value>(body) {
            Ok(Decoded::Ok(env, req)) => {
                let v = match route.op {
                    Op::Mutate => crd::mutate(state, kind, &req),
                    Op::Validate => crd::validate(state, kind, &req),
                };
                trace(route, &env.uid, &v);
                state.metrics.record(&v, req.is_dry_run());
                Ok(review::encode(&env, &v))
            }
            Ok(Decoded::ObjectError(env, msg)) => Ok(object_error(state, route, &env, msg)),
            Err(e) => Err(e),
        },
    };
    if let Err(e) = &result {
        state.metrics.record_bad_request();
        tracing::debug!(path = %route.path, error = %e, "rejected a body that is not an AdmissionReview");
    }
    result
}

fn object_error(
    state: &WebhookState,
    route: &Route,
    env: &review::Envelope,
    failure: review::DecodeFailure,
) -> Vec<u8> {
    let v = Verdict::bad_object(failure.to_string());
    trace(route, &env.uid, &v);
    state.metrics.record(&v, false);
    review::encode(env, &v)
}

fn trace(route: &Route, uid: &str, v: &Verdict) {
    let span = tracing::Span::current();
    span.record("uid", uid);
    span.record("allowed", v.allowed);
    span.record("patch_ops", v.patch.len() as i64);
    tracing::debug!(
        path = %route.path,
        uid,
        allowed = v.allowed,
        patch_ops = v.patch.len(),
        reason = v.status.as_ref().map(|s| s.message.as_str()),
        "admission review"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kueue_paths() {
        let paths: Vec<String> = routes().into_iter().map(|r| r.path).collect();
        for p in [
            "/mutate-batch-v1-job",
            "/validate-batch-v1-job",
            "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
            "/validate-jobset-x-k8s-io-v1alpha2-jobset",
            "/mutate-kubeflow-org-v1-pytorchjob",
            "/validate-kubeflow-org-v1-pytorchjob",
            "/mutate-kubeflow-org-v2beta1-mpijob",
            "/validate-kubeflow-org-v2beta1-mpijob",
            "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
            "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
            "/mutate-ray-io-v1-rayjob",
            "/validate-ray-io-v1-rayjob",
            "/mutate-ray-io-v1-raycluster",
            "/validate-ray-io-v1-raycluster",
            "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
            "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
            "/mutate--v1-pod",
            "/validate--v1-pod",
            "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
            "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
            "/validate-kueue-x-k8s-io-v1beta2-cohort",
            "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
            "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
            "/mutate-kueue-x-k8s-io-v1beta2-workload",
            "/validate-kueue-x-k8s-io-v1beta2-workload",
            "/validate-kueue-x-k8s-io-v1beta1-clusterqueue",
            "/validate-kueue-x-k8s-io-v1beta2-topology",
            "/validate-kueue-x-k8s-io-v1beta2-localqueue",
        ] {
            assert!(paths.iter().any(|x| x == p), "{p} missing from {paths:?}");
        }
        let mut sorted = paths.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), paths.len(), "no duplicate paths");
    }
}
