//! Installing kuota: the generated CRDs against the real API server, Kueue's documented
//! examples in v1beta1 and v1beta2, conversion through kuota's `/convert`, and the errors
//! users get for input Kueue rejects.

mod bad_input;
mod compat;
mod fixtures;
mod kustomize;
mod samples;
