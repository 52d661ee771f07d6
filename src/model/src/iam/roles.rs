//! Roles and OpenID Connect providers: what STS sessions are made from
//! (see [`super::sts`]). A role has a trust policy (who may assume it),
//! inline and attached policies (what its sessions may do), a longest
//! session, and an enabled switch. A provider is an issuer URL and the
//! audiences (client ids) its tokens may carry.

use std::collections::{BTreeMap, BTreeSet};

use super::tables::{OidcProvider, OidcProviderConfig, Role, RoleConfig};
use super::{check_iam_name, check_path, new_id};
use super::{Iam, IamError, IamResult};
use crate::policy::Policy;

/// AWS's bounds on a role's longest session, in seconds.
pub const MIN_SESSION_SECS: u64 = 3600;
pub const MAX_SESSION_SECS: u64 = 43200;

fn check_trust(doc: &str) -> IamResult<()> {
    Policy::parse_trust(doc)
        .map(|_| ())
        .map_err(IamError::MalformedPolicyDocument)
}

/// A provider's name: its URL without the scheme and a trailing `/`
/// (`https://auth.example.org/realms/x` → `auth.example.org/realms/x`),
/// as in its ARN and its claim keys.
pub fn provider_name(url: &str) -> IamResult<String> {
    let u = url::Url::parse(url)
        .map_err(|e| IamError::InvalidInput(format!("Url {url:?} is not a URL: {e}")))?;
    // http:// only on this machine (tests): elsewhere, anyone on the path
    // could swap the provider's keys.
    let loopback = match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    let scheme_ok = u.scheme() == "https" || (u.scheme() == "http" && loopback);
    if !scheme_ok || u.host_str().is_none() || u.query().is_some() {
        return Err(IamError::InvalidInput(format!(
            "Url {url:?}: an issuer is https://host[:port][/path] (http:// only on 127.0.0.1 or localhost)"
        )));
    }
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    Ok(rest.trim_end_matches('/').to_string())
}

impl Iam {
    pub async fn create_role(
        &self,
        name: &str,
        path: Option<&str>,
        description: &str,
        trust: &str,
        max_session_secs: Option<u64>,
    ) -> IamResult<(Role, RoleConfig)> {
        check_iam_name("role", name, 64)?;
        let path = path.unwrap_or("/");
        check_path(path)?;
        check_trust(trust)?;
        let max = max_session_secs.unwrap_or(MIN_SESSION_SECS);
        if !(MIN_SESSION_SECS..=MAX_SESSION_SECS).contains(&max) {
            return Err(IamError::InvalidInput(format!(
                "MaxSessionDuration {max}: {MIN_SESSION_SECS} to {MAX_SESSION_SECS} seconds"
            )));
        }
        let c = RoleConfig {
            id: new_id("AROA", 17),
            path: path.to_string(),
            description: description.to_string(),
            trust: trust.to_string(),
            policies: BTreeMap::new(),
            attached: BTreeSet::new(),
            max_session_secs: max,
            enabled: true,
        };
        self.create(&self.roles, "Role", name, c).await?;
        self.role(name).await
    }

    pub async fn role(&self, name: &str) -> IamResult<(Role, RoleConfig)> {
        Self::live(&self.roles, "role", name).await
    }

    pub async fn list_roles(&self, path_prefix: &str) -> IamResult<Vec<(Role, RoleConfig)>> {
        let mut all = Self::all(&self.roles).await?;
        all.retain(|(_, c)| c.path.starts_with(path_prefix));
        Ok(all)
    }

    pub async fn delete_role(&self, name: &str) -> IamResult<()> {
        self.gate()?;
        let (e, c) = self.role(name).await?;
        if !c.policies.is_empty() || !c.attached.is_empty() {
            return Err(IamError::DeleteConflict(format!(
                "Cannot delete entity, must delete policies first (role {name})."
            )));
        }
        self.clear(&self.roles, e).await
    }

    pub async fn update_trust(&self, name: &str, trust: &str) -> IamResult<()> {
        check_trust(trust)?;
        self.change(&self.roles, "role", name, |c| {
            c.trust = trust.to_string();
            Ok(())
        })
        .await
        .map(|_| ())
    }

    /// Enables or disables a role: a disabled role's sessions are
    /// refused, and it cannot be assumed.
    pub async fn set_role_enabled(&self, name: &str, enabled: bool) -> IamResult<()> {
        self.change(&self.roles, "role", name, |c| {
            c.enabled = enabled;
            Ok(())
        })
        .await
        .map(|_| ())
    }

    // ---- OpenID Connect providers ----

    pub async fn create_provider(
        &self,
        url: &str,
        client_ids: BTreeSet<String>,
    ) -> IamResult<String> {
        let name = provider_name(url)?;
        let c = OidcProviderConfig {
            url: url.trim_end_matches('/').to_string(),
            client_ids,
        };
        self.create(&self.providers, "Provider", &name, c).await?;
        Ok(name)
    }

    pub async fn provider(&self, name: &str) -> IamResult<(OidcProvider, OidcProviderConfig)> {
        Self::live(&self.providers, "OpenID Connect provider", name).await
    }

    pub async fn list_providers(&self) -> IamResult<Vec<(OidcProvider, OidcProviderConfig)>> {
        Self::all(&self.providers).await
    }

    pub async fn delete_provider(&self, name: &str) -> IamResult<()> {
        self.gate()?;
        let (e, _) = self.provider(name).await?;
        self.clear(&self.providers, e).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names() {
        assert_eq!(
            provider_name("https://auth.example.org/realms/x/").unwrap(),
            "auth.example.org/realms/x"
        );
        assert_eq!(
            provider_name("http://127.0.0.1:4444/").unwrap(),
            "127.0.0.1:4444"
        );
        assert!(provider_name("ftp://x").is_err());
        assert!(provider_name("http://auth.example.org").is_err());
        assert!(provider_name("nothing").is_err());
        assert!(check_trust(r#"{"Statement":{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam:::oidc-provider/127.0.0.1:4444"},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"127.0.0.1:4444:aud":"garage"}}}}"#).is_ok());
        assert!(
            check_trust(r#"{"Statement":{"Effect":"Allow","Action":"sts:AssumeRole"}}"#).is_err()
        );
    }
}
