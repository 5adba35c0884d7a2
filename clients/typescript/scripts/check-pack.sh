#!/usr/bin/env bash
# What a user of the package gets: `npm pack` (or, without npm, the same
# tarball made by tar from package.json's "files"), installed into an empty
# project, where the README's quick start, as pasted, and a typed program
# compile against its .d.ts files; the quick start then takes a lock on a
# local `raftlockd dev` cluster.
#
#   clients/typescript/scripts/check-pack.sh
#
# Needs node and tsc (Debian: nodejs, node-typescript); RAFTLOCKD is the
# server binary (default: the workspace's target/debug/raftlockd).
# NO_NPM=1 takes the tar path even where npm is installed.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
raftlockd="${RAFTLOCKD:-$root/target/debug/raftlockd}"
# shellcheck source=/dev/null
source "$root/tests/dev_cluster.sh"

cd "$here"
rm -rf dist
tsc -p .
version="$(node -p 'require("./package.json").version')"
tarball="$work/raftlock-$version.tgz"
npm=""
if [ -z "${NO_NPM:-}" ] && command -v npm >/dev/null; then npm=npm; fi
if [ -n "$npm" ]; then
  # prepack would build again; dist/ is fresh.
  npm pack --ignore-scripts --pack-destination "$work" >"$work/pack.log" 2>&1 || { cat "$work/pack.log"; exit 1; }
else
  mkdir "$work/package"
  cp package.json README.md "$work/package/"
  (cd dist && find src -name '*.js' -o -name '*.d.ts') | while read -r f; do
    mkdir -p "$work/package/dist/$(dirname "$f")"
    cp "dist/$f" "$work/package/dist/$f"
  done
  tar -czf "$tarball" -C "$work" package
fi
listing="$(tar -tzf "$tarball")"
for f in package/package.json package/README.md package/dist/src/index.js package/dist/src/index.d.ts; do
  grep -qx "$f" <<<"$listing" || { echo "$f is not in the package:"; echo "$listing"; exit 1; }
done
if grep -q "tests/\|\.ts$" <<<"$(grep -v '\.d\.ts$' <<<"$listing")"; then
  echo "the package carries tests or TypeScript sources:"; echo "$listing"; exit 1
fi

# An empty project that installs the tarball.
app="$work/app"
mkdir -p "$app"
cd "$app"
echo '{ "name": "app", "version": "1.0.0", "private": true }' >package.json
if [ -n "$npm" ]; then
  npm install --offline --no-audit --no-fund "$tarball" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
else
  mkdir -p node_modules/raftlock
  tar -xzf "$tarball" -C node_modules/raftlock --strip-components=1
fi
# The README's quick start, as a user would paste it, compiled against the
# installed package's declarations.
block "$here/README.md" ts 1 >quickstart.ts
cat >typed.ts <<'TS'
import { Client, LockGuard, LockLost, withLock } from "raftlock";
export async function settle(client: Client): Promise<bigint> {
  const session = await client.session({ ttlMs: 10_000 });
  return withLock(session, "payments/settle", async (guard: LockGuard, signal: AbortSignal) => {
    if (signal.aborted) throw new LockLost("lost", {});
    return guard.token;
  });
}
TS
# The package's own declarations, and the few Node globals they name.
cp "$here/src/node-shims.d.ts" shims.d.ts
cat >tsconfig.json <<'JSON'
{
  "compilerOptions": {
    "strict": true, "target": "ES2020", "module": "commonjs", "outDir": "out",
    "moduleResolution": "node", "lib": ["ES2020"], "types": []
  },
  "files": ["quickstart.ts", "typed.ts", "shims.d.ts"]
}
JSON
tsc -p .

start_dev_cluster
out="$(timeout 60 node out/quickstart.js)"
echo "$out"
grep -q "settling under fencing token [1-9]" <<<"$out"
echo "the packed package installs into an empty project; its README quick start compiles and runs"
