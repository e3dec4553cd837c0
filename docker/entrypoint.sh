#!/bin/sh
# Headroom sidecar entrypoint.
#   headroom-entrypoint [headroom proxy options…]   create the CA if needed, publish its public
#                                                  certificate, run the proxy (PID 1)
#   headroom-entrypoint healthcheck                 exit 0 when the proxy answers /health, ready
# Environment (defaults for the image):
#   HEADROOM_HOME=/data            database, caches, the CA (private key: stays here)
#   HEADROOM_CONFDIR=$HEADROOM_HOME/mitmproxy
#   HEADROOM_CA_EXPORT=/ca         where headroom-ca.pem (public certificate only) is copied; "" = nowhere
#   HEADROOM_LISTEN_HOST=0.0.0.0   HEADROOM_LISTEN_PORT=8080
#   HEADROOM_DB_URL, HEADROOM_*    any setting (see config.example.toml)
set -eu

HEADROOM_HOME="${HEADROOM_HOME:-/data}"
CONFDIR="${HEADROOM_CONFDIR:-$HEADROOM_HOME/mitmproxy}"
CA_EXPORT="${HEADROOM_CA_EXPORT-/ca}"
HOST="${HEADROOM_LISTEN_HOST:-0.0.0.0}"
PORT="${HEADROOM_LISTEN_PORT:-8080}"
PYTHON="${HEADROOM_PYTHON:-python}"
export HEADROOM_HOME
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"

if [ "${1:-}" = "healthcheck" ]; then
    exec "$PYTHON" - "$PORT" <<'PY'
import json, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{sys.argv[1]}"}))
try:
    with opener.open("http://headroom.localhost/health", timeout=4) as r:
        state = json.load(r)
except Exception as e:
    sys.exit(f"unhealthy: {e}")
sys.exit(0 if state.get("ok") and state.get("ready") else f"unhealthy: {state}")
PY
fi

# Everything Headroom writes is private to its user; the CA key above all.
umask 077
mkdir -p "$HEADROOM_HOME" "$CONFDIR"
chmod 700 "$CONFDIR"

# The CA, made by mitmproxy's own code (same files, same 2048-bit key as its first start).
"$PYTHON" -c 'import sys; from mitmproxy.certs import CertStore; CertStore.from_store(sys.argv[1], "mitmproxy", 2048)' "$CONFDIR"

# Publish the public certificate only: other containers mount this read-only and trust it.
if [ -n "$CA_EXPORT" ]; then
    mkdir -p "$CA_EXPORT"
    chmod 755 "$CA_EXPORT" 2>/dev/null || true
    cp "$CONFDIR/mitmproxy-ca-cert.pem" "$CA_EXPORT/headroom-ca.pem.tmp"
    chmod 644 "$CA_EXPORT/headroom-ca.pem.tmp"
    mv "$CA_EXPORT/headroom-ca.pem.tmp" "$CA_EXPORT/headroom-ca.pem"
fi

exec "${HEADROOM_BIN:-headroom}" proxy --listen-host "$HOST" --port "$PORT" --confdir "$CONFDIR" "$@"
