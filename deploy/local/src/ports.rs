//! Ports for the nodes of a local cluster.

use crate::{io, Error};
use rand::Rng;
use std::net::TcpListener;

/// A port free on `host` now (another socket may still take it before a
/// node binds it: see [`crate::Options::attempts`]).
///
/// Picked below the kernel's ephemeral range where there is room: the
/// kernel hands out ports of that range to every outgoing connection and
/// every bind to port 0, so a port picked there and bound seconds later (a
/// member started after the others) can be taken by any of them meanwhile.
/// Below it, only another explicit pick can take it.
pub fn free_port(host: &str) -> Result<u16, Error> {
    const FLOOR: u16 = 10_000;
    let low = ephemeral_low().unwrap_or(32_768);
    if low > FLOOR + 1_000 {
        for _ in 0..64 {
            let port = rand::thread_rng().gen_range(FLOOR..low);
            if TcpListener::bind((host, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    TcpListener::bind((host, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io(format!(
            "cannot bind {host} (for 127.0.0.x, is 127.0.0.0/8 routed to lo?)"
        )))
}

/// The lowest port of the kernel's ephemeral range, where Linux says.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}
