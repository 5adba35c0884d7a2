#!/usr/bin/env bash
# Makes a CA and certificates for a raftlock cluster with openssl.
#
#   deploy/tls/make-certs.sh OUT_DIR NAME_OR_IP...     # node certificate names
#   deploy/tls/make-certs.sh OUT_DIR --client CN       # a client certificate
#
# The first call creates OUT_DIR/ca.pem and ca-key.pem (a new CA) unless they
# exist, and writes OUT_DIR/node.pem + node-key.pem valid for every name and
# IP given (serve it on both ports, and present it to peers: it carries the
# serverAuth and clientAuth usages). `--client CN` writes OUT_DIR/CN.pem +
# CN-key.pem, signed by the same CA, whose common name is matched against the
# auth file's `cert_cn`. Keys are written 0600. Meant for development and as
# a template; production certificates come from your own CA.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
out=$1
shift
mkdir -p "$out"
umask 077

if [ ! -f "$out/ca.pem" ]; then
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$out/ca-key.pem" -out "$out/ca.pem" -days 3650 \
    -subj "/CN=raftlock CA $(date +%s)" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

sign() { # name cn san
  local name=$1 cn=$2 san=$3 ext
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$out/$name-key.pem" -out "$out/$name.csr" -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" \
    -CAcreateserial -out "$out/$name.pem" -days 825 -extfile "$ext" 2>/dev/null
  rm -f "$out/$name.csr" "$ext"
  chmod 644 "$out/$name.pem"
}

if [ "$1" = "--client" ]; then
  [ $# -eq 2 ] || { echo "usage: $0 OUT_DIR --client CN" >&2; exit 2; }
  sign "$2" "$2" ""
  echo "$out/$2.pem $out/$2-key.pem"
  exit 0
fi

san=""
for n in "$@"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then entry="IP:$n"; else entry="DNS:$n"; fi
  san="${san:+$san,}$entry"
done
sign node "raftlock-node" "$san"
chmod 644 "$out/ca.pem"
echo "$out/ca.pem $out/node.pem $out/node-key.pem"
