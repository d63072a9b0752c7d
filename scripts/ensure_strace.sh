#!/bin/sh
# Make strace available: tests/test_egress.py records every connect/sendto of an eval's whole
# process tree (Ray head, workers, kernels) with it, to prove nothing leaves the machine.
#
# Idempotent and never fatal: `make setup` calls this, and a machine where it cannot be installed
# (not root, no apt-get, no network) must still build; the egress test then skips when not root
# and fails as root (CI), saying strace is missing. Always exits 0.
#
# Environment: STRACE_INSTALL_TIMEOUT (seconds for the whole attempt, default 300).

LIMIT="${STRACE_INSTALL_TIMEOUT:-300}"

command -v strace >/dev/null 2>&1 && exit 0

echo "ensure_strace: installing Debian's strace (limit ${LIMIT}s)..." >&2
sh "$(dirname "$0")/apt_install.sh" strace "$LIMIT"
status=$?
if [ "$status" -ne 0 ]; then
    echo "ensure_strace: could not install strace (status $status); install the package by hand:" \
        "tests/test_egress.py needs it." >&2
fi
exit 0
