#!/usr/bin/env bash
# The quick starts a newcomer pastes, run as pasted against a local
# `raftlockd dev` cluster: the CLI lines of the README's first screen, the
# first Rust block of client/README.md (built as a program of its own that
# depends on the checkout's crate) and the first Go block of
# clients/go/README.md (`go run` in a module pointing at the checkout's).
# The Python and TypeScript quick starts run from their built packages in
# clients/python/scripts/check_wheel.sh and
# clients/typescript/scripts/check-pack.sh.
#
#   cargo build --bins && tests/quickstarts.sh
#
# Needs go (Debian: golang-go). Each quick start must print a fencing token.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/debug"
raftlockd="$bin/raftlockd"
# shellcheck source=/dev/null
source "$root/tests/dev_cluster.sh"

start_dev_cluster

echo "== CLI: the README's first screen"
block "$root/README.md" sh 2 | grep '^cargo run --release --bin raftlock -- ' \
  | sed "s|^cargo run --release --bin raftlock -- |\"$bin/raftlock\" |" >"$work/cli.sh"
[ "$(wc -l <"$work/cli.sh")" -ge 2 ] || { echo "no CLI lines found in README.md"; exit 1; }
out="$(cd "$work" && timeout 60 bash -euo pipefail cli.sh 2>&1)"
echo "$out"
grep -q "token [1-9]" <<<"$out"

echo "== Rust: client/README.md"
mkdir -p "$work/rust/src"
block "$root/client/README.md" rust 1 >"$work/rust/src/main.rs"
cat >"$work/rust/Cargo.toml" <<TOML
[package]
name = "quickstart"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
raftlock-client = { path = "$root/client" }
tokio = { version = "1", features = ["full"] }

[workspace]
TOML
# The workspace's lock file: the same versions, already built in target/.
cp "$root/Cargo.lock" "$work/rust/"
out="$(cd "$work/rust" && CARGO_TARGET_DIR="$root/target" timeout 900 \
  cargo run --quiet 2>&1)"
echo "$out"
grep -q "settling under fencing token [1-9]" <<<"$out"

echo "== Go: clients/go/README.md"
mkdir -p "$work/go"
block "$root/clients/go/README.md" go 1 >"$work/go/main.go"
cat >"$work/go/go.mod" <<MOD
module quickstart

go 1.19

require github.com/raftlock/raftlock/clients/go v0.0.0

replace github.com/raftlock/raftlock/clients/go => $root/clients/go
MOD
out="$(cd "$work/go" && GOPROXY=off GOFLAGS=-mod=mod timeout 300 go run . 2>&1)"
echo "$out"
grep -q "settling under fencing token [1-9]" <<<"$out"

echo "the CLI, Rust and Go quick starts run as pasted"
