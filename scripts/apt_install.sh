#!/bin/sh
# apt_install.sh PACKAGE SECONDS: install one Debian package as root within a time limit.
# Exit status 0 when installed; 3 when it cannot be tried here (not root, no apt-get), with the
# reason on stderr; otherwise apt's (or timeout's) status. The ensure_* scripts decide what it means.
PACKAGE="$1"
LIMIT="${2:-300}"

if [ "$(id -u)" != "0" ]; then
    echo "not root" >&2
    exit 3
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get" >&2
    exit 3
fi
if command -v timeout >/dev/null 2>&1; then
    RUN="timeout $LIMIT"
else
    RUN=""
fi
export DEBIAN_FRONTEND=noninteractive
# Try the existing package lists first; refresh them only when that fails (stale or empty lists).
$RUN sh -c "
    apt-get install -y -q --no-install-recommends $PACKAGE >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends $PACKAGE >/dev/null 2>&1; }
"
