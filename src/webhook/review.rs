//! AdmissionReview (admission.k8s.io/v1, and v1beta1) decoding and encoding.
//!
//! Own serde types rather than kube's: kube's `AdmissionResponse` serializes the patch
//! wrongly (kube-rs issue 1781), and owning the request type lets the object decode straight
//! into a borrowing view (see `integrations::object`) instead of a `serde_json::Value`.
//!
//! Decoding distinguishes three outcomes:
//! - the body is not an AdmissionReview with a request (bad JSON, wrong kind, no `request`):
//!   [`BadRequest`], answered with HTTP 400 and a JSON `Status` naming the problem;
//! - the envelope is fine but the object does not decode: [`Decoded::ObjectError`], answered
//!   with a review that denies the request (code 400) so the user sees why;
//! - everything decodes: [`Decoded::Ok`].
//!
//! Messages name the failing field (`request.object.spec.parallelism: invalid type: ...`):
//! the fast decoder runs first and only a failure is re-decoded with `serde_path_to_error`.

use crate::integrations::Str;
use base64::Engine as _;
use json_patch::PatchOperation;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

/// `apiVersion` of admission.k8s.io/v1 reviews.
pub const ADMISSION_V1: &str = "admission.k8s.io/v1";
/// `apiVersion` of the older admission.k8s.io/v1beta1 reviews (same shape).
pub const ADMISSION_V1BETA1: &str = "admission.k8s.io/v1beta1";
/// `kind` of reviews.
pub const ADMISSION_REVIEW: &str = "AdmissionReview";

