//! Secrets (`rpc_secret`, `admin_token`, `metrics_token`,
//! `sse_master_key`): where each comes
//! from, in order of precedence: a command-line flag or environment variable
//! (`GARAGE_RPC_SECRET`, ...), the file such a flag or variable names
//! (`GARAGE_RPC_SECRET_FILE`, ...), the value in `garage.toml`, the file
//! named in `garage.toml` (`rpc_secret_file`, ...). Secret files must not be
//! accessible to group or others unless `allow_world_readable_secrets`.

use std::path::{Path, PathBuf};

use super::{check_rpc_secret, Config, ConfigError};

/// File, inside `metadata_dir`, holding the secret that a single node
/// configured without one generated for itself on first start.
pub const SECRET_FILE_NAME: &str = "rpc_secret";

/// Secrets given on the command line or in the environment; they win over
/// the configuration file.
#[derive(Debug, Clone, Default)]
pub struct SecretOverrides {
    pub rpc_secret: Option<String>,
    pub rpc_secret_file: Option<PathBuf>,
    pub admin_token: Option<String>,
    pub admin_token_file: Option<PathBuf>,
    pub metrics_token: Option<String>,
    pub metrics_token_file: Option<PathBuf>,
    pub sse_master_key: Option<String>,
    pub sse_master_key_file: Option<PathBuf>,
    pub allow_world_readable_secrets: Option<bool>,
}

/// Where the node's RPC secret came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOrigin {
    Configured,
    /// Read from, or just generated into, `metadata_dir/rpc_secret`.
    Generated {
        path: PathBuf,
        new: bool,
    },
}

impl Config {
    /// Applies `overrides` and reads secret files, leaving the values in
    /// `rpc_secret`, `admin.admin_token` and `admin.metrics_token`.
    pub fn resolve_secrets(&mut self, o: &SecretOverrides) -> Result<(), ConfigError> {
        let allow = o
            .allow_world_readable_secrets
            .unwrap_or(self.allow_world_readable_secrets);
        let rpc = self.pick(
            "rpc_secret",
            (&o.rpc_secret, &o.rpc_secret_file),
            (&self.rpc_secret, &self.rpc_secret_file),
            allow,
        )?;
        if let Some(s) = &rpc {
            check_rpc_secret(s).map_err(|m| self.invalid("rpc_secret", m))?;
        }
        let admin = self.pick(
            "admin_token",
            (&o.admin_token, &o.admin_token_file),
            (&self.admin.admin_token, &self.admin.admin_token_file),
            allow,
        )?;
        let metrics = self.pick(
            "metrics_token",
            (&o.metrics_token, &o.metrics_token_file),
            (&self.admin.metrics_token, &self.admin.metrics_token_file),
            allow,
        )?;
        let sse = self.pick(
            "sse_master_key",
            (&o.sse_master_key, &o.sse_master_key_file),
            (&self.sse_master_key, &self.sse_master_key_file),
            allow,
        )?;
        if let Some(s) = &sse {
            check_rpc_secret(s).map_err(|m| self.invalid("sse_master_key", m))?;
        }
        self.sse_master_key = sse;
        self.sse_master_key_file = None;
        self.rpc_secret = rpc;
        self.rpc_secret_file = None;
        self.admin.admin_token = admin;
        self.admin.admin_token_file = None;
        self.admin.metrics_token = metrics;
        self.admin.metrics_token_file = None;
        Ok(())
    }

    fn pick(
        &self,
        key: &str,
        (cli, cli_file): (&Option<String>, &Option<PathBuf>),
        (cfg, cfg_file): (&Option<String>, &Option<PathBuf>),
        allow_world_readable: bool,
    ) -> Result<Option<String>, ConfigError> {
        if cli.is_some() && cli_file.is_some() {
            return Err(self.invalid(
                key,
                format!("both the value and the file of {key} are given on the command line or in the environment; give only one"),
            ));
        }
        if cfg.is_some() && cfg_file.is_some() {
            return Err(self.invalid(
                &format!("{key}_file"),
                format!("only one of {key} and {key}_file can be set"),
            ));
        }
        if let Some(v) = cli.as_ref().or(cfg.as_ref()) {
            return Ok(Some(v.trim().to_string()));
        }
        match cli_file.as_ref().or(cfg_file.as_ref()) {
            Some(path) => Ok(Some(self.read_secret_file(
                key,
                path,
                allow_world_readable,
            )?)),
            None => Ok(None),
        }
    }

