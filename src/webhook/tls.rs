//! TLS for the webhook listener: loading and checking the serving key pair,
//! the rustls server configuration, and a certificate resolver that swaps in
//! renewed certificates from disk without touching open connections.
//!
//! Policy, enforced here rather than left to deployment:
//! - TLS 1.2 and 1.3 only (rustls never speaks older versions; we also pin
//!   the list so a future default cannot widen it silently);
//! - the serving key is ECDSA P-256: cheap handshakes (the API server opens
//!   new connections in bursts) and one algorithm to reason about. Any other
//!   key type is refused when loading, with an error that says what to do;
//! - ALPN offers `h2` then `http/1.1`.
//!
//! Reload model: the resolver hands rustls an `Arc<CertifiedKey>` per
//! handshake. A poller compares file stamps (mtime, size, inode) every few
//! seconds; on change it loads and validates the new pair and swaps the
//! `Arc`. Established connections keep the key they negotiated with; new
//! handshakes get the new one. Invalid new files are logged and ignored, so a
//! half-written Secret update never takes the webhook down.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use x509_parser::extensions::ParsedExtension;
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate, X509Error};
use x509_parser::x509::SubjectPublicKeyInfo;

/// File names inside the certificate directory. They are the keys of a
/// `kubernetes.io/tls` Secret, so mounting the Secret as a volume yields
/// exactly this layout (cert-manager writes the same three keys).
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";
pub const CA_FILE: &str = "ca.crt";

/// ALPN identifiers offered by the server, in preference order.
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("{}: no PEM certificate found", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: invalid PEM: {source}", path.display())]
    Pem {
        path: PathBuf,
        #[source]
        source: PemProblem,
    },
    #[error("{}: invalid certificate: {source}", path.display())]
    Certificate {
        path: PathBuf,
        #[source]
        source: CertParseError,
    },
    #[error(
        "{}: {found} key refused: the webhook serves ECDSA P-256 only \
         (generate a pair with `kuota certs`, or set `privateKey.algorithm: ECDSA, size: 256` in cert-manager)",
        path.display()
    )]
    UnsupportedKey { path: PathBuf, found: String },
    #[error("{}: certificate public key is {found}; the webhook serves ECDSA P-256 only", path.display())]
    UnsupportedCertificateKey { path: PathBuf, found: String },
    #[error("private key {} does not belong to certificate {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Why a PEM file yields no usable item.
#[derive(Debug, thiserror::Error)]
pub enum PemProblem {
    #[error("no private key found")]
    NoPrivateKey,
    #[error("{0}")]
    Parse(#[from] rustls_pki_types::pem::Error),
}

/// Why the fields of a certificate could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CertParseError {
    #[error("{0}")]
    Pem(#[from] rustls_pki_types::pem::Error),
    #[error("{0}")]
    Der(#[from] x509_parser::nom::Err<X509Error>),
    #[error("subjectAltName: {0}")]
    SubjectAltName(#[source] X509Error),
}

/// What we need to know about a serving certificate: for logs, metrics,
/// rotation decisions and tests.
#[derive(Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// Serial number, lower-case hex without separators.
    pub serial: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP address subject alternative names.
    pub ip_addresses: Vec<std::net::IpAddr>,
    /// Hex AuthorityKeyIdentifier (empty when absent): with the CA's
    /// `subject_key_id` it tells rotation which CA signed a certificate.
    pub authority_key_id: String,
    /// Hex SubjectKeyIdentifier (empty when absent).
    pub subject_key_id: String,
}

impl fmt::Debug for CertInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertInfo")
            .field("serial", &self.serial)
            .field("not_after", &unix_seconds(self.not_after))
            .field("dns_names", &self.dns_names)
            .field("ip_addresses", &self.ip_addresses)
            .finish()
    }
}

/// An IP SAN's octets (4 for IPv4, 16 for IPv6) as an address.
fn ip_from_octets(octets: &[u8]) -> Option<std::net::IpAddr> {
    match octets.len() {
        4 => <[u8; 4]>::try_from(octets).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(octets)
            .ok()
            .map(std::net::IpAddr::from),
        _ => None,
    }
}

impl CertInfo {
    /// Parses the fields we use from a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, CertParseError> {
        let (_, cert) = X509Certificate::from_der(der)?;
        let validity = cert.validity();
        let general_names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san.value.general_names.clone(),
            Ok(None) => Vec::new(),
            Err(e) => return Err(CertParseError::SubjectAltName(e)),
        };
        let dns_names = general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(s) => Some((*s).to_string()),
                _ => None,
            })
            .collect();
        let ip_addresses = general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::IPAddress(b) => ip_from_octets(b),
                _ => None,
            })
            .collect();
        let mut authority_key_id = String::new();
        let mut subject_key_id = String::new();
        for ext in cert.iter_extensions() {
            match ext.parsed_extension() {
                ParsedExtension::AuthorityKeyIdentifier(aki) => {
                    if let Some(id) = &aki.key_identifier {
                        authority_key_id = hex(id.0);
                    }
                }
                ParsedExtension::SubjectKeyIdentifier(id) => subject_key_id = hex(id.0),
                _ => {}
            }
        }
        Ok(Self {
            serial: hex(cert.raw_serial()),
            not_before: from_unix(validity.not_before.timestamp()),
            not_after: from_unix(validity.not_after.timestamp()),
            dns_names,
            ip_addresses,
            authority_key_id,
            subject_key_id,
        })
    }

    /// Time left before `not_after` (zero once expired).
    pub fn remaining(&self, now: SystemTime) -> Duration {
        self.not_after.duration_since(now).unwrap_or(Duration::ZERO)
    }
}

