//! `kuota certs`: a private CA and an ECDSA P-256 serving certificate for the
//! webhook Service, written as files, as a `kubernetes.io/tls` Secret, and
//! as the `caBundle` of the webhook configurations.
//!
//! The command is idempotent: it reuses what is on disk while it is still
//! good (CA present, serving certificate for the right names, signed by that
//! CA, not expiring within `--rotate-before`) and renews only what is not.
//! So the same command both bootstraps and rotates; a cron job or a CI step
//! can run it blindly. `--force` starts over, `--check` only reports.
//!
//! Keys are written with mode 0600 and every file is replaced atomically
//! (temp file + rename), so a running `kuota serve` watching the directory
//! never reads a half-written file.
//!
//! Clusters with cert-manager should use it instead; see
//! webhook-certs/README.md.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::tls::{self, CA_FILE, CERT_FILE, CertInfo, CertParseError, KEY_FILE};
use crate::duration::parse_flag;

mod error;
pub use error::{CertsError, CheckFailure, PatchError};

/// The CA's private key; never part of the Secret.
pub const CA_KEY_FILE: &str = "ca.key";
/// Service and namespace used by manifests/ (keep in sync).
pub const DEFAULT_SERVICE: &str = "kuota-webhook";
pub const DEFAULT_NAMESPACE: &str = "kuota-system";
pub const DEFAULT_SECRET: &str = "kuota-webhook-tls";
/// The Service of Kueue's visibility API (manifests/base/visibility.yaml), which the same
/// certificate serves: the API server dials `<it>.<namespace>.svc` as the aggregator.
pub const VISIBILITY_SERVICE: &str = "kuota-visibility";

/// Allow for clocks a little behind ours (API server, nodes).
const CLOCK_SKEW: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Name of the webhook Service (the certificate's DNS names derive from it).
    #[arg(long, default_value = DEFAULT_SERVICE)]
    pub service: String,
    /// Namespace of the webhook Service.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Where ca.crt, ca.key, tls.crt and tls.key are kept.
    #[arg(long, default_value = "webhook-certs/out")]
    pub out_dir: PathBuf,
    /// Additional subject alternative names (DNS names or IP addresses), e.g. localhost.
    #[arg(long = "extra-san")]
    pub extra_sans: Vec<String>,
    /// Lifetime of a new serving certificate.
    #[arg(long, default_value = "365d", value_parser = parse_flag)]
    pub validity: Duration,
    /// Lifetime of a new CA.
    #[arg(long, default_value = "3650d", value_parser = parse_flag)]
    pub ca_validity: Duration,
    /// Renew a certificate that expires within this window.
    #[arg(long, default_value = "720h", value_parser = parse_flag)]
    pub rotate_before: Duration,
    /// Regenerate the CA and the serving certificate even if they are still good.
    #[arg(long)]
    pub force: bool,
    /// Change nothing; report, and fail if something is missing or due for rotation.
    #[arg(long)]
    pub check: bool,
    /// Also write a kubernetes.io/tls Secret manifest (with ca.crt) to this file ("-" for stdout).
    #[arg(long)]
    pub secret: Option<PathBuf>,
    /// Name of that Secret.
    #[arg(long, default_value = DEFAULT_SECRET)]
    pub secret_name: String,
    /// Directory of manifests whose webhook configurations get the caBundle.
    #[arg(long)]
    pub patch_manifests: Option<PathBuf>,
    /// Where the patched copies go (default: <out-dir>/manifests; the input directory patches in place).
    #[arg(long)]
    pub patch_out: Option<PathBuf>,
    /// Print `kubectl patch` commands that set the caBundle on the live configurations
    /// (webhook names are read from --patch-manifests, default manifests/base/).
    #[arg(long)]
    pub print_patch: bool,
}

