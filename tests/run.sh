#!/bin/sh
# run.sh BUILD_DIR - run every test binary of a build and the contract checks (node: make
# deps installs them), then print one closing line
# "tests: N passed, M failed" summing the suites' own closing lines. Exit 1 on any failure.
set -u
build=${1:-build}
total_pass=0
total_fail=0
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# count NAME RC FILE: print a suite's output and add its closing line to the totals
count() {
    name=$1
    rc=$2
    cat "$3"
    line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed$' "$3" | tail -n 1)
    if [ -z "$line" ]; then
        echo "$name: no closing line (exit $rc)"
        total_fail=$((total_fail + 1))
        status=1
        return
    fi
    p=$(echo "$line" | sed -E 's/^[a-z]+: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    [ "$rc" -eq 0 ] || status=1
}
run() {
    name=$1
    shift
    echo "== $name: $*"
    "$@" >"$out"
    count "$name" $? "$out"
}
# the daemons the suites start stop at once on SIGTERM (--shutdown-grace 0: no load balancer
# to drain; the suite that tests the grace sets its own)
DPBUDGET_SHUTDOWN_GRACE=0
export DPBUDGET_SHUTDOWN_GRACE
# the unit binary (the longest suite, one core) runs beside the others, which mostly wait
# on daemons; its output is printed and counted at the end
unit_out=$(mktemp)
trap 'rm -f "$out" "$unit_out"' EXIT
echo "== unit: $build/tests/unit_tests (beside the other suites; its output follows at the end)"
"$build/tests/unit_tests" >"$unit_out" 2>&1 &
unit_pid=$!
# the PostgreSQL store against a real server started (and stopped) by pgtmp.sh
run pg sh tests/pg/pgtmp.sh with "$build/tests/pg_tests"
# the API and persistence suites log every exchange; the contract check validates them all
# against openapi.yaml (tests/contract/validate.mjs)
mkdir -p "$build/contract"
DPB_CONTRACT_LOG=$(cd "$build/contract" && pwd)/exchanges.jsonl
export DPB_CONTRACT_LOG
: >"$DPB_CONTRACT_LOG"
run api "$build/tests/api_tests" "$build/dpbudgetd"
run persist "$build/tests/persist_tests" "$build/dpbudgetd"
# the ledger's API suites again, the ledger in a PostgreSQL of their own (tests/pg/pgtmp.sh)
run apipg env DPB_API_PG=1 sh tests/pg/pgtmp.sh with "$build/tests/api_tests" "$build/dpbudgetd"
# three replicas on one PostgreSQL: overspend, SIGKILL, outage, migrations, copy-ledger
run replicas python3 tests/replicas/test_replicas.py "$build/dpbudgetd"
# the log's Merkle tree from outside: every size's proofs verified with RFC 9162 in Python
run tlog python3 tests/transparency/check_tlog.py "$build/dpbudgetd"
unset DPB_CONTRACT_LOG
run contract node tests/contract/validate.mjs openapi.yaml "$build/contract/exchanges.jsonl"
run lint sh tests/contract/lint.sh
run client sh tests/contract/typed-client.sh "$build/dpbudgetd"
run deploy python3 tests/deploy/check_deploy.py "$build/dpbudgetd"
run monitoring python3 tests/monitoring/check_monitoring.py "$build/dpbudgetd"
run browser sh tests/browser/run.sh "$build"
# the Python package (pytest, mypy --strict, the wheel) and Flower end to end, in the venv of
# scripts/deps.sh (clients/python/requirements-dev.txt)
pyenv=clients/python/.venv/bin/python
run sdk "$pyenv" clients/python/tests/run_tests.py "$build/dpbudgetd"
run flower "$pyenv" tests/flower/test_flower.py "$build/dpbudgetd"
run readme python3 tests/readme/check_readme.py "$build/dpbudgetd"
run docs python3 tests/docs/check_refs.py --daemon "$build/dpbudgetd"
# contract tests generated from openapi.yaml (Schemathesis) against daemons with and without
# keys; dp_accounting as a live oracle (both pinned in clients/python/requirements-dev.txt, in clients/python/.venv)
run generated clients/python/.venv/bin/python tests/generated/run.py clients/python/.venv/bin/python "$build/dpbudgetd"
run oracle clients/python/.venv/bin/python tests/oracle/dp_accounting_diff.py "$build/dpbudgetd"
run fuzzrequest "$build/tests/fuzz_regress_request" tests/fuzz/corpus/request tests/fuzz/crashes
run fuzzwal "$build/tests/fuzz_regress_wal" tests/fuzz/corpus/wal tests/fuzz/crashes
wait "$unit_pid"
unit_rc=$?
echo "== unit: $build/tests/unit_tests"
count unit "$unit_rc" "$unit_out"
echo "tests: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] || status=1
exit $status
