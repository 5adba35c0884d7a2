#!/usr/bin/env bash
# Builds the image raftlock:dev without pulling anything: the release
# binaries and exactly the shared libraries they load (plus glibc's
# name-service modules, so host names resolve inside containers) become a
# root filesystem imported with `docker import`; deploy/Dockerfile.local then adds
# the user, volume, ports and health check on top of it.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --bins -p raftlock-node -p raftlock-cli
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/data" "$root/tmp"
cp target/release/raftlockd target/release/raftlock "$root/bin/"
# The release profile keeps debug info for profiling; the image needs none.
if command -v strip >/dev/null; then strip --strip-debug "$root/bin/raftlockd" "$root/bin/raftlock"; fi

libs() {
  # Every library a binary loads, with the dynamic loader itself.
  ldd "$1" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
}
nss_dir="$(dirname "$(ldd target/release/raftlockd | awk '/libc.so/ { print $3 }')")"
{
  libs target/release/raftlockd
  libs target/release/raftlock
  for nss in libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
    [ -e "$nss_dir/$nss" ] && echo "$nss_dir/$nss"
  done
} | sort -u | while read -r lib; do
  cp --parents -L "$lib" "$root/"
done

# A user that owns nothing but /data; no shell exists in the image.
cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/:/bin/false
raftlock:x:10001:10001:raftlock:/data:/bin/false
PASSWD
cat > "$root/etc/group" <<'GROUP'
root:x:0:
raftlock:x:10001:
GROUP
echo "hosts: files dns" > "$root/etc/nsswitch.conf"
chmod 1777 "$root/tmp"

# Everything owned by root except /data, which belongs to the raftlock user.
tar --numeric-owner --owner=0 --group=0 -C "$root" --exclude=./data -cf "$root.tar" .
tar --numeric-owner --owner=10001 --group=10001 -C "$root" -rf "$root.tar" ./data
docker import "$root.tar" raftlock-rootfs:dev >/dev/null
rm -f "$root.tar"
docker build -q -t raftlock:dev -f deploy/Dockerfile.local deploy >/dev/null
echo "built raftlock:dev ($(docker image inspect raftlock:dev --format '{{.Size}}') bytes)"
