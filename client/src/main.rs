//! `raftlock`: the command-line client.

fn main() {
    println!("raftlock CLI");
}
