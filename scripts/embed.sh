#!/bin/sh
# embed.sh FILE SYMBOL: print a C source defining `const unsigned char SYMBOL[]` with the
# bytes of FILE and `const unsigned long SYMBOL_len`. Uses only POSIX od and sed.
set -eu
file=$1
sym=$2
printf '/* generated from %s by scripts/embed.sh; do not edit */\n' "$file"
printf 'const unsigned char %s[] = {\n' "$sym"
od -An -v -tx1 "$file" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e '/^$/d'
printf '0x00};\nconst unsigned long %s_len = sizeof %s - 1;\n' "$sym" "$sym"
