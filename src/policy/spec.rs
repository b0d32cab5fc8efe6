//! The policy file format and its checks: YAML text in, validated [`Policy`] values out.
//! Pure: file contents come in as strings, errors go out with file, line and reason.
//!
//! ```yaml
//! apiVersion: kuota.dev/v1alpha1
//! kind: AdmissionPolicy
//! metadata:
//!   name: gpu-teams
//! spec:
//!   namespaceSelector: {matchLabels: {kuota.dev/tier: gpu}}   # {} matches every namespace
//!   defaultLocalQueue: gpu-queue          # queue-name for jobs that name none
//!   gpuResources: [nvidia.com/gpu]        # resources counted as GPUs (default shown)
//!   gpuProductLabel: nvidia.com/gpu.product  # node label naming the GPU model (default)
//!   maxGPUsPerJob: 32                     # over all pods of the job
//!   maxGPUsPerPod: 8
//!   allowedFlavors: [h100, h100-spot]     # values of the kuota.dev/flavor annotation
//!   allowedGPUProducts: [NVIDIA-H100-80GB-HBM3]
//!   requiredLabels:
//!   - key: kuota.dev/team
//!   - key: kuota.dev/cost-center
//!     values: [research, production]
//! ```

use crate::api::validate::{
    FieldError, Path, dns1123_subdomain_errors, label_value_errors, qualified_name_errors,
    validate_label_selector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// `apiVersion` of policy documents.
pub const POLICY_API_VERSION: &str = "kuota.dev/v1alpha1";
/// `kind` of policy documents.
pub const POLICY_KIND: &str = "AdmissionPolicy";
/// GPU resource counted when a policy names none.
pub const DEFAULT_GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Node label naming the GPU model when a policy names none (NVIDIA GPU feature discovery).
pub const DEFAULT_GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// One policy document as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyDoc {
    api_version: String,
    kind: String,
    metadata: PolicyMeta,
    spec: PolicySpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyMeta {
    name: String,
}

/// What a policy enforces in the namespaces it selects.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// Namespaces the policy applies to; `{}` selects every namespace. Required.
    pub namespace_selector: Option<LabelSelector>,
    /// LocalQueue given to jobs that name none.
    #[serde(default)]
    pub default_local_queue: Option<String>,
    /// Resources counted as GPUs.
    #[serde(default = "default_gpu_resources", rename = "gpuResources")]
    pub gpu_resources: Vec<String>,
    /// Node label whose value names the GPU model.
    #[serde(default = "default_gpu_product_label", rename = "gpuProductLabel")]
    pub gpu_product_label: String,
    /// Most GPUs one job may request over all its pods.
    #[serde(default, rename = "maxGPUsPerJob")]
    pub max_gpus_per_job: Option<u32>,
    /// Most GPUs one pod may request.
    #[serde(default, rename = "maxGPUsPerPod")]
    pub max_gpus_per_pod: Option<u32>,
    /// Flavors a job may ask for with the `kuota.dev/flavor` annotation.
    #[serde(default)]
    pub allowed_flavors: Option<Vec<String>>,
    /// GPU models a job may select (node selector, node affinity or `kuota.dev/gpu-product`).
    #[serde(default, rename = "allowedGPUProducts")]
    pub allowed_gpu_products: Option<Vec<String>>,
    /// Labels every job must carry.
    #[serde(default)]
    pub required_labels: Vec<RequiredLabel>,
}

/// A label a job must carry, optionally restricted to some values.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequiredLabel {
    /// Label key.
    pub key: String,
    /// Allowed values; any value when absent.
    #[serde(default)]
    pub values: Option<Vec<String>>,
}

fn default_gpu_resources() -> Vec<String> {
    vec![DEFAULT_GPU_RESOURCE.to_string()]
}

fn default_gpu_product_label() -> String {
    DEFAULT_GPU_PRODUCT_LABEL.to_string()
}

/// Where a policy came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySource {
    /// File path as given to the loader (e.g. `policies/gpu-teams.yaml`).
    pub file: String,
    /// Line of the document's first line (1-based).
    pub line: usize,
}

