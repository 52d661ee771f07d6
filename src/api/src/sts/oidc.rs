//! Checking a web identity token (a JWT an OpenID Connect provider
//! signed): its issuer is a provider made with
//! CreateOpenIDConnectProvider, its signature is by one of the provider's
//! keys (found by discovery: `ISSUER/.well-known/openid-configuration`,
//! then its `jwks_uri`), its audience one of the provider's client ids,
//! and it has not expired by the cluster's time.
//!
//! Keys are kept for [`KEYS_TTL`]; a token signed by a key not in them
//! makes the keys fetched again (the provider rotated them), at most
//! once per [`REFETCH_EVERY`] per provider. Every fetch is bounded in
//! time ([`FETCH_TIMEOUT`]) and size ([`MAX_DOCUMENT`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use garage_model::iam::tables::OidcProviderConfig;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tracing::{info, warn};

pub const KEYS_TTL: Duration = Duration::from_secs(15 * 60);
pub const REFETCH_EVERY: Duration = Duration::from_secs(10);
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_DOCUMENT: usize = 1 << 20;
/// Clock leeway for `nbf` and `iat`, as providers' clocks differ.
const LEEWAY_SECS: u64 = 60;
/// Most claims kept with a session, and their longest text.
const MAX_CLAIMS: usize = 50;
const MAX_CLAIM_LEN: usize = 512;

/// Why a token is refused (STS's `InvalidIdentityToken` or
/// `IDPCommunicationError`, or `ExpiredTokenException`).
#[derive(Debug)]
pub enum TokenError {
    Invalid(String),
    Expired(String),
    Provider(String),
}

