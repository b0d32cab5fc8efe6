//! Why `kuota certs` failed: each error names the file or directory and keeps the
//! underlying error as its source.

use std::io;
use std::path::PathBuf;

use crate::webhook::tls::CertParseError;

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{}: {source}", path.display())]
    Invalid {
        path: PathBuf,
        #[source]
        source: CertParseError,
    },
    #[error("{}: {source}", path.display())]
    Serialize {
        path: PathBuf,
        #[source]
        source: serde_norway::Error,
    },
    #[error("{}: cannot set caBundle: {source}", path.display())]
    Patch {
        path: PathBuf,
        #[source]
        source: PatchError,
    },
    #[error("check failed: {0}")]
    CheckFailed(#[from] CheckFailure),
}

/// Why the caBundle could not be set in a manifest file.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("{0}")]
    Parse(#[source] serde_norway::Error),
    /// The line edit produced YAML that no longer parses: a layout we do not handle.
    #[error("patched YAML does not parse: {0}")]
    Reparse(#[source] serde_norway::Error),
    #[error("unexpected layout: {set} of {total} webhooks got the caBundle (use block-style YAML)")]
    Layout { set: usize, total: usize },
}

/// What `kuota certs --check` found wrong; it changes nothing.
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    #[error("CA expires within --rotate-before")]
    CaExpiring,
    #[error("no CA in {}", dir.display())]
    NoCa { dir: PathBuf },
    /// `reason` is the same description a renewal reports in its outcome.
    #[error("serving certificate: {reason}")]
    Serving { reason: String },
    #[error("no serving certificate in {}", dir.display())]
    NoServing { dir: PathBuf },
}
