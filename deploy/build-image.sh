#!/usr/bin/env bash
# Builds the image raftlock:dev without pulling anything: the release
# binaries and exactly the shared libraries they load (plus glibc's
# name-service modules, so host names resolve inside containers) become a
# root filesystem imported with `docker import`; deploy/Dockerfile.local then adds
# the user, volume, ports and health check on top of it.
#
# RAFTLOCK_IMAGE_PROFILE=debug builds it from the debug binaries instead
# (CI does, after its tests built them: the same code, without a second
# full build under the release profile).
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${RAFTLOCK_IMAGE_PROFILE:-release}"
case "$profile" in
  release) cargo build --release --bins -p raftlock-node -p raftlock-cli ;;
  # The whole workspace, as the tests build it: the same features, so
  # nothing is compiled again.
  debug) cargo build --workspace --bins ;;
  *) echo "RAFTLOCK_IMAGE_PROFILE is release or debug, not $profile"; exit 1 ;;
esac
bin="target/$profile"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/data" "$root/tmp"
cp "$bin/raftlockd" "$bin/raftlock" "$root/bin/"
# Both profiles keep debug info (release for profiling); the image needs none.
if command -v strip >/dev/null; then strip --strip-debug "$root/bin/raftlockd" "$root/bin/raftlock"; fi

libs() {
  # Every library a binary loads, with the dynamic loader itself.
  ldd "$1" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
}
nss_dir="$(dirname "$(ldd "$bin/raftlockd" | awk '/libc.so/ { print $3 }')")"
{
  libs "$bin/raftlockd"
  libs "$bin/raftlock"
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