impl fmt::Display for PolicySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A validated policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `metadata.name`, unique across all files.
    pub name: String,
    /// Where it was defined.
    pub source: PolicySource,
    /// The rules.
    pub spec: PolicySpec,
}

impl Policy {
    /// The namespace selector (always set once validated).
    pub fn selector(&self) -> &LabelSelector {
        static ALL: LabelSelector = LabelSelector {
            match_expressions: None,
            match_labels: None,
        };
        self.spec.namespace_selector.as_ref().unwrap_or(&ALL)
    }
}

/// Every policy in force, in file-name then document order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicySet {
    /// The policies.
    pub policies: Vec<Policy>,
}

impl PolicySet {
    /// Whether there are no policies.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Builds a set from `(file name, contents)` pairs, checking each file and that policy
    /// names are unique. All errors of all files are reported together.
    pub fn from_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, PolicyLoadError> {
        let mut files: Vec<(&str, &str)> = files.into_iter().collect();
        files.sort_by(|a, b| a.0.cmp(b.0));
        let mut policies = Vec::new();
        let mut errors = Vec::new();
        for (name, text) in files {
            match parse_file(name, text) {
                Ok(ps) => policies.extend(ps),
                Err(mut e) => errors.append(&mut e),
            }
        }
        let mut seen: BTreeMap<&str, &PolicySource> = BTreeMap::new();
        for p in &policies {
            if let Some(first) = seen.get(p.name.as_str()) {
                errors.push(PolicyFileError {
                    file: p.source.file.clone(),
                    line: Some(p.source.line),
                    column: None,
                    message: format!(
                        "metadata.name: policy {:?} is already defined at {first}",
                        p.name
                    ),
                });
            } else {
                seen.insert(&p.name, &p.source);
            }
        }
        if errors.is_empty() {
            Ok(Self { policies })
        } else {
            Err(PolicyLoadError { errors })
        }
    }
}

/// One problem in one policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFileError {
    /// File path as given to the loader.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong, starting with the field path.
    pub message: String,
}

impl fmt::Display for PolicyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a set of policy files was rejected; the previous set stays in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLoadError {
    /// Every problem found, never empty.
    pub errors: Vec<PolicyFileError>,
}

impl fmt::Display for PolicyLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msgs: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
        f.write_str(&msgs.join("\n"))
    }
}

impl std::error::Error for PolicyLoadError {}

