#!/bin/sh
# typed-client.sh DPBUDGETD - generate TypeScript types from openapi.yaml (openapi-typescript),
# compile typed_client.ts with them under tsc --strict (no casts allowed: 'as', 'any' and
# non-null assertions are refused before compiling), then run it against a fresh daemon.
# Closes with "client: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
daemon=${1:-$root/build/dpbudgetd}
bin=$here/node_modules/.bin
die() {
    echo "FAIL $*"
    echo "client: 0 passed, 1 failed"
    exit 1
}
[ -x "$bin/tsc" ] && [ -x "$bin/openapi-typescript" ] ||
    die "the TypeScript tools are not installed: run 'make deps' (npm ci in tests/contract)"
# A cast would hide a request the schema cannot express or an answer it leaves optional.
code=$(sed -e 's://.*$::' "$here/typed_client.ts")
if echo "$code" | grep -nE '\bas\b|\bany\b|[A-Za-z0-9_)\]]![.;,) ]|<[A-Z][A-Za-z]*>[ (a-z]'; then
    die "typed_client.ts holds a cast, an 'any' or a non-null assertion (above)"
fi
rm -rf "$here/gen"
mkdir -p "$here/gen"
"$bin/openapi-typescript" "$root/openapi.yaml" \
    -o "$here/gen/openapi.ts" >"$here/gen/generate.log" 2>&1 ||
    { cat "$here/gen/generate.log"; die "openapi-typescript could not read openapi.yaml"; }
(cd "$here" && "$bin/tsc" -p tsconfig.json) || die "typed_client.ts does not compile with tsc --strict"
echo "ok typed_client.ts compiles with tsc --strict against the generated types, without casts"

tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$daemon" --listen 127.0.0.1 --port 0 --port-file "$tmp/port" --data-dir "$tmp/data" \
    --threads 2 >"$tmp/log" 2>&1 &
pid=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 500 ]; do
    sleep 0.01
    i=$((i + 1))
done
[ -s "$tmp/port" ] || { cat "$tmp/log"; die "$daemon did not start"; }
DPBUDGET_URL=http://127.0.0.1:$(cat "$tmp/port") node "$here/gen/js/typed_client.js"
