#!/bin/sh
# apt-install.sh WHO PKG... - install Debian packages non-interactively, as root or through
# sudo; WHO names the caller in messages. Used by deps.sh and fuzz-deps.sh.
set -eu
who=$1
shift
echo "$who: installing $*" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO=sudo
else
    echo "$who: missing packages and neither root nor sudo: install $*" >&2
    exit 1
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
