//! Installing kuota: the generated CRDs against the real API server, Kueue's documented
//! examples in v1beta1 and v1beta2, conversion through kuota's `/convert`, and the errors
//! users get for input Kueue rejects.

mod bad_input;
mod compat;
mod fixtures;
mod helm;
mod kustomize;
mod samples;

/// Held by tests that change or apply the CRDs' `spec.conversion` (cluster-wide): the
/// conversion test points it at a webhook in its own process, which a concurrent dry run of
/// the committed CRDs (Service-based conversion) would conflict with.
pub static CONVERSION_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
