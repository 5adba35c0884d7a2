//! `raftlock rate NAME --rate 100/s --burst 20 [--take N] [--wait D] [-- CMD...]`:
//! take tokens of a rate limit (creating it on first use), and run a
//! command only when admitted; or describe it.

use super::{connect, print_json, Cli, Output, EXIT_NOT_ACQUIRED};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Rate limit name.
    name: String,
    /// Tokens per period, as N/s, N/m, N/h or N/DURATION (10/250ms):
    /// creates the limit on first use; an existing limit with another rate
    /// or burst is refused.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<(u64, u64)>,
    /// Most tokens available at once (default 1).
    #[arg(long, requires = "rate")]
    burst: Option<u64>,
    /// Tokens to take.
    #[arg(long, default_value_t = 1)]
    take: u64,
    /// Wait up to this long for the tokens (default: answer at once).
    #[arg(long, value_parser = humantime::parse_duration)]
    wait: Option<Duration>,
    /// Print the limit's parameters, tokens available and totals instead.
    #[arg(long, conflicts_with_all = ["take", "wait", "command"])]
    describe: bool,
    /// Run this command only when admitted (exit status 75 otherwise).
    #[arg(last = true)]
    command: Vec<String>,
}

/// "100/s" → (100, 1000): tokens and the period in ms.
fn parse_rate(s: &str) -> Result<(u64, u64), String> {
    let (n, per) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not N/PERIOD (100/s, 5/m, 10/250ms)"))?;
    let n: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("{n:?} is not a number of tokens"))?;
    let per_ms = match per.trim() {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        d => humantime::parse_duration(d)
            .map_err(|e| format!("period {d:?}: {e}"))?
            .as_millis() as u64,
    };
    if n == 0 || per_ms == 0 {
        return Err(format!("{s:?}: the rate and its period must be positive"));
    }
    Ok((n, per_ms))
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let client = connect(cli).await?;
    let mut limit = client.rate_limit(&a.name);
    if let Some((n, per_ms)) = a.rate {
        limit = limit
            .rate(n, Duration::from_millis(per_ms))
            .burst(a.burst.unwrap_or(1));
    }
    if a.describe {
        let info = limit.describe().await?;
        if cli.output == Output::Json {
            print_json(&info)?;
        } else {
            println!(
                "{}: {} per {}ms, burst {}; {} available now; admitted {}, refused {}, {} token lease(s) out",
                info.name,
                info.rate,
                info.per_ms,
                info.burst,
                info.available,
                info.admitted,
                info.refused,
                info.leases
            );
        }
        return Ok(0);
    }
    let admission = match a.wait {
        Some(w) => limit.take(a.take, w).await?,
        None => limit.try_take(a.take).await?,
    };
    if cli.output == Output::Json && a.command.is_empty() {
        print_json(&admission)?;
    }
    if !admission.admitted {
        eprintln!(
            "raftlock: {} not admitted; {} token(s) would fit in {:?}",
            a.name, a.take, admission.retry_after
        );
        return Ok(EXIT_NOT_ACQUIRED);
    }
    if a.command.is_empty() {
        if cli.output != Output::Json {
            println!(
                "{}: {} admitted, {} left",
                a.name, admission.n, admission.remaining
            );
        }
        return Ok(0);
    }
    let status = tokio::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .status()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run {:?}: {e}", a.command[0]))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(parse_rate("100/s"), Ok((100, 1_000)));
        assert_eq!(parse_rate("5/m"), Ok((5, 60_000)));
        assert_eq!(parse_rate("10/250ms"), Ok((10, 250)));
        assert!(parse_rate("0/s").is_err());
        assert!(parse_rate("-1/s").is_err());
        assert!(parse_rate("10").is_err());
        assert!(parse_rate("10/fortnight").is_err());
    }
}
