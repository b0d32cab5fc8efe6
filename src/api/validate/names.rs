//! Kubernetes name and label syntax checks, with apimachinery's messages.

use super::{FieldError, Path};

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn max_len_msg(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// Messages for a value that is not a DNS-1123 label (empty if valid).
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push(max_len_msg(63));
    }
    if !is_dns_label(s) {
        out.push(DNS1123_LABEL_MSG.to_string());
    }
    out
}

/// Messages for a value that is not a DNS-1123 subdomain (empty if valid).
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 253 {
        out.push(max_len_msg(253));
    }
    if !s.split('.').all(is_dns_label) {
        out.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    out
}

fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Messages for a value that is not a qualified name like `example.com/MyName` (empty if valid).
pub fn qualified_name_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                out.push("prefix part must be non-empty".to_string());
            } else {
                out.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            out.push(format!("a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return out;
        }
    };
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push(format!("name part {}", max_len_msg(63)));
    }
    if !name.is_empty() && !is_qualified_part(name) {
        out.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    out
}

/// Messages for an invalid label value (empty if valid; the empty string is valid).
pub fn label_value_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 63 {
        out.push(max_len_msg(63));
    }
    if !s.is_empty() && !is_qualified_part(s) {
        out.push(LABEL_VALUE_MSG.to_string());
    }
    out
}

/// Records one `Invalid value` error per message.
pub(super) fn push_errors(errs: &mut Vec<FieldError>, path: &Path, value: &str, msgs: Vec<String>) {
    errs.extend(
        msgs.into_iter()
            .map(|m| FieldError::invalid(path, value, m)),
    );
}

/// Validates a reference to a cluster-scoped object by name (DNS-1123 subdomain).
pub(super) fn name_ref(errs: &mut Vec<FieldError>, path: &Path, value: &str) {
    push_errors(errs, path, value, dns1123_subdomain_errors(value));
}

/// Validates a label map: qualified-name keys, label values.
pub(super) fn labels<'a>(
    errs: &mut Vec<FieldError>,
    path: &Path,
    map: impl IntoIterator<Item = (&'a String, &'a String)>,
) {
    for (k, v) in map {
        push_errors(errs, path, k, qualified_name_errors(k));
        push_errors(errs, &path.key(k), v, label_value_errors(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(dns1123_subdomain_errors("team-a.example").is_empty());
        assert!(!dns1123_subdomain_errors("Team").is_empty());
        assert!(!dns1123_subdomain_errors("a..b").is_empty());
        assert!(!dns1123_subdomain_errors("-a").is_empty());
        assert!(!dns1123_subdomain_errors("").is_empty());
        assert_eq!(dns1123_subdomain_errors(&"a".repeat(254)).len(), 1);
        assert!(dns1123_label_errors("main").is_empty());
        assert!(!dns1123_label_errors("a.b").is_empty());
        assert!(!dns1123_label_errors(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn qualified_names_and_values() {
        assert!(qualified_name_errors("cpu").is_empty());
        assert!(qualified_name_errors("nvidia.com/gpu").is_empty());
        assert!(qualified_name_errors("kubernetes.io/hostname").is_empty());
        assert!(!qualified_name_errors("a/b/c").is_empty());
        assert!(!qualified_name_errors("/gpu").is_empty());
        assert!(!qualified_name_errors("Example.com/gpu").is_empty());
        assert!(!qualified_name_errors("gpu-").is_empty());
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("a100_80GB").is_empty());
        assert!(!label_value_errors("a b").is_empty());
    }
}