    fn read_secret_file(
        &self,
        key: &str,
        path: &Path,
        allow_world_readable: bool,
    ) -> Result<String, ConfigError> {
        let file_key = format!("{key}_file");
        let meta = std::fs::metadata(path)
            .map_err(|e| self.invalid(&file_key, format!("cannot read {}: {e}", path.display())))?;
        if !allow_world_readable {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(self.invalid(
                    &file_key,
                    format!(
                        "secret file {} is accessible to other users (mode {mode:04o}); run `chmod 600 {}`, or set allow_world_readable_secrets = true",
                        path.display(),
                        path.display()
                    ),
                ));
            }
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| self.invalid(&file_key, format!("cannot read {}: {e}", path.display())))?;
        Ok(text.trim_end().to_string())
    }

    /// Makes sure `rpc_secret` is set, after [`Config::resolve_secrets`].
    /// A node meant to join others must have one configured; a single node
    /// without one uses `metadata_dir/rpc_secret`, generating it (mode 0600)
    /// on first start.
    pub fn ensure_rpc_secret(&mut self) -> Result<SecretOrigin, ConfigError> {
        self.rpc_secret_or(true)
    }

    /// For admin commands: like [`Config::ensure_rpc_secret`], but never
    /// generates a secret; a single node's generated one must exist.
    pub fn client_rpc_secret(&mut self) -> Result<SecretOrigin, ConfigError> {
        self.rpc_secret_or(false)
    }

    fn rpc_secret_or(&mut self, generate: bool) -> Result<SecretOrigin, ConfigError> {
        if self.rpc_secret.is_some() {
            return Ok(SecretOrigin::Configured);
        }
        if self.is_multi_node() {
            let why = if self.replication_factor > 1 {
                format!("replication_factor = {}", self.replication_factor)
            } else {
                "bootstrap_peers is set".to_string()
            };
            return Err(self.invalid(
                "rpc_secret",
                format!(
                    "not set, but this node is configured to join a cluster ({why}), and all nodes of a cluster need the same secret. \
                     Generate one with `openssl rand -hex 32` and put it in rpc_secret in {} on every node \
                     (or in a file named by rpc_secret_file, or in the environment variable GARAGE_RPC_SECRET)",
                    self.source
                ),
            ));
        }
        let path = self.metadata_dir.join(SECRET_FILE_NAME);
        let new = !path.exists();
        if new && !generate {
            return Err(self.invalid(
                "rpc_secret",
                format!(
                    "not set, and {} does not exist: start the node with `garage server` first (it generates that file), \
                     or give the secret with -s or GARAGE_RPC_SECRET",
                    path.display()
                ),
            ));
        }
        if new {
            std::fs::create_dir_all(&self.metadata_dir).map_err(|e| {
                self.invalid(
                    "metadata_dir",
                    format!("cannot create {}: {e}", self.metadata_dir.display()),
                )
            })?;
            write_private(&path, &hex::encode(rand::random::<[u8; 32]>())).map_err(|e| {
                self.invalid(
                    "rpc_secret",
                    format!("cannot write a generated secret to {}: {e}", path.display()),
                )
            })?;
        }
        let secret = self.read_secret_file("rpc_secret", &path, false)?;
        check_rpc_secret(&secret).map_err(|m| {
            self.invalid(
                "rpc_secret",
                format!("the secret in {} {m}", path.display()),
            )
        })?;
        self.rpc_secret = Some(secret);
        Ok(SecretOrigin::Generated { path, new })
    }
}

fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(content.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
