#!/bin/sh
# deps.sh [--build] - install what building, running and testing dpbudget needs on Debian 12,
# only when something is missing. Uses sudo when not root. Quiet when all is present.
#   Debian packages: the build and test libraries; libgnutls28-dev, nettle-dev (the
#   daemon's TLS policy, health probe and SHA-256; GnuTLS and nettle come with
#   libmicrohttpd anyway); libpq-dev (the PostgreSQL-backed ledger, --ledger-url: the
#   client library is linked even when the embedded ledger is used); postgresql (the
#   server binaries: the tests start a real throw-away PostgreSQL, tests/pg/pgtmp.sh, and
#   its packaged cluster is left alone); openssl (the TLS tests make certificates); gnutls-bin
#   (gnutls-cli, the TLS tests' client: versions and suites the policy refuses);
#   python3 + PyYAML (the deployment-manifest check); prometheus (its
#   promtool checks /metrics and the alert rules); chromium, nodejs and npm (the dashboard's
#   browser tests, driven by puppeteer-core from tests/browser/package-lock.json with the
#   system's chromium; and the contract checks of tests/contract: linters, response
#   validation, the typed client); clang-format (make format, format-check); curl (the
#   examples of README.md, docs/API.md and docs/PYTHON.md, run by
#   tests/readme/check_readme.py). A command
#   already present is left alone (a newer node from elsewhere is kept).
#   npm packages: `npm ci` in tests/contract when its node_modules is missing or was
#   installed from another package-lock.json (the versions pinned there; no install
#   scripts run).
#   Python packages: a venv of its own, clients/python/.venv, made by python3 -m venv and
#   filled from clients/python/requirements-dev.txt (every version pinned: flwr and
#   dp_accounting for tests/flower and tests/oracle, mypy and pytest for clients/python,
#   schemathesis for tests/generated) when it is missing
#   or was installed from another requirements-dev.txt or another python3.
# `deps.sh --build` installs only what building needs (the container image's build stage);
# `deps.sh --bench` only what `make bench` adds: wrk, the load generator of bench/floor.sh.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build_only=0
[ "${1:-}" = "--build" ] && build_only=1
PKGS=
need() { PKGS="$PKGS $*"; }

if [ "${1:-}" = "--bench" ]; then
    command -v wrk >/dev/null 2>&1 || sh "$root/scripts/apt-install.sh" deps wrk
    exit 0
fi

base=0
for c in cc make pkg-config od openssl python3; do
    command -v "$c" >/dev/null 2>&1 || base=1
done
if [ "$base" = 0 ]; then
    for m in libmicrohttpd jansson gsl libcurl fftw3 fftw3l gnutls nettle libpq; do
        pkg-config --exists "$m" 2>/dev/null || base=1
    done
fi
if [ "$base" = 0 ]; then
    python3 -c 'import yaml' >/dev/null 2>&1 || base=1
fi
[ "$base" = 0 ] || need build-essential pkg-config libmicrohttpd-dev libjansson-dev libgsl-dev \
    libcurl4-openssl-dev libfftw3-dev libgnutls28-dev nettle-dev libpq-dev openssl python3 \
    python3-yaml ca-certificates
if [ "$build_only" = 0 ]; then
    command -v gnutls-cli >/dev/null 2>&1 || need gnutls-bin
    command -v promtool >/dev/null 2>&1 || need prometheus
    command -v chromium >/dev/null 2>&1 || need chromium
    command -v node >/dev/null 2>&1 || need nodejs
    command -v npm >/dev/null 2>&1 || need npm
    command -v clang-format >/dev/null 2>&1 || need clang-format
    command -v curl >/dev/null 2>&1 || need curl
    # the PostgreSQL tests need initdb, pg_ctl and postgres (not on PATH in Debian)
    ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need postgresql
    # the Python test tools live in a venv of their own (clients/python/.venv); Debian's
    # python3 makes one only with python3-venv
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need python3-venv
fi

if [ -n "$PKGS" ]; then
    # shellcheck disable=SC2086
    sh "$root/scripts/apt-install.sh" deps $PKGS
fi
[ "$build_only" = 1 ] && exit 0

contract=$root/tests/contract
# node_modules records the hash of the lock file it was installed from: npm ci again only
# when the lock file changed (not merely its time stamp)
want=$(sha256sum <"$contract/package-lock.json" | cut -d' ' -f1)
have=$(cat "$contract/node_modules/.installed-from-lock" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
    echo "deps: npm ci in tests/contract (linters, ajv, openapi-typescript, typescript)" >&2
    (cd "$contract" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
    echo "$want" >"$contract/node_modules/.installed-from-lock"
fi

pyenv=$root/clients/python/.venv
pylock=$root/clients/python/requirements-dev.txt
# the venv records the hash of the lock file and the python it was made with
want=$( (cat "$pylock"; python3 -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1)
have=$(cat "$pyenv/.installed-from-lock" 2>/dev/null || true)
if [ "$want" != "$have" ]; then
    echo "deps: pip install in clients/python/.venv (flwr, dp_accounting, mypy, pytest, schemathesis)" >&2
    rm -rf "$pyenv"
    python3 -m venv "$pyenv"
    "$pyenv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        --only-binary=:all: -r "$pylock"
    echo "$want" >"$pyenv/.installed-from-lock"
fi