/// Parses and checks every document of one file.
pub fn parse_file(file: &str, text: &str) -> Result<Vec<Policy>, Vec<PolicyFileError>> {
    let starts = document_starts(text);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut last_error: Option<String> = None;
    // serde_norway's document iterator repeats a syntax error forever instead of ending, so
    // stop at a repeated error, and never read more documents than the text has lines.
    let max_docs = text.lines().count() + 1;
    for (i, doc) in serde_norway::Deserializer::from_str(text)
        .enumerate()
        .take(max_docs)
    {
        let start = starts.get(i).copied().unwrap_or(1);
        let end = starts.get(i + 1).copied().unwrap_or(usize::MAX);
        if is_blank_document(text, start, end) {
            continue;
        }
        let parsed: Result<PolicyDoc, _> = serde_path_to_error::deserialize(doc);
        let doc = match parsed {
            Ok(d) => d,
            Err(e) => {
                let raw = e.inner().to_string();
                if last_error.as_deref() == Some(raw.as_str()) {
                    break;
                }
                last_error = Some(raw);
                let loc = e.inner().location();
                let path = e.path().to_string();
                let inner = strip_location(&e.inner().to_string());
                // serde_norway already names the path in some messages; do not repeat it.
                let message = if path == "." || inner.starts_with(&format!("{path}: ")) {
                    inner
                } else {
                    format!("{path}: {inner}")
                };
                errors.push(PolicyFileError {
                    file: file.to_string(),
                    line: loc.as_ref().map(|l| l.line()),
                    column: loc.as_ref().map(|l| l.column()),
                    message,
                });
                continue;
            }
        };
        let source = PolicySource {
            file: file.to_string(),
            line: first_content_line(text, start),
        };
        let field_errors = check(&doc);
        if field_errors.is_empty() {
            out.push(Policy {
                name: doc.metadata.name,
                source,
                spec: doc.spec,
            });
        } else {
            for e in field_errors {
                let line = locate(text, start, end, &e.path).unwrap_or(source.line);
                errors.push(PolicyFileError {
                    file: file.to_string(),
                    line: Some(line),
                    column: None,
                    message: e.to_string(),
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Semantic checks serde cannot express.
fn check(doc: &PolicyDoc) -> Vec<FieldError> {
    let mut errs = check_type_and_name(doc);
    let spec = &doc.spec;
    let sp = Path::new("spec");
    check_targeting(spec, &sp, &mut errs);
    check_gpu_counting(spec, &sp, &mut errs);
    check_gpu_limits(spec, &sp, &mut errs);
    check_allowed_lists(spec, &sp, &mut errs);
    check_required_labels(spec, &sp, &mut errs);
    errs
}

/// `apiVersion`, `kind` and `metadata.name`.
fn check_type_and_name(doc: &PolicyDoc) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if doc.api_version != POLICY_API_VERSION {
        errs.push(FieldError::not_supported(
            &Path::new("apiVersion"),
            &doc.api_version,
            &[POLICY_API_VERSION],
        ));
    }
    if doc.kind != POLICY_KIND {
        errs.push(FieldError::not_supported(
            &Path::new("kind"),
            &doc.kind,
            &[POLICY_KIND],
        ));
    }
    let name_path = Path::new("metadata").child("name");
    for m in dns1123_subdomain_errors(&doc.metadata.name) {
        errs.push(FieldError::invalid(&name_path, &doc.metadata.name, m));
    }
    errs
}

/// Which namespaces the policy applies to, and the queue it gives their jobs.
fn check_targeting(spec: &PolicySpec, sp: &Path, errs: &mut Vec<FieldError>) {
    match &spec.namespace_selector {
        None => errs.push(FieldError::required(
            &sp.child("namespaceSelector"),
            "use {} to select every namespace",
        )),
        Some(sel) => errs.extend(validate_label_selector(sel, &sp.child("namespaceSelector"))),
    }
    if let Some(q) = &spec.default_local_queue {
        for m in dns1123_subdomain_errors(q) {
            errs.push(FieldError::invalid(&sp.child("defaultLocalQueue"), q, m));
        }
    }
}

/// `gpuResources` and `gpuProductLabel`: what counts as a GPU and names its model.
fn check_gpu_counting(spec: &PolicySpec, sp: &Path, errs: &mut Vec<FieldError>) {
    if spec.gpu_resources.is_empty() {
        errs.push(FieldError::required(&sp.child("gpuResources"), ""));
    }
    for (i, r) in spec.gpu_resources.iter().enumerate() {
        for m in qualified_name_errors(r) {
            errs.push(FieldError::invalid(
                &sp.child("gpuResources").index(i),
                r,
                m,
            ));
        }
    }
    for m in qualified_name_errors(&spec.gpu_product_label) {
        errs.push(FieldError::invalid(
            &sp.child("gpuProductLabel"),
            &spec.gpu_product_label,
            m,
        ));
    }
}

/// `maxGPUsPerJob` and `maxGPUsPerPod`: positive, and a pod no larger than a job.
fn check_gpu_limits(spec: &PolicySpec, sp: &Path, errs: &mut Vec<FieldError>) {
    for (field, v) in [
        ("maxGPUsPerJob", spec.max_gpus_per_job),
        ("maxGPUsPerPod", spec.max_gpus_per_pod),
    ] {
        if v == Some(0) {
            errs.push(FieldError::invalid_num(
                &sp.child(field),
                0,
                "must be at least 1 (remove the GPU resources from the namespace's queues to forbid GPUs)",
            ));
        }
    }
    if let (Some(job), Some(pod)) = (spec.max_gpus_per_job, spec.max_gpus_per_pod)
        && pod > job
    {
        errs.push(FieldError::invalid_num(
            &sp.child("maxGPUsPerPod"),
            pod,
            format!("must not exceed maxGPUsPerJob ({job})"),
        ));
    }
}

/// `allowedFlavors` and `allowedGPUProducts`: non-empty lists of label values.
fn check_allowed_lists(spec: &PolicySpec, sp: &Path, errs: &mut Vec<FieldError>) {
    for (field, list) in [
        ("allowedFlavors", &spec.allowed_flavors),
        ("allowedGPUProducts", &spec.allowed_gpu_products),
    ] {
        match list {
            Some(l) if l.is_empty() => errs.push(FieldError::required(
                &sp.child(field),
                "list at least one value, or remove the rule",
            )),
            Some(l) => {
                for (i, v) in l.iter().enumerate() {
                    for m in label_value_errors(v) {
                        errs.push(FieldError::invalid(&sp.child(field).index(i), v, m));
                    }
                }
            }
            None => {}
        }
    }
}

/// `requiredLabels`: label keys and the values they may take.
fn check_required_labels(spec: &PolicySpec, sp: &Path, errs: &mut Vec<FieldError>) {
    for (i, r) in spec.required_labels.iter().enumerate() {
        let rp = sp.child("requiredLabels").index(i);
        for m in qualified_name_errors(&r.key) {
            errs.push(FieldError::invalid(&rp.child("key"), &r.key, m));
        }
        for (j, v) in r.values.iter().flatten().enumerate() {
            for m in label_value_errors(v) {
                errs.push(FieldError::invalid(&rp.child("values").index(j), v, m));
            }
        }
    }
}

/// 1-based line where each document begins (after each `---` separator).
fn document_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    let mut seen_content = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            if seen_content {
                starts.push(i + 2);
            } else if let Some(first) = starts.last_mut() {
                // A leading separator opens the first document rather than a new one.
                *first = i + 2;
            }
            seen_content = false;
        } else if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            seen_content = true;
        }
    }
    starts
}

fn lines_in(text: &str, start: usize, end: usize) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(move |(n, _)| *n >= start && *n < end)
        .take_while(|(_, l)| !l.starts_with("---"))
}

