#!/bin/sh
# fuzz-deps.sh [CC] - install what `make fuzz` needs on Debian 12 (clang with the libFuzzer,
# ASan and UBSan runtimes, and llvm-symbolizer for readable stacks), only when something is
# missing: CC (default clang) must link a -fsanitize=fuzzer,address,undefined program.
# Uses sudo when not root (scripts/apt-install.sh). Quiet when all is present.
set -eu
CC=${1:-clang}
PKGS="clang libclang-rt-dev llvm"
works() {
    command -v "$CC" >/dev/null 2>&1 || return 1
    command -v llvm-symbolizer >/dev/null 2>&1 || return 1
    d=$(mktemp -d) || return 1
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        >"$d/t.c"
    rc=0
    "$CC" -fsanitize=fuzzer,address,undefined -o "$d/t" "$d/t.c" >/dev/null 2>&1 || rc=1
    rm -rf "$d"
    return $rc
}
works && exit 0
# shellcheck disable=SC2086
sh "$(dirname "$0")/apt-install.sh" fuzz-deps $PKGS
if ! works; then
    echo "fuzz-deps: $CC still cannot link a libFuzzer target (-fsanitize=fuzzer)" >&2
    exit 1
fi