/// Lower-case hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Seconds since the Unix epoch (negative before it), for logs and metrics.
pub fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

fn from_unix(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// A validated serving key pair plus what we parsed from its leaf.
pub struct LoadedCert {
    pub key: Arc<CertifiedKey>,
    pub info: CertInfo,
}

/// Reads and validates `cert_path` (PEM chain, leaf first) and `key_path`
/// (PEM PKCS#8 or SEC1 ECDSA P-256 key).
pub fn load_key_pair(cert_path: &Path, key_path: &Path) -> Result<LoadedCert, TlsError> {
    let cert_pem = read(cert_path)?;
    let key_pem = read(key_path)?;
    load_key_pair_from_pem(&cert_pem, cert_path, &key_pem, key_path)
}

/// [`load_key_pair`] on bytes already read; the paths are only for messages.
pub fn load_key_pair_from_pem(
    cert_pem: &[u8],
    cert_path: &Path,
    key_pem: &[u8],
    key_path: &Path,
) -> Result<LoadedCert, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            path: cert_path.to_owned(),
            source: e.into(),
        })?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_owned(),
        });
    };
    let info = CertInfo::from_der(leaf).map_err(|source| TlsError::Certificate {
        path: cert_path.to_owned(),
        source,
    })?;
    check_leaf_key_is_p256(leaf, cert_path)?;

    let key_der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: key_path.to_owned(),
        source: match e {
            rustls_pki_types::pem::Error::NoItemsFound => PemProblem::NoPrivateKey,
            other => other.into(),
        },
    })?;
    let signing_key = load_p256_signing_key(&key_der, key_path)?;

    let certified = CertifiedKey::new(chain, signing_key);
    // Catches the classic rotation accident: tls.crt renewed, tls.key not (yet).
    certified.keys_match().map_err(|_| TlsError::KeyMismatch {
        cert: cert_path.to_owned(),
        key: key_path.to_owned(),
    })?;
    Ok(LoadedCert {
        key: Arc::new(certified),
        info,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn check_leaf_key_is_p256(leaf: &CertificateDer<'_>, path: &Path) -> Result<(), TlsError> {
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| TlsError::Certificate {
        path: path.to_owned(),
        source: e.into(),
    })?;
    match not_p256(cert.public_key()) {
        None => Ok(()),
        Some(found) => Err(TlsError::UnsupportedCertificateKey {
            path: path.to_owned(),
            found,
        }),
    }
}

/// `None` for an id-ecPublicKey on prime256v1, else a description of the key for the
/// refusal message (the description is data for the error, not an error itself).
fn not_p256(spki: &SubjectPublicKeyInfo<'_>) -> Option<String> {
    let alg = &spki.algorithm.algorithm;
    if *alg != OID_KEY_TYPE_EC_PUBLIC_KEY {
        return Some(match alg.to_id_string().as_str() {
            "1.2.840.113549.1.1.1" => "RSA".to_string(),
            "1.3.101.112" => "Ed25519".to_string(),
            other => format!("algorithm {other}"),
        });
    }
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok());
    match curve {
        Some(c) if c == OID_EC_P256 => None,
        Some(c) => Some(format!("ECDSA on curve {}", c.to_id_string())),
        None => Some("ECDSA without a named curve".to_string()),
    }
}

fn load_p256_signing_key(
    der: &PrivateKeyDer<'_>,
    path: &Path,
) -> Result<Arc<dyn SigningKey>, TlsError> {
    let refuse = |found: &str| TlsError::UnsupportedKey {
        path: path.to_owned(),
        found: found.to_string(),
    };
    if matches!(der, PrivateKeyDer::Pkcs1(_)) {
        return Err(refuse("RSA (PKCS#1)"));
    }
    let key = match rustls::crypto::ring::sign::any_ecdsa_type(der) {
        Ok(key) => key,
        Err(_) => {
            // Name the key type in the error if the provider knows it.
            let found = match rustls::crypto::ring::sign::any_supported_type(der) {
                Ok(other) => format!("{:?}", other.algorithm()),
                Err(_) => "unrecognised".to_string(),
            };
            return Err(refuse(&found));
        }
    };
    // any_ecdsa_type also accepts P-384; check the curve via the public key.
    let Some(spki_der) = key.public_key() else {
        return Err(refuse("ECDSA key without a public key"));
    };
    let (_, spki) = SubjectPublicKeyInfo::from_der(&spki_der).map_err(|_| refuse("ECDSA"))?;
    if let Some(found) = not_p256(&spki) {
        return Err(refuse(&found));
    }
    Ok(key)
}

