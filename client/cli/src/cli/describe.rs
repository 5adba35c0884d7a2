//! `raftlock describe NAME`, `raftlock sessions [PREFIX]` and
//! `raftlock force-release NAME`: who holds what, since when, who waits.

use super::{connect, print_json, Cli, Output};
use raftlock_client::{Mode, SessionInfo};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(clap::Args)]
pub struct Args {
    /// Lock name.
    name: String,
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let info = connect(cli).await?.describe(&a.name).await?;
    if cli.output == Output::Json {
        print_json(&info)?;
        return Ok(0);
    }
    let delayed = match info.lock_delay_ms {
        0 => String::new(),
        ms => format!(
            " (lock-delay of {} in force: nobody is granted it until it ends)",
            human(Duration::from_millis(ms))
        ),
    };
    if info.holders.is_empty() && info.waiters.is_empty() {
        println!("{}: free{delayed}", info.name);
        return Ok(0);
    }
    let now = now_ms();
    let taken: u64 = info.holders.iter().map(|h| u64::from(h.count)).sum();
    let how = match info.holders.first().map(|h| h.mode) {
        None => "held by nobody".to_string(),
        Some(Mode::Exclusive) => "held exclusively".to_string(),
        Some(Mode::Shared) if info.permits > 0 => format!(
            "{taken} of {} permits held{}",
            info.permits,
            if info.resized { " (resized)" } else { "" }
        ),
        Some(Mode::Shared) => format!("held shared by {}", info.holders.len()),
    };
    println!(
        "{}: {how}, {} waiting{delayed}",
        info.name,
        info.waiters.len()
    );
    for h in &info.holders {
        println!(
            "  holder   token {}  for {}{}  {}{}",
            h.token,
            age(now, h.granted_at_ms),
            terms(now, h),
            who(info.session(h.session_id), h.session_id),
            metadata(&h.metadata),
        );
    }
    for (i, w) in info.waiters.iter().enumerate() {
        println!(
            "  waiter {}  {} of {}  {}",
            i + 1,
            age(now, w.enqueued_at_ms),
            human(Duration::from_millis(w.timeout_ms)),
            who(info.session(w.session_id), w.session_id),
        );
    }
    Ok(0)
}

/// `raftlock sessions [PREFIX]`
#[derive(clap::Args)]
pub struct SessionsArgs {
    /// Only sessions whose client name starts with this.
    #[arg(default_value = "")]
    prefix: String,
}

pub async fn sessions(cli: &Cli, a: &SessionsArgs) -> anyhow::Result<i32> {
    let sessions = connect(cli).await?.sessions(&a.prefix).await?;
    if cli.output == Output::Json {
        print_json(&sessions)?;
        return Ok(0);
    }
    let now = now_ms();
    for s in &sessions {
        println!(
            "{}  age {}  holds {}  waits {}",
            who(Some(s), s.session_id),
            age(now, s.created_at_ms),
            list(&s.held),
            list(&s.waiting),
        );
    }
    if sessions.is_empty() {
        println!("no sessions");
    }
    Ok(0)
}

/// `raftlock resize NAME PERMITS`
#[derive(clap::Args)]
pub struct ResizeArgs {
    /// Semaphore name.
    name: String,
    /// Its new number of permits; 0 forgets the size set before.
    permits: u32,
}

pub async fn resize(cli: &Cli, a: &ResizeArgs) -> anyhow::Result<i32> {
    let granted = connect(cli).await?.resize(&a.name, a.permits).await?;
    if cli.output == Output::Json {
        print_json(&serde_json::json!({ "granted": granted }))?;
        return Ok(0);
    }
    match a.permits {
        0 => println!("{}: size forgotten", a.name),
        n => println!("{}: {n} permits", a.name),
    }
    for g in &granted {
        println!(
            "{}: granted to waiting session {} (token {})",
            a.name, g.session_id, g.token
        );
    }
    Ok(0)
}

/// "session 42 billing-worker (identity alice) on web-1 pid 4242, expires
/// in 9.8s": what an operator needs to find the process.
fn who(s: Option<&SessionInfo>, id: u64) -> String {
    let Some(s) = s else {
        return format!("session {id}");
    };
    let mut out = format!("session {id}");
    if !s.client_name.is_empty() {
        out += &format!(" {}", s.client_name);
    }
    if !s.identity.is_empty() {
        out += &format!(" (identity {})", s.identity);
    }
    if !s.host.is_empty() {
        out += &format!(" on {}", s.host);
    }
    if s.pid != 0 {
        out += &format!(" pid {}", s.pid);
    }
    out += &format!(
        ", expires in {} without keep-alive",
        human(Duration::from_millis(s.expires_in_ms))
    );
    out
}

/// "  3 permits, capped at 1h (59m left), lock-delay 15s": what a holder
/// asked for beyond a plain hold.
fn terms(now_ms: u64, h: &raftlock_client::Grant) -> String {
    let mut out = String::new();
    if h.count > 1 {
        out += &format!("  {} permits", h.count);
    }
    if h.max_hold_ms > 0 {
        let held = now_ms.saturating_sub(h.granted_at_ms);
        out += &format!(
            "  capped at {} ({} left)",
            human(Duration::from_millis(h.max_hold_ms)),
            human(Duration::from_millis(h.max_hold_ms.saturating_sub(held)))
        );
    }
    if h.lock_delay_ms > 0 {
        out += &format!(
            "  lock-delay {}",
            human(Duration::from_millis(h.lock_delay_ms))
        );
    }
    out
}

fn metadata(m: &[u8]) -> String {
    match std::str::from_utf8(m) {
        Ok("") => String::new(),
        Ok(text) => format!("  metadata {text:?}"),
        Err(_) => format!("  metadata {} bytes (not UTF-8)", m.len()),
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Time since `at_ms` (the leader's clock; this machine's may differ a
/// little, so a future time shows as 0s).
fn age(now_ms: u64, at_ms: u64) -> String {
    human(Duration::from_millis(now_ms.saturating_sub(at_ms)))
}

/// 950ms, 9.8s, 3m12s, 2h05m.
fn human(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// `raftlock force-release NAME`
#[derive(clap::Args)]
pub struct ForceArgs {
    /// Lock name.
    name: String,
}

pub async fn force_release(cli: &Cli, a: &ForceArgs) -> anyhow::Result<i32> {
    let (taken, granted) = connect(cli).await?.force_release(&a.name).await?;
    if cli.output == Output::Json {
        print_json(&serde_json::json!({ "released": taken, "granted": granted }))?;
        return Ok(0);
    }
    if taken.is_empty() {
        println!("{}: nobody held it", a.name);
    }
    for g in &taken {
        println!(
            "{}: taken from session {} (token {})",
            a.name, g.session_id, g.token
        );
    }
    for g in &granted {
        println!(
            "{}: granted to waiting session {} (token {})",
            a.name, g.session_id, g.token
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(human(Duration::from_millis(950)), "950ms");
        assert_eq!(human(Duration::from_millis(9_800)), "9.8s");
        assert_eq!(human(Duration::from_secs(192)), "3m12s");
        assert_eq!(human(Duration::from_secs(7_500)), "2h05m");
        assert_eq!(age(1_000, 5_000), "0ms");
    }
}
