//! Label values and label sets of kuota's metrics.
//!
//! Label values come from names users choose (queues, namespaces, priority classes,
//! topology domains), so they are escaped as the exposition format requires:
//! prometheus-client writes label values verbatim, and a `"` or newline in a
//! ClusterQueue's name would otherwise break every scrape.

use std::fmt::Write;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

/// A label value, escaped on output (backslash, double quote, newline).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub Arc<str>);

impl Value {
    pub fn new(s: &str) -> Self {
        Self(Arc::from(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Self {
        Self(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self(Arc::from(s))
    }
}

impl EncodeLabelValue for Value {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        write_escaped(encoder, &self.0)
    }
}

/// Writes `s` with the text format's label-value escapes.
pub fn write_escaped(w: &mut impl Write, s: &str) -> std::fmt::Result {
    let mut rest = s;
    while let Some(i) = rest.find(['\\', '"', '\n']) {
        w.write_str(&rest[..i])?;
        w.write_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[i + 1..];
    }
    w.write_str(rest)
}

/// Which replica of a highly available deployment reports (Kueue's `replica_role`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReplicaRole {
    Leader,
    Follower,
    /// No leader election (a single replica, the simulator).
    #[default]
    Standalone,
}

impl ReplicaRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leader => "leader",
            Self::Follower => "follower",
            Self::Standalone => "standalone",
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Leader,
            2 => Self::Follower,
            _ => Self::Standalone,
        }
    }

    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Self::Standalone => 0,
            Self::Leader => 1,
            Self::Follower => 2,
        }
    }
}

impl EncodeLabelValue for ReplicaRole {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Role {
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Result_ {
    pub result: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqPriority {
    pub cluster_queue: Value,
    pub priority_class: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LqPriority {
    pub name: Value,
    pub namespace: Value,
    pub priority_class: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqEviction {
    pub cluster_queue: Value,
    pub reason: Value,
    pub underlying_cause: Value,
    pub priority_class: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LqEviction {
    pub name: Value,
    pub namespace: Value,
    pub reason: Value,
    pub underlying_cause: Value,
    pub priority_class: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Preemption {
    pub preempting_cluster_queue: Value,
    pub reason: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Access {
    pub verb: Value,
    pub group: Value,
    pub resource: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookRequest {
    pub path: Value,
    pub result: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildInfo {
    pub git_version: Value,
    pub git_commit: Value,
    pub build_date: Value,
    pub go_version: Value,
    pub compiler: Value,
    pub platform: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqStatus {
    pub cluster_queue: Value,
    pub status: Value,
    pub replica_role: ReplicaRole,
}

/// A ClusterQueue and a MultiKueue worker cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqCluster {
    pub cluster_queue: Value,
    pub cluster: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Cq {
    pub cluster_queue: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqResource {
    pub cohort: Value,
    pub cluster_queue: Value,
    pub flavor: Value,
    pub resource: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CqCohort {
    pub cluster_queue: Value,
    pub cohort: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CohortResource {
    pub cohort: Value,
    pub flavor: Value,
    pub resource: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Lq {
    pub name: Value,
    pub namespace: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LqStatus {
    pub name: Value,
    pub namespace: Value,
    pub status: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LqResource {
    pub name: Value,
    pub namespace: Value,
    pub flavor: Value,
    pub resource: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Unadmitted {
    pub cluster_queue: Value,
    pub reason: Value,
    pub underlying_cause: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LqUnadmitted {
    pub name: Value,
    pub namespace: Value,
    pub cluster_queue: Value,
    pub reason: Value,
    pub underlying_cause: Value,
    pub replica_role: ReplicaRole,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GpuDomain {
    pub flavor: Value,
    pub level: Value,
    pub domain: Value,
    pub replica_role: ReplicaRole,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_newlines() {
        let mut s = String::new();
        write_escaped(&mut s, "a\"b\\c\nd").expect("writes");
        assert_eq!(s, "a\\\"b\\\\c\\nd");
        let mut s = String::new();
        write_escaped(&mut s, "plain-name").expect("writes");
        assert_eq!(s, "plain-name");
    }
}
