//! Which addresses the RPC layer binds to and advertises.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

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

/// Where an admin command reaches the node this configuration describes.
/// The command runs on that node's machine, so it dials `rpc_bind_addr`
/// (loopback on the RPC port when bound to all interfaces) rather than the
/// public address, which may only be reachable from outside (NAT, proxies).
pub fn local_target(config: &Config) -> SocketAddr {
    let bind = config.rpc_bind_addr;
    if bind.ip().is_unspecified() {
        let loopback = match bind.ip() {
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        SocketAddr::new(loopback, bind.port())
    } else {
        bind
    }
}