fn is_blank_document(text: &str, start: usize, end: usize) -> bool {
    lines_in(text, start, end).all(|(_, l)| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

fn first_content_line(text: &str, start: usize) -> usize {
    lines_in(text, start, usize::MAX)
        .find(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map_or(start, |(n, _)| n)
}

/// Best-effort line of the field at `path` (e.g. `spec.maxGPUsPerPod` or
/// `spec.requiredLabels[1].key`) inside the document spanning `start..end`: each segment is
/// looked up below the previous one, and `[i]` moves to the i-th list item. Returns the
/// deepest line found (flow-style maps stop at their enclosing key).
fn locate(text: &str, start: usize, end: usize, path: &str) -> Option<usize> {
    let mut from = start;
    let mut line = None;
    for seg in path.split('.') {
        let (key, index) = match seg.strip_suffix(']').and_then(|s| s.split_once('[')) {
            Some((k, i)) => (k, i.parse::<usize>().ok()),
            None => (seg, None),
        };
        let Some(n) = find_key(text, from, end, key) else {
            break;
        };
        line = Some(n);
        from = n;
        if let Some(i) = index
            && let Some(m) = nth_item_line(text, n, end, i)
        {
            line = Some(m);
            from = m;
        }
    }
    line
}

fn find_key(text: &str, from: usize, end: usize, key: &str) -> Option<usize> {
    lines_in(text, from, end).find_map(|(n, l)| {
        let t = l.trim_start().trim_start_matches("- ").trim_start();
        let matches = t
            .strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
            || t.strip_prefix(&format!("{key:?}"))
                .is_some_and(|rest| rest.starts_with(':'));
        matches.then_some(n)
    })
}

/// Line of the `i`-th `- item` of a block list starting after `key_line` (or the key line
/// itself for flow lists like `[a, b]`). Only items at the first item's indentation count,
/// so nested lists are skipped.
fn nth_item_line(text: &str, key_line: usize, end: usize, i: usize) -> Option<usize> {
    let key_text = text.lines().nth(key_line.checked_sub(1)?)?;
    if key_text.contains('[') {
        return Some(key_line);
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut items = lines_in(text, key_line + 1, end)
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
    let (first_n, first) = items.next()?;
    let item_indent = indent(first);
    if !first.trim_start().starts_with("- ") {
        return None;
    }
    std::iter::once((first_n, first))
        .chain(items.take_while(|(_, l)| indent(l) >= item_indent))
        .filter(|(_, l)| indent(l) == item_indent && l.trim_start().starts_with("- "))
        .nth(i)
        .map(|(n, _)| n)
}

/// serde_norway appends "at line L column C" to messages; the location is reported separately.
fn strip_location(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\nspec:\n  namespaceSelector: {}\n  maxGPUsPerPod: 8\n";

    #[test]
    fn parses_defaults() {
        let ps = parse_file("a.yaml", GOOD).expect("valid");
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].spec.gpu_resources, [DEFAULT_GPU_RESOURCE]);
        assert_eq!(ps[0].spec.gpu_product_label, DEFAULT_GPU_PRODUCT_LABEL);
        assert_eq!(ps[0].source.line, 1);
    }

    #[test]
    fn syntax_and_type_errors_carry_file_line_and_path() {
        let bad = format!("{GOOD}  maxGPUsPerJob: lots\n");
        let e = parse_file("b.yaml", &bad).expect_err("bad type");
        assert_eq!(e[0].line, Some(7), "{e:?}");
        assert!(e[0].to_string().starts_with("b.yaml:7:"), "{}", e[0]);
        assert!(
            e[0].message.starts_with("spec.maxGPUsPerJob: invalid type"),
            "{}",
            e[0]
        );
        let unknown = format!("{GOOD}  maxGpus: 3\n");
        let e = parse_file("c.yaml", &unknown).expect_err("unknown field");
        assert!(e[0].message.contains("unknown field `maxGpus`"), "{}", e[0]);
        assert_eq!(e[0].line, Some(7));
    }

    #[test]
    fn semantic_errors_point_at_their_line() {
        let text = "---\n# second policy below\napiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: ok}\nspec: {namespaceSelector: {}}\n---\napiVersion: kuota.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata:\n  name: Bad_Name\nspec:\n  namespaceSelector: {}\n  maxGPUsPerJob: 4\n  maxGPUsPerPod: 8\n  requiredLabels:\n  - key: team\n  - key: cost center\n";
        let e = parse_file("d.yaml", text).expect_err("semantic errors");
        let lines: Vec<(Option<usize>, &str)> =
            e.iter().map(|x| (x.line, x.message.as_str())).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].0, Some(11));
        assert!(
            lines[0]
                .1
                .starts_with("metadata.name: Invalid value: \"Bad_Name\"")
        );
        assert_eq!(lines[1].0, Some(15));
        assert!(lines[1].1.contains("must not exceed maxGPUsPerJob (4)"));
        assert_eq!(lines[2].0, Some(18));
        assert!(
            lines[2]
                .1
                .starts_with("spec.requiredLabels[1].key: Invalid value: \"cost center\"")
        );
    }

    #[test]
    fn syntax_errors_end_the_file() {
        // Terminates, and reports the syntax error with its position.
        let e = parse_file("s.yaml", "spec: [").expect_err("syntax");
        assert!(e.len() <= 2, "{e:?}");
        let syntax = e.last().expect("an error");
        assert_eq!(
            (syntax.line, syntax.message.as_str()),
            (Some(2), "did not find expected node content")
        );
        let two = format!("{GOOD}---\nspec: [\n");
        assert!(parse_file("t.yaml", &two).expect_err("syntax").len() <= 2);
    }

    #[test]
    fn duplicate_names_across_files() {
        let e = PolicySet::from_files([("x.yaml", GOOD), ("y.yaml", GOOD)]).expect_err("dup");
        assert_eq!(
            e.to_string(),
            "y.yaml:1: metadata.name: policy \"p\" is already defined at x.yaml:1"
        );
        let empty = PolicySet::from_files([("e.yaml", "# nothing\n---\n")]).expect("blank ok");
        assert!(empty.is_empty());
    }
}
