#!/bin/sh
# lint.sh - openapi.yaml through Redocly CLI (recommended rules, redocly.yaml) and Spectral
# (spectral:oas, .spectral.yaml), the versions pinned by package-lock.json here. Each must
# report no error and no warning. Closes with "lint: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$here/node_modules/.bin
pass=0
fail=0
if [ ! -x "$bin/redocly" ] || [ ! -x "$bin/spectral" ]; then
    echo "lint: the linters are not installed: run 'make deps' (npm ci in tests/contract)"
    echo "lint: 0 passed, 1 failed"
    exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# no telemetry or update check (and no network wait)
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
if (cd "$root" && "$bin/redocly" lint --config redocly.yaml --format stylish openapi.yaml) >"$out" 2>&1 &&
    ! grep -qiE '(warning|error)' "$out"; then
    echo "ok redocly lint: 0 errors, 0 warnings"
    pass=$((pass + 1))
else
    grep -vE '^\s*$|[╔║╚]' "$out"
    echo "FAIL redocly lint (openapi.yaml, redocly.yaml)"
    fail=$((fail + 1))
fi
if (cd "$root" && "$bin/spectral" lint --ruleset .spectral.yaml --fail-severity hint openapi.yaml) \
    >"$out" 2>&1; then
    echo "ok spectral lint (spectral:oas): 0 errors, 0 warnings"
    pass=$((pass + 1))
else
    cat "$out"
    echo "FAIL spectral lint (openapi.yaml, .spectral.yaml)"
    fail=$((fail + 1))
fi
echo "lint: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
