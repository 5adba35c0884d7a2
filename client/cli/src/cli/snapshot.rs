//! `raftlock snapshot save FILE`: a consistent backup from the leader.

use super::{connect, print_json, Cli, Output};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Args {
    /// Write a consistent backup of the lease state to FILE; seed a new
    /// cluster from it with `raftlockd restore --snapshot FILE ...`.
    Save {
        /// Where to write it (replaced atomically).
        file: PathBuf,
    },
}

pub async fn run(cli: &Cli, a: &Args) -> anyhow::Result<i32> {
    let Args::Save { file } = a;
    let backup = connect(cli).await?.backup().await?;
    // Write beside the target and rename, so a crash never leaves half a
    // backup under the real name.
    let tmp = file.with_extension("partial");
    {
        let mut f = std::fs::File::create(&tmp)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", tmp.display()))?;
        f.write_all(&backup.bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, file)?;
    if cli.output == Output::Json {
        print_json(&serde_json::json!({
            "file": file,
            "bytes": backup.bytes.len(),
            "last_index": backup.last_index,
        }))?;
    } else {
        println!(
            "wrote {} ({} bytes, index {})",
            file.display(),
            backup.bytes.len(),
            backup.last_index
        );
    }
    Ok(0)
}
