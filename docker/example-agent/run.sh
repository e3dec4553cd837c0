#!/bin/sh
# Trust the Headroom CA for this container's runtimes, then run the agent.
# SSL_CERT_FILE replaces the default roots (Python, curl, Go), so it names a bundle of the
# system roots plus the Headroom CA: hosts in NO_PROXY still verify. Node needs only
# NODE_EXTRA_CA_CERTS (set in compose.yaml), which adds to its own roots.
set -eu
CA="${HEADROOM_CA:-/headroom-ca/headroom-ca.pem}"
if [ ! -s "$CA" ]; then
    echo "example-agent: no Headroom CA at $CA (is the headroom-ca volume mounted?)" >&2
    exit 2
fi
BUNDLE="${TMPDIR:-/tmp}/ca-bundle.pem"
cat /etc/ssl/certs/ca-certificates.crt "$CA" > "$BUNDLE"
export SSL_CERT_FILE="$BUNDLE" REQUESTS_CA_BUNDLE="$BUNDLE" CURL_CA_BUNDLE="$BUNDLE"
exec python "$(dirname "$0")/agent.py" "$@"
