//! Which configuration a command runs with.

use std::path::Path;

use anyhow::Context;
use garage_util::config::{Config, SecretOverrides, DEFAULT_CONFIG_PATH};

use crate::args::Opt;

/// Where the configuration came from, for the first log lines.
pub enum Loaded {
    File,
    /// No `-c` and no `/etc/garage.toml`: the built-in single-node config.
    BuiltIn,
}

/// Reads the file named by `-c` (or `GARAGE_CONFIG_FILE`), else
/// `/etc/garage.toml`; when neither is there and `builtin_fallback` is set,
/// uses the built-in single-node configuration under the working directory.
/// Secrets from the command line and environment are applied.
pub fn load(opt: &Opt, builtin_fallback: bool) -> anyhow::Result<(Config, Loaded)> {
    let (mut config, loaded) = match opt.config_path() {
        Some(path) => (Config::read(path)?, Loaded::File),
        None if Path::new(DEFAULT_CONFIG_PATH).exists() || !builtin_fallback => {
            (Config::read(Path::new(DEFAULT_CONFIG_PATH))?, Loaded::File)
        }
        None => {
            let cwd = std::env::current_dir().context("cannot read the working directory")?;
            (Config::builtin_default(&cwd), Loaded::BuiltIn)
        }
    };
    let s = &opt.secrets;
    config.resolve_secrets(&SecretOverrides {
        rpc_secret: s.rpc_secret.clone(),
        rpc_secret_file: s.rpc_secret_file.clone(),
        admin_token: s.admin_token.clone(),
        admin_token_file: s.admin_token_file.clone(),
        metrics_token: s.metrics_token.clone(),
        metrics_token_file: s.metrics_token_file.clone(),
        sse_master_key: s.sse_master_key.clone(),
        sse_master_key_file: s.sse_master_key_file.clone(),
        allow_world_readable_secrets: s.allow_world_readable_secrets,
    })?;
    Ok((config, loaded))
}
