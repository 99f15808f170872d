#!/bin/sh
# deps.sh - install what building, running and testing dpbudget needs on Debian 12, only
# when something is missing. Uses sudo when not root. Quiet when all is present.
set -eu
# libgnutls28-dev, nettle-dev: the daemon's TLS policy, health probe and SHA-256 (GnuTLS and
# nettle come with libmicrohttpd anyway); openssl: the TLS tests make certificates;
# gnutls-bin: gnutls-cli, the TLS tests' client (versions and suites the policy refuses);
# python3 + PyYAML: the deployment-manifest check;
# prometheus: its promtool checks /metrics and the alert rules; chromium + nodejs + npm: the
# dashboard's browser tests (puppeteer-core from tests/browser/package-lock.json drives the
# system's chromium; no browser is downloaded). `deps.sh --build` installs only what building
# needs (the container image's build stage).
PKGS="build-essential pkg-config libmicrohttpd-dev libjansson-dev libgsl-dev libcurl4-openssl-dev libfftw3-dev libgnutls28-dev nettle-dev openssl python3 python3-yaml ca-certificates"
CMDS="cc make pkg-config od openssl python3"
if [ "${1:-}" != "--build" ]; then
    PKGS="$PKGS gnutls-bin prometheus chromium nodejs npm"
    CMDS="$CMDS gnutls-cli promtool chromium node npm"
fi
missing=0
for c in $CMDS; do
    command -v "$c" >/dev/null 2>&1 || missing=1
done
if [ "$missing" = 0 ]; then
    for m in libmicrohttpd jansson gsl libcurl fftw3 gnutls nettle; do
        pkg-config --exists "$m" 2>/dev/null || missing=1
    done
fi
if [ "$missing" = 0 ]; then
    python3 -c 'import yaml' >/dev/null 2>&1 || missing=1
fi
[ "$missing" = 0 ] && exit 0
echo "deps: installing $PKGS" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    echo "deps: missing packages and neither root nor sudo: install $PKGS" >&2
    exit 1
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS
