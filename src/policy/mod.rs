//! kuota's own admission policies: per-namespace defaults and limits read from YAML files.
//!
//! - [`spec`]: the file format and its checks (pure: text in, [`Policy`] values or
//!   `file:line` errors out).
//! - [`eval`]: which policies apply to a namespace and which rules a job breaks (pure).
//! - [`load`]: reading a directory of policy files.
//! - [`watch`]: polling that directory and swapping the set in place.
//!
//! [`PolicyHandle`] is the shared, cheap-to-clone handle the webhook reads on every request.
//! It always holds the last set that loaded cleanly: a reload that finds any invalid file is
//! rejected as a whole and the previous set stays in force.

#![warn(missing_docs)]

pub mod eval;
pub mod load;
pub mod spec;
pub mod watch;

pub use eval::{FLAVOR_ANNOTATION, GPU_PRODUCT_ANNOTATION, JobFacts, PodSetFacts, Violation};
pub use spec::{Policy, PolicyFileError, PolicyLoadError, PolicySet, PolicySource};

use std::sync::{Arc, PoisonError, RwLock};

/// Shared handle on the policies in force; clones share the same set.
#[derive(Debug, Clone, Default)]
pub struct PolicyHandle {
    current: Arc<RwLock<Arc<PolicySet>>>,
}

impl PolicyHandle {
    /// A handle with no policies.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A handle holding `set`.
    pub fn new(set: PolicySet) -> Self {
        Self {
            current: Arc::new(RwLock::new(Arc::new(set))),
        }
    }

    /// The set in force. Callers keep the `Arc` for the whole request, so a concurrent
    /// reload never changes the rules halfway through a decision.
    pub fn current(&self) -> Arc<PolicySet> {
        // Swapping an Arc cannot leave the slot half-written, so a poisoned lock is safe to use.
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `set` in force.
    pub fn replace(&self, set: PolicySet) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
    }
}
