#!/bin/sh
# pld_sweep.sh BUILD_DIR - the PLD regime sweep (bench_pld_sweep), timed side by side with
# Google's dp_accounting when DP_ACCOUNTING_PATH names a checkout's python/dp_accounting
# directory (it is never part of this repository). The Python side needs numpy, scipy, attr,
# mpmath and absl (Debian: python3-numpy python3-scipy python3-attr python3-mpmath
# python3-absl); $PYTHON, or the first of python3 and /usr/bin/python3 that imports them,
# runs it. Without a checkout the sweep times our side only and says so.
set -u
BUILD=${1:-build}
echo
echo "== core: PLD regime sweep (bench_pld_sweep)"
if [ -n "${DP_ACCOUNTING_PATH:-}" ]; then
    if [ ! -d "$DP_ACCOUNTING_PATH/dp_accounting" ]; then
        echo "   DP_ACCOUNTING_PATH=$DP_ACCOUNTING_PATH has no dp_accounting package: skipping the comparison"
        unset DP_ACCOUNTING_PATH
    elif [ -z "${PYTHON:-}" ]; then
        for py in python3 /usr/bin/python3; do
            if "$py" -c 'import numpy, scipy, attr, mpmath, absl' 2>/dev/null; then
                PYTHON=$py
                export PYTHON
                break
            fi
        done
        if [ -z "${PYTHON:-}" ]; then
            echo "   no python3 with numpy, scipy, attr, mpmath and absl: skipping the comparison"
            unset DP_ACCOUNTING_PATH
        fi
    fi
fi
[ -n "${DP_ACCOUNTING_PATH:-}" ] && export DP_ACCOUNTING_PATH
exec "$BUILD/bench/bench_pld_sweep"