/// A checked token: its provider's name, its text claims, the audience
/// it was taken for.
pub struct Checked {
    pub provider: String,
    pub claims: BTreeMap<String, String>,
    pub audience: String,
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// The keys of each provider, by issuer URL.
pub struct Verifier {
    http: reqwest::Client,
    keys: Mutex<HashMap<String, Keys>>,
    tried: Mutex<HashMap<String, Instant>>,
}

fn invalid(m: impl Into<String>) -> TokenError {
    TokenError::Invalid(m.into())
}

/// The token's claims, read without checking the signature (to find its
/// issuer first).
fn peek_claims(token: &str) -> Result<serde_json::Map<String, Value>, TokenError> {
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| invalid("the web identity token is not a JWT (header.payload.signature)"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| invalid("the web identity token's payload is not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(invalid(
            "the web identity token's payload is not a JSON object",
        )),
    }
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier {
    pub fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                // No redirects: a provider's documents are where it says.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("an HTTP client with rustls"),
            keys: Mutex::new(HashMap::new()),
            tried: Mutex::new(HashMap::new()),
        }
    }

    async fn get_json(&self, url: &str) -> Result<Value, TokenError> {
        let fail = |e: String| TokenError::Provider(format!("cannot fetch {url}: {e}"));
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(fail(format!("HTTP {}", resp.status())));
        }
        if resp
            .content_length()
            .is_some_and(|l| l as usize > MAX_DOCUMENT)
        {
            return Err(fail(format!("more than {MAX_DOCUMENT} bytes")));
        }
        let body = resp.bytes().await.map_err(|e| fail(e.to_string()))?;
        if body.len() > MAX_DOCUMENT {
            return Err(fail(format!("more than {MAX_DOCUMENT} bytes")));
        }
        serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))
    }

    /// Discovery, then the key set.
    async fn fetch_keys(&self, issuer: &str) -> Result<JwkSet, TokenError> {
        let conf = self
            .get_json(&format!("{issuer}/.well-known/openid-configuration"))
            .await?;
        let jwks_uri = conf["jwks_uri"].as_str().ok_or_else(|| {
            TokenError::Provider(format!("{issuer}'s discovery document has no jwks_uri"))
        })?;
        let set = self.get_json(jwks_uri).await?;
        let set: JwkSet = serde_json::from_value(set)
            .map_err(|e| TokenError::Provider(format!("{jwks_uri} is not a JWK set: {e}")))?;
        info!(
            issuer,
            keys = set.keys.len(),
            "fetched an OpenID Connect provider's keys"
        );
        Ok(set)
    }

    /// The key `kid` of `issuer`: from the kept keys, or fetched again
    /// when they are old or lack it.
    async fn key(
        &self,
        issuer: &str,
        kid: Option<&str>,
    ) -> Result<jsonwebtoken::jwk::Jwk, TokenError> {
        let find = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let fresh = {
            let keys = self.keys.lock().expect("keys lock");
            keys.get(issuer)
                .filter(|k| k.fetched.elapsed() < KEYS_TTL)
                .and_then(|k| find(&k.set))
        };
        if let Some(k) = fresh {
            return Ok(k);
        }
        let may_fetch = {
            let mut tried = self.tried.lock().expect("tried lock");
            let ok = tried
                .get(issuer)
                .is_none_or(|t| t.elapsed() >= REFETCH_EVERY);
            if ok {
                tried.insert(issuer.to_string(), Instant::now());
            }
            ok
        };
        if may_fetch {
            match self.fetch_keys(issuer).await {
                Ok(set) => {
                    self.keys.lock().expect("keys lock").insert(
                        issuer.to_string(),
                        Keys {
                            set,
                            fetched: Instant::now(),
                        },
                    );
                }
                Err(e) => {
                    warn!(issuer, error = ?e, "cannot fetch an OpenID Connect provider's keys");
                    return Err(e);
                }
            }
        }
        let keys = self.keys.lock().expect("keys lock");
        keys.get(issuer).and_then(|k| find(&k.set)).ok_or_else(|| {
            invalid(format!(
                "the web identity token is signed by key {kid:?}, which {issuer} does not publish"
            ))
        })
    }

    /// Checks `token` against `providers` (name, configuration) at
    /// cluster time `now_ms`.
    pub async fn verify(
        &self,
        token: &str,
        providers: &[(String, OidcProviderConfig)],
        now_ms: u64,
    ) -> Result<Checked, TokenError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("the web identity token's header: {e}")))?;
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
                | Algorithm::EdDSA
        ) {
            return Err(invalid(format!(
                "the web identity token is signed with {:?}: only public-key algorithms are taken",
                header.alg
            )));
        }
        let peeked = peek_claims(token)?;
        let iss = peeked
            .get("iss")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("the web identity token has no issuer (iss)"))?;
        let (name, provider) = providers
            .iter()
            .find(|(_, p)| p.url.trim_end_matches('/') == iss.trim_end_matches('/'))
            .ok_or_else(|| {
                invalid(format!(
                    "no OpenID Connect provider for issuer {iss} (aws iam create-open-id-connect-provider --url {iss})"
                ))
            })?;
        if provider.client_ids.is_empty() {
            return Err(invalid(format!(
                "provider {name} takes no audience (its ClientIDList is empty)"
            )));
        }
        let jwk = self.key(&provider.url, header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| TokenError::Provider(format!("{name}'s key cannot be used: {e}")))?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[iss]);
        let auds: Vec<&str> = provider.client_ids.iter().map(String::as_str).collect();
        v.set_audience(&auds);
        // Expiry is judged below, by the cluster's time.
        v.validate_exp = false;
        v.validate_nbf = false;
        v.required_spec_claims = ["iss", "sub", "aud", "exp"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &v)
            .map_err(|e| invalid(format!("the web identity token is refused: {e}")))?;
        let claims = data.claims;
        let now = now_ms / 1000;
        let exp = claims
            .get("exp")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid("exp is not a number"))?;
        if exp <= now {
            return Err(TokenError::Expired(format!(
                "the web identity token expired {} s ago",
                now - exp
            )));
        }
        if claims
            .get("nbf")
            .and_then(Value::as_u64)
            .is_some_and(|nbf| nbf > now + LEEWAY_SECS)
        {
            return Err(invalid("the web identity token is not valid yet (nbf)"));
        }
        let audience = match claims.get("aud").unwrap_or(&Value::Null) {
            Value::String(a) => a.clone(),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .find(|a| provider.client_ids.contains(*a))
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        let mut text: BTreeMap<String, String> = claims
            .iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) if s.len() <= MAX_CLAIM_LEN => Some((k.clone(), s.clone())),
                Value::Number(n) => Some((k.clone(), n.to_string())),
                Value::Bool(b) => Some((k.clone(), b.to_string())),
                _ => None,
            })
            .take(MAX_CLAIMS)
            .collect();
        text.insert("aud".into(), audience.clone());
        Ok(Checked {
            provider: name.clone(),
            claims: text,
            audience,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_peeked_and_malformed_ones_refused() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let t = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"RS256"}"#),
            b64(r#"{"iss":"https://i"}"#)
        );
        assert_eq!(peek_claims(&t).unwrap()["iss"], "https://i");
        assert!(peek_claims("nodots").is_err());
        assert!(peek_claims(&format!("a.{}.c", b64("[1]"))).is_err());
        // No issuer: refused, not a panic.
        let no_iss = format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64("{}"));
        let v = Verifier::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let r = rt.block_on(v.verify(&no_iss, &[], 0));
        assert!(matches!(r, Err(TokenError::Invalid(m)) if m.contains("iss")));
    }
}
