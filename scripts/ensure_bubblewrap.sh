#!/bin/sh
# Make bubblewrap (bwrap) available: every kernel that runs model code is jailed with it
# (src/tsbench/harness/runtime/jail.py).
#
# Idempotent and never fatal: `make setup` calls this, and a machine where it cannot be installed
# (not root, no apt-get, no network) must still build; `tsbench eval` then refuses kernel harnesses
# with one line saying why (or runs them without the jail under --unsafe-sandbox). Always exits 0.
#
# Environment: BUBBLEWRAP_INSTALL_TIMEOUT (seconds for the whole attempt, default 300).

LIMIT="${BUBBLEWRAP_INSTALL_TIMEOUT:-300}"

probe() {
    # The smallest jail: a new user namespace running `true` from a read-only root.
    bwrap --unshare-user --unshare-pid --unshare-net --ro-bind / / --proc /proc --dev /dev true >/dev/null 2>&1
}

if command -v bwrap >/dev/null 2>&1; then
    probe || echo "ensure_bubblewrap: bwrap is installed but cannot create a jail here" \
        "(are user namespaces enabled? sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)." >&2
    exit 0
fi

echo "ensure_bubblewrap: installing Debian's bubblewrap (limit ${LIMIT}s)..." >&2
sh "$(dirname "$0")/apt_install.sh" bubblewrap "$LIMIT"
status=$?
if [ "$status" -ne 0 ]; then
    echo "ensure_bubblewrap: could not install bubblewrap (status $status); install the package by hand:" \
        "kernel harnesses refuse to run without it, unless --unsafe-sandbox." >&2
elif ! probe; then
    echo "ensure_bubblewrap: bwrap installed but cannot create a jail here (user namespaces disabled?)." >&2
fi
exit 0