/// A review as sent by the API server, with the object decoded as `O`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview<'a, O> {
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`.
    #[serde(borrow, default)]
    pub api_version: Option<Str<'a>>,
    /// `AdmissionReview`.
    #[serde(borrow, default)]
    pub kind: Option<Str<'a>>,
    /// The request; required.
    #[serde(borrow, default = "none")]
    pub request: Option<AdmissionRequest<'a, O>>,
}

fn none<T>() -> Option<T> {
    None
}

/// Group/version/kind of the object under review.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ReviewKind<'a> {
    /// API group (empty for core).
    #[serde(borrow, default)]
    pub group: Str<'a>,
    /// Version.
    #[serde(borrow, default)]
    pub version: Str<'a>,
    /// Kind.
    #[serde(borrow, default)]
    pub kind: Str<'a>,
}

/// The operation under review.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// Object creation.
    Create,
    /// Object update.
    Update,
    /// Object deletion.
    Delete,
    /// Connect (exec, proxy, ...).
    Connect,
}

/// The request part of a review.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'a, O> {
    /// Request id, echoed in the response.
    #[serde(borrow)]
    pub uid: Str<'a>,
    /// Kind of the object (after conversion to the webhook's registered version).
    #[serde(borrow)]
    pub kind: ReviewKind<'a>,
    /// Subresource, if any.
    #[serde(borrow, default)]
    pub sub_resource: Option<Str<'a>>,
    /// Name of the object (may be empty on CREATE with generateName).
    #[serde(borrow, default)]
    pub name: Option<Str<'a>>,
    /// Namespace of the object.
    #[serde(borrow, default)]
    pub namespace: Option<Str<'a>>,
    /// Operation.
    pub operation: Operation,
    /// The new object (CREATE, UPDATE).
    #[serde(
        default = "none",
        deserialize_with = "crate::integrations::object::opt_map_only",
        bound(deserialize = "O: Deserialize<'de>")
    )]
    pub object: Option<O>,
    /// The old object (UPDATE, DELETE).
    #[serde(
        default = "none",
        deserialize_with = "crate::integrations::object::opt_map_only",
        bound(deserialize = "O: Deserialize<'de>")
    )]
    pub old_object: Option<O>,
    /// Whether this is a dry run: the webhook must not cause side effects.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl<O> AdmissionRequest<'_, O> {
    /// Whether the API server asked for a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }
}

/// A JSON body that does not decode as the type asked for, with the JSON path of the
/// failing field.
#[derive(Debug, thiserror::Error)]
#[error("{}{source}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct DecodeFailure {
    /// Dotted path of the failing field (`request.object.spec.parallelism`), empty at the top.
    pub path: String,
    /// Why it does not decode.
    #[source]
    pub source: serde_json::Error,
}

impl DecodeFailure {
    /// The failure of a decode rooted at `prefix` (e.g. `request.object`).
    pub fn under(prefix: &str, e: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = e.path().to_string();
        let path = if path == "." {
            prefix.to_string()
        } else {
            format!("{prefix}.{path}")
        };
        DecodeFailure {
            path,
            source: e.into_inner(),
        }
    }
}

/// The body is not an AdmissionReview the webhook can answer (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    /// Not JSON, or not shaped like an AdmissionReview.
    #[error(transparent)]
    Undecodable(#[from] DecodeFailure),
    /// Another `kind`.
    #[error(
        "kind: expected {ADMISSION_REVIEW:?}, got {}; the body is not an AdmissionReview",
        got.as_ref().map_or("nothing".to_string(), |k| format!("{k:?}"))
    )]
    WrongKind {
        /// The body's `kind`, if any.
        got: Option<String>,
    },
    /// Another `apiVersion`.
    #[error(
        "apiVersion: expected {ADMISSION_V1:?} or {ADMISSION_V1BETA1:?}, got {}",
        got.as_ref().map_or("nothing".to_string(), |v| format!("{v:?}"))
    )]
    WrongVersion {
        /// The body's `apiVersion`, if any.
        got: Option<String>,
    },
    /// No `request`.
    #[error("request: missing; an AdmissionReview sent to a webhook must carry a request")]
    MissingRequest,
}

impl BadRequest {
    /// The HTTP body: a `metav1.Status` naming the problem.
    pub fn to_json(&self) -> Vec<u8> {
        let status = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 400,
            "reason": "BadRequest",
            "message": self.to_string(),
        });
        serde_json::to_vec(&status).unwrap_or_else(|_| b"{\"code\":400}".to_vec())
    }
}

/// Which review version to answer in and the request id: enough to answer any request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Review `apiVersion` to answer with (same as the request's).
    pub api_version: &'static str,
    /// Request uid.
    pub uid: String,
}

/// Result of decoding a review body.
#[derive(Debug)]
pub enum Decoded<'a, O> {
    /// The whole review decoded.
    Ok(Envelope, AdmissionRequest<'a, O>),
    /// The envelope decoded, the object did not: deny, naming the field.
    ObjectError(Envelope, DecodeFailure),
}

/// Decodes a review whose object is `O`.
pub fn decode<'a, O>(body: &'a [u8]) -> Result<Decoded<'a, O>, BadRequest>
where
    O: Deserialize<'a>,
{
    match serde_json::from_slice::<AdmissionReview<'a, O>>(body) {
        Ok(review) => {
            let api_version =
                check_envelope(review.api_version.as_deref(), review.kind.as_deref())?;
            let request = review.request.ok_or_else(missing_request)?;
            let env = Envelope {
                api_version,
                uid: request.uid.to_string(),
            };
            Ok(Decoded::Ok(env, request))
        }
        Err(_) => {
            // Slow path, errors only: find out whether the envelope or the object is wrong,
            // and where.
            let envelope = serde_json::from_slice::<AdmissionReview<'_, IgnoredAny>>(body)
                .map_err(|_| path_error::<AdmissionReview<'_, IgnoredAny>>(body))?;
            let api_version =
                check_envelope(envelope.api_version.as_deref(), envelope.kind.as_deref())?;
            let request = envelope.request.ok_or_else(missing_request)?;
            let env = Envelope {
                api_version,
                uid: request.uid.to_string(),
            };
            Ok(Decoded::ObjectError(
                env,
                path_error::<AdmissionReview<'_, O>>(body),
            ))
        }
    }
}

/// Decodes an object (e.g. a CRD) from the `serde_json::Value` of a review, naming the
/// failing field under `prefix` (e.g. `request.object`).
pub fn from_value<T: DeserializeOwned>(
    value: &serde_json::Value,
    prefix: &str,
) -> Result<T, DecodeFailure> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| DecodeFailure::under(prefix, e))
}

fn missing_request() -> BadRequest {
    BadRequest::MissingRequest
}

fn check_envelope(
    api_version: Option<&str>,
    kind: Option<&str>,
) -> Result<&'static str, BadRequest> {
    if kind != Some(ADMISSION_REVIEW) {
        return Err(BadRequest::WrongKind {
            got: kind.map(str::to_string),
        });
    }
    match api_version {
        Some(ADMISSION_V1) => Ok(ADMISSION_V1),
        Some(ADMISSION_V1BETA1) => Ok(ADMISSION_V1BETA1),
        other => Err(BadRequest::WrongVersion {
            got: other.map(str::to_string),
        }),
    }
}

/// The decode error of `T` from `body`, with the JSON path of the failing field.
fn path_error<'a, T: Deserialize<'a>>(body: &'a [u8]) -> DecodeFailure {
    use serde::de::Error as _;
    let mut de = serde_json::Deserializer::from_slice(body);
    let (path, source) = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        // Decodes on its own but not in one pass: only trailing bytes can be left.
        Ok(_) => match de.end() {
            Ok(()) => (
                String::new(),
                serde_json::Error::custom("the review could not be decoded"),
            ),
            Err(e) => (String::new(), e),
        },
        Err(e) => {
            let path = e.path().to_string();
            (
                if path == "." { String::new() } else { path },
                e.into_inner(),
            )
        }
    };
    DecodeFailure { path, source }
}

/// How a request was answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// Denial details (code, reason, message); `None` when allowed.
    pub status: Option<DenyStatus>,
    /// JSON patch to apply (mutating webhooks; empty for none).
    pub patch: Vec<PatchOperation>,
    /// Warnings shown to the client.
    pub warnings: Vec<String>,
}

/// Why a request was denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyStatus {
    /// HTTP-like code: 403 (forbidden by policy), 422 (invalid), 400 (undecodable object).
    pub code: u16,
    /// Machine-readable reason (`Forbidden`, `Invalid`, `BadRequest`).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
}

impl Verdict {
    /// Allowed without changes.
    pub fn allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// Allowed with a patch and warnings.
    pub fn patched(patch: Vec<PatchOperation>, warnings: Vec<String>) -> Self {
        Self {
            allowed: true,
            status: None,
            patch,
            warnings,
        }
    }

    /// Denied.
    pub fn deny(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            allowed: false,
            status: Some(DenyStatus {
                code,
                reason,
                message: message.into(),
            }),
            patch: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Denied as invalid (422).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::deny(422, "Invalid", message)
    }

    /// Denied as forbidden (403).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::deny(403, "Forbidden", message)
    }

    /// Denied because the object could not be decoded (400).
    pub fn bad_object(message: impl Into<String>) -> Self {
        Self::deny(400, "BadRequest", message)
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, mut warnings: Vec<String>) -> Self {
        self.warnings.append(&mut warnings);
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'a str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Serialize)]
struct StatusOut<'a> {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: &'a str,
}

/// Encodes the response review. The patch is the base64 of the JSON array of operations,
/// with `patchType: JSONPatch`; an empty patch is omitted altogether.
pub fn encode(env: &Envelope, verdict: &Verdict) -> Vec<u8> {
    let patch = (!verdict.patch.is_empty()).then(|| {
        // Serializing patch operations (strings and JSON values) cannot fail.
        let raw = serde_json::to_vec(&verdict.patch).unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(raw)
    });
    let out = ReviewOut {
        api_version: env.api_version,
        kind: ADMISSION_REVIEW,
        response: ResponseOut {
            uid: &env.uid,
            allowed: verdict.allowed,
            status: verdict.status.as_ref().map(|s| StatusOut {
                status: "Failure",
                code: s.code,
                reason: s.reason,
                message: &s.message,
            }),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            warnings: &verdict.warnings,
        },
    };
    // Only strings, numbers and booleans: serialization cannot fail.
    serde_json::to_vec(&out).unwrap_or_default()
}

/// How many leading bytes of an oversize body are searched for the request's uid.
pub const UID_SEARCH_BYTES: usize = 64 * 1024;

/// The answer to a review whose body is larger than `limit` bytes: an AdmissionReview that
/// denies with a 413 Status, so the API server shows the user why, instead of an HTTP error
/// it reports as a failed webhook call. `prefix` is the start of the body: the API server
/// serializes `request.uid` before the objects, so it is found there without reading (or
/// buffering) the rest.
pub fn encode_oversize(prefix: &[u8], limit: usize) -> Vec<u8> {
    let env = Envelope {
        api_version: ADMISSION_V1,
        uid: request_uid(prefix).unwrap_or_default(),
    };
    let verdict = Verdict::deny(
        413,
        "RequestEntityTooLarge",
        format!(
            "kuota: the admission review is larger than the webhook accepts ({limit} bytes; \
             kuota serve --max-body-bytes)"
        ),
    );
    encode(&env, &verdict)
}

/// The value of the first `"uid"` key after `"request"` in the start of a review body.
fn request_uid(prefix: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(prefix)
        .or_else(|e| std::str::from_utf8(&prefix[..e.valid_up_to()]))
        .ok()?;
    let after_request = &text[text.find("\"request\"")?..];
    let after_key = &after_request[after_request.find("\"uid\"")? + 5..];
    let value = after_key.trim_start().strip_prefix(':')?.trim_start();
    let value = value.strip_prefix('"')?;
    // Kubernetes uids are UUIDs: no escapes to handle.
    Some(value[..value.find('"')?].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversize_review_is_denied_with_413_under_its_own_uid() {
        let body = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid" : "7f0c-11","kind":{"kind":"Job"},"object":{"metadata":{"uid":"other"}"#;
        let out: serde_json::Value =
            serde_json::from_slice(&encode_oversize(body, 100)).expect("json");
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(out["kind"], "AdmissionReview");
        assert_eq!(out["response"]["uid"], "7f0c-11");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 413);
        assert!(
            out["response"]["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("100 bytes")),
            "{out}"
        );
        // A prefix cut inside a multi-byte character or before the uid still answers.
        assert_eq!(
            request_uid("{\"request\":{\"uid\":\"a\"}é".as_bytes()),
            Some("a".into())
        );
        assert_eq!(request_uid(b"{\"request\":{\"ki"), None);
    }
    use crate::integrations::JobObject;

    const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"batch","version":"v1","kind":"Job"},"operation":"CREATE","namespace":"ns","object":{"metadata":{"name":"j"},"spec":{"parallelism":2}},"dryRun":true}}"#;

    #[test]
    fn decodes_and_encodes() {
        let Ok(Decoded::Ok(env, req)) = decode::<JobObject>(REVIEW.as_bytes()) else {
            panic!("decodes");
        };
        assert_eq!(env.uid, "u-1");
        assert_eq!(req.operation, Operation::Create);
        assert!(req.is_dry_run());
        assert_eq!(
            req.object.as_ref().and_then(|o| o.spec().parallelism),
            Some(2)
        );
        let v = Verdict::patched(
            vec![PatchOperation::Add(json_patch::AddOperation {
                path: json_patch::jsonptr::PointerBuf::from_tokens(["spec", "suspend"]),
                value: true.into(),
            })],
            vec!["w".into()],
        );
        let out: serde_json::Value = serde_json::from_slice(&encode(&env, &v)).expect("json");
        assert_eq!(out["apiVersion"], ADMISSION_V1);
        assert_eq!(out["response"]["uid"], "u-1");
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(out["response"]["patch"].as_str().expect("patch"))
            .expect("base64");
        assert_eq!(
            String::from_utf8(raw).expect("utf8"),
            r#"[{"op":"add","path":"/spec/suspend","value":true}]"#
        );
        let denied = encode(&env, &Verdict::invalid("bad"));
        let out: serde_json::Value = serde_json::from_slice(&denied).expect("json");
        assert_eq!(out["response"]["status"]["code"], 422);
        assert!(out["response"].get("patch").is_none());
    }

    #[test]
    fn errors_name_the_problem() {
        let e = decode::<JobObject>(b"{nope").expect_err("bad json");
        assert!(e.to_string().contains("key must be a string"), "{e}");
        let e =
            decode::<JobObject>(br#"{"apiVersion":"v1","kind":"Pod"}"#).expect_err("not a review");
        assert!(
            e.to_string()
                .starts_with("kind: expected \"AdmissionReview\", got \"Pod\""),
            "{e}"
        );
        let e = decode::<JobObject>(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        )
        .expect_err("no request");
        assert!(e.to_string().starts_with("request: missing"), "{e}");
        let e = decode::<JobObject>(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{}}}"#)
            .expect_err("no uid");
        assert!(
            e.to_string().starts_with("request: missing field `uid`"),
            "{e}"
        );
        let body = REVIEW.replace(r#""parallelism":2"#, r#""parallelism":"two""#);
        match decode::<JobObject>(body.as_bytes()) {
            Ok(Decoded::ObjectError(env, msg)) => {
                let msg = msg.to_string();
                assert_eq!(env.uid, "u-1");
                assert!(msg.starts_with("request.object.spec.parallelism: invalid type: string \"two\", expected i32"), "{msg}");
            }
            other => panic!("expected an object error, got {other:?}"),
        }
        let v: serde_json::Value =
            serde_json::from_slice(&BadRequest::MissingRequest.to_json()).expect("json");
        assert_eq!(v["code"], 400);
    }
}
