#!/bin/sh
# run.sh BUILD_DIR - the dashboard tests in headless Chromium (Debian's /usr/bin/chromium,
# never a downloaded browser). Installs the pinned npm packages of package-lock.json with
# `npm ci` when node_modules is missing. Screenshots go to BUILD_DIR/browser/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
if [ ! -d "$here/node_modules/puppeteer-core" ]; then
    if ! (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts) >&2; then
        echo "browser: npm ci failed in tests/browser (is npm installed? scripts/deps.sh)"
        echo "browser: 0 passed, 1 failed"
        exit 1
    fi
fi
exec node "$here/dashboard.test.js" "$build/dpbudgetd" "$build/browser"
