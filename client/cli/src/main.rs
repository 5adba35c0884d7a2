//! `raftlock`: the command-line client. One subcommand per file in `cli/`.

mod cli;

use clap::Parser;

#[tokio::main]
async fn main() {
    let args = cli::Cli::parse();
    let code = match cli::run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("raftlock: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
