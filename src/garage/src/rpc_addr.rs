//! Which addresses the RPC layer binds to and advertises.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, Context};
use garage_util::config::Config;

/// The address other nodes should use to reach this one: `rpc_public_addr`
/// (a host name is resolved), else `rpc_bind_addr` when it is a specific
/// address. `None` when neither tells (bound to all interfaces, no public
/// address set).
pub fn public_addr(config: &Config) -> anyhow::Result<Option<SocketAddr>> {
    if let Some(a) = &config.rpc_public_addr {
        let addr = a
            .to_socket_addrs()
            .with_context(|| format!("rpc_public_addr {a:?} in {}", config.source))?
            .next()
            .ok_or_else(|| {
                anyhow!(
                    "rpc_public_addr {a:?} in {} resolves to no address",
                    config.source
                )
            })?;
        return Ok(Some(addr));
    }
    if config.rpc_bind_addr.ip().is_unspecified() {
        Ok(None)
    } else {
        Ok(Some(config.rpc_bind_addr))
    }
}

/// Where an admin command reaches the node this configuration describes:
/// its public address, else loopback on the RPC port.
pub fn local_target(config: &Config) -> anyhow::Result<SocketAddr> {
    Ok(match public_addr(config)? {
        Some(a) => a,
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), config.rpc_bind_addr.port()),
    })
}
