#!/usr/bin/env bash
# Offline checks of the deployment files: the Kubernetes manifests against
# the API schemas (kubernetes-validate from PyPI bundles them) and the
# systemd unit with systemd-analyze. Each check says so when its tool is
# unavailable, rather than pretending it passed.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0

echo "== deploy: kubernetes manifests"
if ! python3 -c "import kubernetes_validate" 2>/dev/null; then
  python3 -m pip install -q kubernetes-validate 2>/dev/null \
    || python3 -m pip install -q --break-system-packages kubernetes-validate 2>/dev/null || true
fi
if python3 -c "import kubernetes_validate" 2>/dev/null; then
  python3 -m kubernetes_validate --strict deploy/kubernetes/*.yaml || status=1
elif [ -n "${RAFTLOCK_REQUIRE_KUBERNETES_VALIDATE:-}" ]; then
  echo "kubernetes-validate is required (pip install kubernetes-validate)"
  status=1
else
  echo "kubernetes-validate unavailable (no PyPI access?): manifests NOT validated"
fi

echo "== deploy: Prometheus alert rules"
if command -v promtool >/dev/null; then
  (cd deploy/prometheus && promtool check rules raftlock-alerts.yaml && promtool test rules raftlock-alerts.test.yaml) || status=1
elif [ -n "${RAFTLOCK_REQUIRE_PROMTOOL:-}" ]; then
  echo "promtool is required (apt-get install prometheus)"
  status=1
else
  echo "promtool unavailable: alert rules NOT checked"
fi

echo "== deploy: systemd unit"
if command -v systemd-analyze >/dev/null; then
  dir="$(mktemp -d)"
  trap 'rm -rf "$dir"' EXIT
  # verify wants the executable and environment file to exist: point them
  # at the built binary and the example environment file.
  bin="$PWD/target/release/raftlockd"
  [ -x "$bin" ] || bin="$PWD/target/debug/raftlockd"
  sed -e "s|^ExecStart=.*|ExecStart=$bin|" \
      -e "s|^EnvironmentFile=.*|EnvironmentFile=$PWD/deploy/systemd/raftlockd.env|" \
      deploy/systemd/raftlockd.service > "$dir/raftlockd.service"
  if out="$(systemd-analyze verify "$dir/raftlockd.service" 2>&1)"; then
    echo "systemd-analyze verify: ok"
  else
    echo "$out"
    status=1
  fi
else
  echo "systemd-analyze unavailable: unit NOT verified"
fi
exit $status