/// The rustls configuration every kuota TLS listener uses (the webhook
/// server and the load-test baseline): TLS 1.3 + 1.2, ring provider,
/// no client auth, ALPN h2 then http/1.1.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()];
    Ok(config)
}

/// Identity of a file's current content as far as polling can tell.
/// Kubernetes updates Secret volumes by swapping a symlink, which changes
/// the inode even when size and mtime look alike.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> io::Result<Self> {
        // `metadata` follows symlinks, which is what we want for ..data swaps.
        let md = fs::metadata(path)?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&md);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Self {
            modified: md.modified().ok(),
            len: md.len(),
            inode,
        })
    }
}

/// Outcome of one [`CertStore::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    Unchanged,
    Reloaded {
        serial: String,
    },
    /// Files changed but the new pair was refused; the old one stays.
    Rejected {
        error: String,
    },
}

/// The live serving certificate, and a [`ResolvesServerCert`] for rustls.
pub struct CertStore {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<LoadedCert>>,
    /// Stamps of the files as of the last load attempt (good or bad), so a
    /// bad file is reported once rather than on every poll.
    seen: Mutex<Option<(FileStamp, FileStamp)>>,
    reloads: AtomicU64,
    reload_errors: AtomicU64,
    rotation_due: AtomicBool,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore")
            .field("cert_path", &self.cert_path)
            .field("current", &self.info())
            .finish()
    }
}

impl CertStore {
    /// Loads `tls.crt` / `tls.key` from `dir`. Fails if they are missing or
    /// invalid: a webhook without a certificate can only fail every call.
    pub fn load_dir(dir: &Path) -> Result<Self, TlsError> {
        Self::load(&dir.join(CERT_FILE), &dir.join(KEY_FILE))
    }

    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Self, TlsError> {
        let stamps = stamps(cert_path, key_path).ok();
        let loaded = load_key_pair(cert_path, key_path)?;
        Ok(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            current: RwLock::new(Arc::new(loaded)),
            seen: Mutex::new(stamps),
            reloads: AtomicU64::new(0),
            reload_errors: AtomicU64::new(0),
            rotation_due: AtomicBool::new(false),
        })
    }

    pub fn current(&self) -> Arc<LoadedCert> {
        // A poisoned lock only means a writer panicked mid-swap of an Arc,
        // which leaves the old or new value intact: keep serving it.
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn info(&self) -> CertInfo {
        self.current().info.clone()
    }

    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    pub fn reload_errors(&self) -> u64 {
        self.reload_errors.load(Ordering::Relaxed)
    }

    pub fn rotation_due(&self) -> bool {
        self.rotation_due.load(Ordering::Relaxed)
    }

    /// Checks the files and swaps in a new pair if they changed and are valid.
    /// Blocking file I/O: call from `spawn_blocking` in async code.
    pub fn poll(&self) -> PollOutcome {
        let now = match stamps(&self.cert_path, &self.key_path) {
            Ok(s) => s,
            // Missing files mid-update (or a deleted Secret): keep serving.
            Err(e) => {
                let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
                if seen.is_some() {
                    *seen = None;
                    self.reload_errors.fetch_add(1, Ordering::Relaxed);
                    return PollOutcome::Rejected {
                        error: format!("cannot stat certificate files: {e}"),
                    };
                }
                return PollOutcome::Unchanged;
            }
        };
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.as_ref() == Some(&now) {
                return PollOutcome::Unchanged;
            }
            *seen = Some(now);
        }
        match load_key_pair(&self.cert_path, &self.key_path) {
            Ok(loaded) => {
                let serial = loaded.info.serial.clone();
                if serial == self.info().serial {
                    // Same certificate rewritten (e.g. a Secret resync).
                    return PollOutcome::Unchanged;
                }
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                PollOutcome::Reloaded { serial }
            }
            Err(e) => {
                self.reload_errors.fetch_add(1, Ordering::Relaxed);
                PollOutcome::Rejected {
                    error: e.to_string(),
                }
            }
        }
    }

    /// Updates the rotation-due flag; returns it.
    pub fn check_expiry(&self, now: SystemTime, rotate_before: Duration) -> bool {
        let due = self.info().remaining(now) <= rotate_before;
        self.rotation_due.store(due, Ordering::Relaxed);
        due
    }
}

fn stamps(cert: &Path, key: &Path) -> io::Result<(FileStamp, FileStamp)> {
    Ok((FileStamp::of(cert)?, FileStamp::of(key)?))
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current().key.clone())
    }
}