impl CertsArgs {
    /// Defaults for `service`/`namespace` with the given output directory.
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        Self {
            service: DEFAULT_SERVICE.into(),
            namespace: DEFAULT_NAMESPACE.into(),
            out_dir: out_dir.into(),
            extra_sans: Vec::new(),
            validity: Duration::from_secs(365 * 86_400),
            ca_validity: Duration::from_secs(3650 * 86_400),
            rotate_before: Duration::from_secs(720 * 3600),
            force: false,
            check: false,
            secret: None,
            secret_name: DEFAULT_SECRET.into(),
            patch_manifests: None,
            patch_out: None,
            print_patch: false,
        }
    }

    /// Every name the serving certificate must cover: the webhook Service's, the
    /// visibility API Service's as the API server dials it, and the extra ones.
    pub fn subject_alt_names(&self) -> Vec<String> {
        let mut names = service_dns_names(&self.service, &self.namespace);
        let visibility = [
            format!("{VISIBILITY_SERVICE}.{}.svc", self.namespace),
            format!("{VISIBILITY_SERVICE}.{}.svc.cluster.local", self.namespace),
        ];
        for extra in visibility.iter().chain(&self.extra_sans) {
            if !names.contains(extra) {
                names.push(extra.clone());
            }
        }
        names
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CertsError + '_ {
    move |source| CertsError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`.
/// The API server dials `<svc>.<ns>.svc`; the others cover in-cluster
/// clients and debugging with port-forward + a Host override.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("PemPair").finish_non_exhaustive()
    }
}

impl PemPair {
    pub fn info(&self) -> Result<CertInfo, CertParseError> {
        let der = CertificateDer::from_pem_slice(self.cert_pem.as_bytes())?;
        CertInfo::from_der(&der)
    }
}

fn validity_window(lifetime: Duration) -> (SystemTime, SystemTime) {
    let now = SystemTime::now();
    (now - CLOCK_SKEW, now + lifetime)
}

/// A new self-signed ECDSA P-256 CA that can sign leaf certificates only.
pub fn generate_ca(validity: Duration) -> Result<PemPair, CertsError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "kuota");
    dn.push(DnType::CommonName, "kuota-webhook-ca");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let (from, to) = validity_window(validity);
    params.not_before = from.into();
    params.not_after = to.into();
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A new ECDSA P-256 server certificate for `names`, signed by `ca`.
pub fn issue_serving(
    ca: &PemPair,
    names: &[String],
    validity: Duration,
) -> Result<PemPair, CertsError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    // rcgen turns IP-looking names into IP SANs and the rest into DNS SANs.
    let mut params = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "kuota");
    let cn = names.get(2).or(names.first()).cloned().unwrap_or_default();
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let (from, to) = validity_window(validity);
    params.not_before = from.into();
    params.not_after = to.into();
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// What `ensure` did with each certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Kept,
    Created,
    Renewed,
}

#[derive(Debug)]
pub struct Outcome {
    pub ca: Action,
    pub serving: Action,
    pub ca_pair: PemPair,
    pub serving_pair: PemPair,
    pub serving_info: CertInfo,
    /// Why the serving certificate was renewed, if it was.
    pub reason: Option<String>,
}

/// Reads an existing pair from `dir`; `Ok(None)` if either file is absent.
fn read_pair(dir: &Path, cert: &str, key: &str) -> Result<Option<PemPair>, CertsError> {
    let (cert_path, key_path) = (dir.join(cert), dir.join(key));
    if !cert_path.exists() || !key_path.exists() {
        return Ok(None);
    }
    let cert_pem = fs::read_to_string(&cert_path).map_err(io_err(&cert_path))?;
    let key_pem = fs::read_to_string(&key_path).map_err(io_err(&key_path))?;
    Ok(Some(PemPair { cert_pem, key_pem }))
}

/// Why `serving` must be replaced, or `None` if it can stay.
fn serving_problem(
    serving: &PemPair,
    ca_info: &CertInfo,
    names: &[String],
    rotate_before: Duration,
    dir: &Path,
) -> Option<String> {
    // The same checks `kuota serve` applies (P-256, key matches certificate).
    if let Err(e) = tls::load_key_pair_from_pem(
        serving.cert_pem.as_bytes(),
        &dir.join(CERT_FILE),
        serving.key_pem.as_bytes(),
        &dir.join(KEY_FILE),
    ) {
        return Some(e.to_string());
    }
    let info = match serving.info() {
        Ok(info) => info,
        Err(e) => return Some(format!("unreadable: {e}")),
    };
    if !ca_info.subject_key_id.is_empty() && info.authority_key_id != ca_info.subject_key_id {
        return Some("signed by a different CA".into());
    }
    if let Some(missing) = names.iter().find(|n| !san_covers(&info, n)) {
        return Some(format!("does not cover {missing}"));
    }
    let left = info.remaining(SystemTime::now());
    if left <= rotate_before {
        return Some(format!(
            "expires in {}h (rotate-before {}h)",
            left.as_secs() / 3600,
            rotate_before.as_secs() / 3600
        ));
    }
    None
}

fn san_covers(info: &CertInfo, name: &str) -> bool {
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => info.ip_addresses.contains(&ip),
        Err(_) => info.dns_names.iter().any(|n| n == name),
    }
}

/// Every subject alternative name of `info`, DNS names then IP addresses.
fn san_list(info: &CertInfo) -> String {
    let ips = info.ip_addresses.iter().map(ToString::to_string);
    info.dns_names
        .iter()
        .cloned()
        .chain(ips)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Brings `args.out_dir` to a good state (see the module docs) and returns
/// what it holds. With `args.check`, changes nothing and fails instead.
pub fn ensure(args: &CertsArgs) -> Result<Outcome, CertsError> {
    let dir = &args.out_dir;
    let names = args.subject_alt_names();
    let now = SystemTime::now();

    let existing_ca = if args.force {
        None
    } else {
        read_pair(dir, CA_FILE, CA_KEY_FILE)?
    };
    let (ca_pair, ca_action) = match existing_ca {
        Some(ca) => {
            let info = ca.info().map_err(|source| CertsError::Invalid {
                path: dir.join(CA_FILE),
                source,
            })?;
            if info.remaining(now) <= args.rotate_before {
                if args.check {
                    return Err(CheckFailure::CaExpiring.into());
                }
                (generate_ca(args.ca_validity)?, Action::Renewed)
            } else {
                (ca, Action::Kept)
            }
        }
        None if args.check => {
            return Err(CheckFailure::NoCa { dir: dir.clone() }.into());
        }
        None => (generate_ca(args.ca_validity)?, Action::Created),
    };
    let ca_info = ca_pair.info().map_err(|source| CertsError::Invalid {
        path: dir.join(CA_FILE),
        source,
    })?;

    let existing = if args.force || ca_action != Action::Kept {
        None
    } else {
        read_pair(dir, CERT_FILE, KEY_FILE)?
    };
    let (serving_pair, serving_action, reason) = match existing {
        Some(serving) => match serving_problem(&serving, &ca_info, &names, args.rotate_before, dir)
        {
            None => (serving, Action::Kept, None),
            Some(reason) if args.check => {
                return Err(CheckFailure::Serving { reason }.into());
            }
            Some(reason) => (
                issue_serving(&ca_pair, &names, args.validity)?,
                Action::Renewed,
                Some(reason),
            ),
        },
        None if args.check => {
            return Err(CheckFailure::NoServing { dir: dir.clone() }.into());
        }
        None => {
            let action = if dir.join(CERT_FILE).exists() {
                Action::Renewed
            } else {
                Action::Created
            };
            (
                issue_serving(&ca_pair, &names, args.validity)?,
                action,
                None,
            )
        }
    };

    if !args.check {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        if ca_action != Action::Kept {
            write_atomic(&dir.join(CA_KEY_FILE), ca_pair.key_pem.as_bytes(), 0o600)?;
            write_atomic(&dir.join(CA_FILE), ca_pair.cert_pem.as_bytes(), 0o644)?;
        }
        if serving_action != Action::Kept {
            // Key first: a server polling in between sees a mismatched pair,
            // refuses it and keeps its current one until the cert lands.
            write_atomic(&dir.join(KEY_FILE), serving_pair.key_pem.as_bytes(), 0o600)?;
            write_atomic(
                &dir.join(CERT_FILE),
                serving_pair.cert_pem.as_bytes(),
                0o644,
            )?;
        }
    }
    let serving_info = serving_pair.info().map_err(|source| CertsError::Invalid {
        path: dir.join(CERT_FILE),
        source,
    })?;
    Ok(Outcome {
        ca: ca_action,
        serving: serving_action,
        ca_pair,
        serving_pair,
        serving_info,
        reason,
    })
}

/// Writes `bytes` to `path` via a temp file in the same directory and a
/// rename, with `mode` (unix) set before any byte is written.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), CertsError> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp{}", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let result = (|| {
        let mut f = options.open(&tmp)?;
        // `mode` is filtered by the umask on create and ignored if the temp
        // file already existed; set it explicitly.
        #[cfg(unix)]
        fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err(path))
}

/// A `kubernetes.io/tls` Secret holding the serving pair plus `ca.crt`
/// (the layout cert-manager produces, so the Deployment mounts either).
pub fn secret_manifest(
    name: &str,
    namespace: &str,
    ca: &PemPair,
    serving: &PemPair,
) -> Result<String, CertsError> {
    let data = BTreeMap::from([
        (
            CA_FILE.to_string(),
            ByteString(ca.cert_pem.clone().into_bytes()),
        ),
        (
            CERT_FILE.to_string(),
            ByteString(serving.cert_pem.clone().into_bytes()),
        ),
        (
            KEY_FILE.to_string(),
            ByteString(serving.key_pem.clone().into_bytes()),
        ),
    ]);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "kuota".to_string(),
            )])),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Default::default()
    };
    serde_norway::to_string(&secret).map_err(|source| CertsError::Serialize {
        path: PathBuf::from(name),
        source,
    })
}

const WEBHOOK_KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Sets `clientConfig.caBundle` on every webhook of every webhook
/// configuration in a (multi-document) YAML text. Edits lines rather than
/// re-serialising, so comments and layout survive; the result is parsed
/// back and checked. Returns the new text and how many webhooks were set.
pub fn patch_ca_bundle(yaml: &str, ca_bundle_b64: &str) -> Result<(String, usize), PatchError> {
    let mut out = String::with_capacity(yaml.len() + 1024);
    let mut patched = 0;
    for (i, doc) in split_documents(yaml).into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        if is_webhook_configuration(&doc)? {
            let (text, n) = patch_document(&doc, ca_bundle_b64);
            verify_document(&text, ca_bundle_b64, n)?;
            out.push_str(&text);
            patched += n;
        } else {
            out.push_str(&doc);
        }
    }
    Ok((out, patched))
}

/// Splits on `---` lines, keeping each document's text verbatim.
fn split_documents(yaml: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in yaml.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(last) = docs.last_mut() {
            last.push_str(line);
        }
    }
    docs
}

fn is_webhook_configuration(doc: &str) -> Result<bool, PatchError> {
    let value: serde_norway::Value = serde_norway::from_str(doc).map_err(PatchError::Parse)?;
    Ok(value
        .get("kind")
        .and_then(|k| k.as_str())
        .is_some_and(|k| WEBHOOK_KINDS.contains(&k)))
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Line edit: after each `clientConfig:` key, replace or insert a
/// `caBundle:` line at the block's child indentation.
fn patch_document(doc: &str, ca: &str) -> (String, usize) {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 8);
    let mut count = 0;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push(line.to_string());
        let key = line.trim_start().trim_start_matches("- ");
        if key.trim_end() != "clientConfig:" {
            i += 1;
            continue;
        }
        let key_indent = line.len() - key.len();
        // The block is every following line indented deeper than the key.
        let mut end = i + 1;
        while end < lines.len()
            && (lines[end].trim().is_empty() || indent_of(lines[end]) > key_indent)
        {
            end += 1;
        }
        let child_indent = lines[i + 1..end]
            .iter()
            .find(|l| !l.trim().is_empty())
            .map_or(key_indent + 2, |l| indent_of(l));
        let new_line = format!("{}caBundle: {ca}", " ".repeat(child_indent));
        let mut replaced = false;
        for l in &lines[i + 1..end] {
            if !replaced && indent_of(l) == child_indent && l.trim_start().starts_with("caBundle:")
            {
                out.push(new_line.clone());
                replaced = true;
            } else {
                out.push((*l).to_string());
            }
        }
        if !replaced {
            out.insert(out.len() - (end - i - 1), new_line);
        }
        count += 1;
        i = end;
    }
    let mut text = out.join("\n");
    if doc.ends_with('\n') {
        text.push('\n');
    }
    (text, count)
}

fn verify_document(doc: &str, ca: &str, expected: usize) -> Result<(), PatchError> {
    let value: serde_norway::Value = serde_norway::from_str(doc).map_err(PatchError::Reparse)?;
    let webhooks = value
        .get("webhooks")
        .and_then(|w| w.as_sequence())
        .map_or(&[][..], |s| s.as_slice());
    let set = webhooks
        .iter()
        .filter(|w| {
            w.get("clientConfig")
                .and_then(|c| c.get("caBundle"))
                .and_then(|b| b.as_str())
                == Some(ca)
        })
        .count();
    if set != webhooks.len() || set != expected {
        return Err(PatchError::Layout {
            set,
            total: webhooks.len(),
        });
    }
    Ok(())
}

/// `kubectl patch` commands that set the caBundle on every webhook of the
/// configurations found in `manifests_dir`.
pub fn kubectl_patches(
    manifests_dir: &Path,
    ca_bundle_b64: &str,
) -> Result<Vec<String>, CertsError> {
    let mut commands = Vec::new();
    for path in yaml_files(manifests_dir)? {
        let text = fs::read_to_string(&path).map_err(io_err(&path))?;
        for doc in split_documents(&text) {
            let Ok(value) = serde_norway::from_str::<serde_norway::Value>(&doc) else {
                continue;
            };
            let Some(kind) = value.get("kind").and_then(|k| k.as_str()) else {
                continue;
            };
            if !WEBHOOK_KINDS.contains(&kind) {
                continue;
            }
            let name = value
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            let count = value
                .get("webhooks")
                .and_then(|w| w.as_sequence())
                .map_or(0, Vec::len);
            let ops: Vec<serde_json::Value> = (0..count)
                .map(|i| {
                    // "add" replaces an existing member, so it works either way.
                    serde_json::json!({
                        "op": "add",
                        "path": format!("/webhooks/{i}/clientConfig/caBundle"),
                        "value": ca_bundle_b64,
                    })
                })
                .collect();
            commands.push(format!(
                "kubectl patch {} {name} --type=json -p '{}'",
                kind.to_ascii_lowercase(),
                serde_json::Value::Array(ops)
            ));
        }
    }
    Ok(commands)
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, CertsError> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Writes patched copies of the files in `input` that hold webhook
/// configurations to `output` (which may be `input`). Returns the files written.
pub fn patch_manifest_dir(
    input: &Path,
    output: &Path,
    ca_bundle_b64: &str,
) -> Result<Vec<PathBuf>, CertsError> {
    fs::create_dir_all(output).map_err(io_err(output))?;
    let mut written = Vec::new();
    for path in yaml_files(input)? {
        let text = fs::read_to_string(&path).map_err(io_err(&path))?;
        let (patched, n) =
            patch_ca_bundle(&text, ca_bundle_b64).map_err(|source| CertsError::Patch {
                path: path.clone(),
                source,
            })?;
        if n == 0 {
            continue;
        }
        let target = output.join(path.file_name().unwrap_or_default());
        write_atomic(&target, patched.as_bytes(), 0o644)?;
        written.push(target);
    }
    Ok(written)
}

/// The `kuota certs` command: ensure, then the requested outputs. Progress
/// goes to `out` (stdout in the CLI); a Secret to "-" goes there too.
pub fn run(args: &CertsArgs, out: &mut dyn Write) -> Result<(), CertsError> {
    let outcome = ensure(args)?;
    let secret_to_stdout = args.secret.as_deref() == Some(Path::new("-"));
    // Keep stdout pure YAML when the Secret goes there.
    let log = |out: &mut dyn Write, line: String| say(out, secret_to_stdout, &line);
    let info = &outcome.serving_info;
    let left_days = info.remaining(SystemTime::now()).as_secs() / 86_400;
    log(
        out,
        format!(
            "CA ({}): {:?}",
            args.out_dir.join(CA_FILE).display(),
            outcome.ca
        ),
    )?;
    log(
        out,
        format!(
            "serving certificate ({}): {:?}{} serial={} expires in {left_days}d, names: {}",
            args.out_dir.join(CERT_FILE).display(),
            outcome.serving,
            outcome
                .reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default(),
            info.serial,
            san_list(info),
        ),
    )?;
    if outcome.ca != Action::Kept
        && !args.check
        && args.patch_manifests.is_none()
        && !args.print_patch
    {
        // The shipped install injects the caBundle itself (`kuota serve
        // --inject-ca-bundle`, or cert-manager's injector): the only step left is the Secret.
        log(out, "new CA: apply the Secret (--secret); kuota serve --inject-ca-bundle, as the shipped manifests run it, sets the caBundles from it. Only an install without that flag needs --patch-manifests or --print-patch".into())?;
    }

    let ca_b64 = BASE64.encode(outcome.ca_pair.cert_pem.as_bytes());
    if let Some(target) = &args.secret {
        let yaml = secret_manifest(
            &args.secret_name,
            &args.namespace,
            &outcome.ca_pair,
            &outcome.serving_pair,
        )?;
        if secret_to_stdout {
            out.write_all(yaml.as_bytes()).map_err(stdout_err)?;
        } else {
            write_atomic(target, yaml.as_bytes(), 0o600)?;
            log(
                out,
                format!(
                    "Secret {}/{} written to {}",
                    args.namespace,
                    args.secret_name,
                    target.display()
                ),
            )?;
        }
    }
    if let Some(input) = &args.patch_manifests {
        let output = args
            .patch_out
            .clone()
            .unwrap_or_else(|| args.out_dir.join("manifests"));
        for file in patch_manifest_dir(input, &output, &ca_b64)? {
            log(out, format!("caBundle set in {}", file.display()))?;
        }
    }
    if args.print_patch {
        let dir = args
            .patch_manifests
            .clone()
            .unwrap_or_else(|| PathBuf::from("manifests/base"));
        for command in kubectl_patches(&dir, &ca_b64)? {
            log(out, command)?;
        }
    }
    Ok(())
}

