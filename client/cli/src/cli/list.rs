//! `raftlock list [PREFIX]`

use super::{connect, print_json, Cli, Output};

#[derive(clap::Args)]
pub struct Args {
    /// Only locks whose names start with this.
    #[arg(default_value = "")]
    prefix: String,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let locks = connect(cli).await?.list(&a.prefix).await?;
    if cli.output == Output::Json {
        print_json(&locks)?;
        return Ok(0);
    }
    for l in &locks {
        // Who holds it, at a glance: client name, host and pid.
        let holders: Vec<String> = l
            .holders
            .iter()
            .map(|h| {
                let who = l
                    .session(h.session_id)
                    .map(|s| {
                        let mut w = if s.client_name.is_empty() {
                            format!("session {}", h.session_id)
                        } else {
                            s.client_name.clone()
                        };
                        if !s.host.is_empty() {
                            w += &format!("@{}", s.host);
                        }
                        if s.pid != 0 {
                            w += &format!(":{}", s.pid);
                        }
                        w
                    })
                    .unwrap_or_else(|| format!("session {}", h.session_id));
                format!("{who} (token {})", h.token)
            })
            .collect();
        let delayed = match l.lock_delay_ms {
            0 => String::new(),
            ms => format!("  lock-delay {ms}ms"),
        };
        println!(
            "{}  held by {}  waiters {}{delayed}",
            l.name,
            if holders.is_empty() {
                "nobody".to_string()
            } else {
                holders.join(", ")
            },
            l.waiter_count
        );
    }
    Ok(0)
}
