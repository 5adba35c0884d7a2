//! The loopback `/24` this harness's nodes and client processes bind in
//! host mode (`--loopback-net`): two harnesses on one host use two, since
//! partitions are iptables rules on these addresses.

/// The net set for this process, if any.
static LOOPBACK_NET: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the loopback net for this process, once, before any cluster starts.
pub fn set_loopback_net(net: &str) -> anyhow::Result<()> {
    let octets: Vec<&str> = net.split('.').collect();
    let valid = octets.len() == 3
        && octets[0] == "127"
        && octets[1..].iter().all(|o| o.parse::<u8>().is_ok());
    if !valid {
        anyhow::bail!(
            "--loopback-net must be three octets in 127.0.0.0/8, such as 127.0.1; got {net:?}"
        );
    }
    LOOPBACK_NET
        .set(net.to_owned())
        .map_err(|_| anyhow::anyhow!("the loopback net is already set"))
}

/// The loopback net in use (`127.0.0` unless set).
pub fn loopback_net() -> &'static str {
    LOOPBACK_NET.get().map(String::as_str).unwrap_or("127.0.0")
}
