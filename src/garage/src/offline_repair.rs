//! `garage offline-repair`: repairs run on this node's metadata database
//! directly, with its daemon stopped (what the daemon keeps up to date in
//! its own transactions cannot be recomputed while it runs).

use anyhow::{bail, Context};
use garage_util::data::Uuid;

use crate::args::{OfflineRepairOpt, OfflineRepairWhat, Opt};
use crate::load_config::load;

pub fn run(opt: &Opt, o: &OfflineRepairOpt) -> anyhow::Result<()> {
    if !o.yes {
        bail!(
            "offline-repair writes to this node's metadata database: stop its daemon (`garage server`), then run it again with --yes"
        );
    }
    let (config, _) = load(opt, true)?;
    // The daemon holds its RPC port: a port in use means it is running.
    if let Err(e) = std::net::TcpListener::bind(config.rpc_bind_addr) {
        bail!(
            "rpc_bind_addr {} of {} is in use ({e}): the daemon of this node seems to be running; stop it first",
            config.rpc_bind_addr,
            config.source
        );
    }
    let id = garage_net::NodeKey::read_public(&config.metadata_dir).with_context(|| {
        format!(
            "cannot read this node's id in {} (has `garage server` ever run with this configuration?)",
            config.metadata_dir.display()
        )
    })?;
    let db = crate::server::open_metadata(&config)?;
    match o.what {
        OfflineRepairWhat::ObjectCounters => {
            let (buckets, changed) =
                garage_model::object_table::recount_counters(&db, Uuid::from(id.0))
                    .context("recounting the object counters")?;
            println!(
                "{buckets} buckets recounted, {changed} counts corrected (published when the daemon starts)."
            );
        }
    }
    Ok(())
}