/// `kuota certs`: [`run`] on stdout, errors on stderr, exit code 1 on failure
/// (including `--check` finding something to do).
pub fn run_cli(args: &CertsArgs) -> std::process::ExitCode {
    match run(args, &mut io::stdout().lock()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn stdout_err(source: io::Error) -> CertsError {
    CertsError::Io {
        path: PathBuf::from("-"),
        source,
    }
}

/// Progress line to `out`, or to stderr when stdout carries YAML.
fn say(out: &mut dyn Write, to_stderr: bool, line: &str) -> Result<(), CertsError> {
    if to_stderr {
        eprintln!("{line}");
        Ok(())
    } else {
        writeln!(out, "{line}").map_err(stdout_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kuota-certs-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn generates_p256_pair_with_service_names_and_0600_keys() {
        let dir = temp_dir("gen");
        let args = CertsArgs::new(&dir);
        let outcome = ensure(&args).expect("ensure");
        assert_eq!(
            (outcome.ca, outcome.serving),
            (Action::Created, Action::Created)
        );
        let loaded = tls::load_key_pair(&dir.join(CERT_FILE), &dir.join(KEY_FILE))
            .expect("server accepts it");
        let mut expected = service_dns_names(DEFAULT_SERVICE, DEFAULT_NAMESPACE);
        expected.extend([
            "kuota-visibility.kuota-system.svc".to_string(),
            "kuota-visibility.kuota-system.svc.cluster.local".to_string(),
        ]);
        assert_eq!(loaded.info.dns_names, expected);
        let ca = outcome.ca_pair.info().expect("ca");
        assert_eq!(loaded.info.authority_key_id, ca.subject_key_id);
        #[cfg(unix)]
        for key in [KEY_FILE, CA_KEY_FILE] {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.join(key))
                .expect("key")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn rerun_keeps_then_rotates_within_window_reusing_ca() {
        let dir = temp_dir("rotate");
        let mut args = CertsArgs::new(&dir);
        let first = ensure(&args).expect("first");
        let again = ensure(&args).expect("second");
        assert_eq!((again.ca, again.serving), (Action::Kept, Action::Kept));
        assert_eq!(again.serving_info.serial, first.serving_info.serial);

        // A window longer than the remaining lifetime forces renewal.
        args.rotate_before = Duration::from_secs(400 * 86_400);
        args.ca_validity = Duration::from_secs(3650 * 86_400);
        let rotated = ensure(&args).expect("rotate");
        assert_eq!(
            (rotated.ca, rotated.serving),
            (Action::Kept, Action::Renewed)
        );
        assert_ne!(rotated.serving_info.serial, first.serving_info.serial);
        assert_eq!(rotated.ca_pair.cert_pem, first.ca_pair.cert_pem);

        args.check = true;
        args.rotate_before = Duration::from_secs(3600);
        ensure(&args).expect("check passes after rotation");
        args.rotate_before = Duration::from_secs(400 * 86_400);
        assert!(matches!(ensure(&args), Err(CertsError::CheckFailed(_))));
        let _ = fs::remove_dir_all(&dir);
    }

    /// What `kuota certs` prints names the IP SANs too, and a new CA does not send the
    /// user to patch caBundles the shipped install injects itself.
    #[test]
    fn the_output_lists_ip_sans_and_leaves_the_ca_bundle_to_the_injector() {
        let dir = temp_dir("print");
        let mut args = CertsArgs::new(&dir);
        args.extra_sans = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        let mut out = Vec::new();
        run(&args, &mut out).expect("run");
        let text = String::from_utf8(out).expect("utf-8");
        let names = text
            .lines()
            .find_map(|l| l.split_once("names: ").map(|(_, n)| n.to_string()))
            .expect("a names line");
        assert!(names.ends_with("localhost, 127.0.0.1, ::1"), "{names}");
        assert!(names.starts_with("kuota-webhook, "), "{names}");
        let hint = text
            .lines()
            .find(|l| l.starts_with("new CA"))
            .expect("{text}");
        assert!(hint.contains("--inject-ca-bundle"), "{hint}");

        // An IP SAN the certificate lacks is a reason to reissue, like a DNS name.
        args.extra_sans.push("10.0.0.7".into());
        let outcome = ensure(&args).expect("again");
        assert_eq!(outcome.serving, Action::Renewed);
        assert!(
            outcome
                .serving_info
                .ip_addresses
                .contains(&"10.0.0.7".parse().expect("ip"))
        );
        // Asked to patch, it does not repeat the hint.
        args.force = true;
        args.print_patch = true;
        args.patch_manifests =
            Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("manifests/base"));
        let mut out = Vec::new();
        run(&args, &mut out).expect("run");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(!text.contains("new CA"), "{text}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn new_names_trigger_reissue() {
        let dir = temp_dir("names");
        let mut args = CertsArgs::new(&dir);
        ensure(&args).expect("first");
        args.extra_sans = vec!["webhook.example.test".into()];
        let outcome = ensure(&args).expect("second");
        assert_eq!(outcome.serving, Action::Renewed);
        assert!(
            outcome
                .serving_info
                .dns_names
                .contains(&"webhook.example.test".to_string())
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn secret_manifest_is_a_tls_secret_with_ca() {
        let ca = generate_ca(Duration::from_secs(86_400)).expect("ca");
        let serving = issue_serving(&ca, &service_dns_names("s", "n"), Duration::from_secs(3600))
            .expect("serving");
        let yaml = secret_manifest("kuota-webhook-tls", "n", &ca, &serving).expect("yaml");
        let secret: Secret = serde_norway::from_str(&yaml).expect("parses as Secret");
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        let data = secret.data.expect("data");
        assert_eq!(data["ca.crt"].0, ca.cert_pem.as_bytes());
        assert_eq!(data["tls.key"].0, serving.key_pem.as_bytes());
        assert!(yaml.contains("kind: Secret"), "{yaml}");
    }

    #[test]
    fn ca_bundle_patch_inserts_and_replaces_keeping_comments() {
        let yaml = "\
# leading comment
apiVersion: v1
kind: Namespace
metadata:
  name: x
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: v
webhooks:
- name: a.kuota.dev # why: a
  clientConfig:
    service:
      name: s
      namespace: n
      path: /a
  sideEffects: None
- clientConfig:
    caBundle: b2xk
    service:
      name: s
      namespace: n
  name: b.kuota.dev
";
        let (patched, n) = patch_ca_bundle(yaml, "bmV3").expect("patch");
        assert_eq!(n, 2);
        assert!(patched.contains("# leading comment"));
        assert!(patched.contains("# why: a"));
        assert!(!patched.contains("b2xk"));
        assert_eq!(
            patched.matches("    caBundle: bmV3\n").count(),
            2,
            "{patched}"
        );
        // Idempotent.
        let (again, _) = patch_ca_bundle(&patched, "bmV3").expect("again");
        assert_eq!(again, patched);
    }

    #[test]
    fn rsa_or_foreign_ca_serving_cert_is_replaced() {
        let dir = temp_dir("foreign");
        let args = CertsArgs::new(&dir);
        ensure(&args).expect("first");
        // A serving cert from another CA must be reissued.
        let other_ca = generate_ca(Duration::from_secs(86_400)).expect("ca");
        let foreign = issue_serving(
            &other_ca,
            &args.subject_alt_names(),
            Duration::from_secs(86_400 * 300),
        )
        .expect("serving");
        write_atomic(&dir.join(CERT_FILE), foreign.cert_pem.as_bytes(), 0o644).expect("write");
        write_atomic(&dir.join(KEY_FILE), foreign.key_pem.as_bytes(), 0o600).expect("write");
        let outcome = ensure(&args).expect("second");
        assert_eq!(outcome.serving, Action::Renewed);
        assert_eq!(outcome.reason.as_deref(), Some("signed by a different CA"));
        let _ = fs::remove_dir_all(&dir);
    }
}
