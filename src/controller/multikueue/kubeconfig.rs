//! Kueue's rules for a worker's kubeconfig (`validateKubeconfig` in
//! `pkg/controller/admissionchecks/multikueue/multikueuecluster.go`): a manager must not be
//! talked into reading its own files or running programs by a Secret, so file paths, exec
//! plugins, auth providers, basic auth and unverified TLS are refused, with Kueue's
//! messages. Pure.

use kube::config::Kubeconfig;

/// The kubeconfig `text`, parsed, or why Kueue would not use it.
pub fn validate(text: &str) -> Result<Kubeconfig, String> {
    let config = Kubeconfig::from_yaml(text)
        .map_err(|e| format!("failed to parse kubeconfig(apiconfig): {e}"))?;
    for named in &config.auth_infos {
        let Some(a) = &named.auth_info else { continue };
        if a.token_file.as_deref().is_some_and(|f| !f.is_empty()) {
            return Err("tokenFile is not allowed".into());
        }
    }
    for named in &config.clusters {
        let Some(c) = &named.cluster else { continue };
        let name = &named.name;
        if c.insecure_skip_tls_verify == Some(true) {
            return Err(format!(
                "insecure TLS verification is not allowed for cluster {name}"
            ));
        }
        if c.certificate_authority
            .as_deref()
            .is_some_and(|f| !f.is_empty())
        {
            return Err(format!(
                "certificate-authority file paths are not allowed, use certificate-authority-data for cluster {name}"
            ));
        }
        match c.server.as_deref() {
            None | Some("") => return Err(format!("server URL is required for cluster {name}")),
            Some(server) if !trusted_host(server) => {
                return Err("untrusted server endpoint".into());
            }
            Some(_) => {}
        }
    }
    // The user the current context names.
    let user = config
        .current_context
        .as_deref()
        .and_then(|cur| config.contexts.iter().find(|c| c.name == cur))
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone());
    let auth = config
        .auth_infos
        .iter()
        .find(|a| Some(&a.name) == user.as_ref())
        .and_then(|a| a.auth_info.as_ref());
    if let Some(a) = auth {
        if a.username.as_deref().is_some_and(|u| !u.is_empty()) || a.password.is_some() {
            return Err("basic auth is not allowed".into());
        }
        if a.exec.is_some() {
            return Err("exec plugins are not allowed".into());
        }
        if a.auth_provider.is_some() {
            return Err("auth providers are not allowed".into());
        }
        let file = |f: &Option<String>| f.as_deref().is_some_and(|f| !f.is_empty());
        if file(&a.client_certificate) || file(&a.client_key) {
            // Kueue's client-go loader would read these from the manager's disk.
            return Err("client certificate and key file paths are not allowed".into());
        }
    }
    Ok(config)
}

/// Kueue's `isValidHostname`: the server's host is an IP address or a DNS subdomain.
fn trusted_host(server: &str) -> bool {
    let Ok(uri) = server.to_lowercase().parse::<http::Uri>() else {
        return false;
    };
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    crate::api::validate::dns1123_subdomain_errors(host).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: w1\n  cluster:\n{cluster}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context: {{cluster: w1, user: u}}\ncurrent-context: c\n"
        )
    }

    #[test]
    fn a_plain_token_kubeconfig_is_accepted() {
        let ok = config(
            "    server: https://worker1.example.com:6443\n    certificate-authority-data: Zm9v",
            "    token: abc",
        );
        assert!(validate(&ok).is_ok());
        let ip = config("    server: https://127.0.0.1:16443", "    token: abc");
        assert!(validate(&ip).is_ok());
    }

    #[test]
    fn what_kueue_refuses_is_refused_with_its_message() {
        let cases = [
            (
                config(
                    "    server: https://w1:6443\n    insecure-skip-tls-verify: true",
                    "    token: a",
                ),
                "insecure TLS verification is not allowed for cluster w1",
            ),
            (
                config(
                    "    server: https://w1:6443\n    certificate-authority: /etc/ca.pem",
                    "    token: a",
                ),
                "certificate-authority file paths are not allowed, use certificate-authority-data for cluster w1",
            ),
            (
                config("    certificate-authority-data: Zm9v", "    token: a"),
                "server URL is required for cluster w1",
            ),
            (
                config("    server: https://bad_host:6443", "    token: a"),
                "untrusted server endpoint",
            ),
            (
                config(
                    "    server: https://w1:6443",
                    "    tokenFile: /var/run/token",
                ),
                "tokenFile is not allowed",
            ),
            (
                config(
                    "    server: https://w1:6443",
                    "    username: admin\n    password: secret",
                ),
                "basic auth is not allowed",
            ),
            (
                config(
                    "    server: https://w1:6443",
                    "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}",
                ),
                "exec plugins are not allowed",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(validate(&text).err().as_deref(), Some(want), "{text}");
        }
        assert!(
            validate("clusters: [oops")
                .err()
                .is_some_and(|e| e.starts_with("failed to parse kubeconfig(apiconfig): "))
        );
    }
}
