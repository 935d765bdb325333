#!/usr/bin/env bash
# The Redis module part of `make demo`: starts a redis-server with the module on a free
# loopback port in a temporary directory, runs a few CF.* commands through redis-cli,
# prints CF.INFO, and stops the server (also on error or Ctrl-C).
#
# Usage: scripts/demo-redis.sh [BUILD_DIR]   (the module is BUILD_DIR/redis-cuckoofilter.so)
set -euo pipefail

build_dir=${1:-build}
module=$(cd "$build_dir" 2>/dev/null && pwd)/redis-cuckoofilter.so
if [[ ! -f $module ]]; then
    echo "demo: $build_dir/redis-cuckoofilter.so was not built (CF_BUILD_REDIS=OFF?)" >&2
    exit 1
fi
for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "demo: $tool not found (scripts/install-deps)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/cuckoo-redis-demo.XXXXXX")
server_pid=""
cleanup() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# A port that is free now: bind port 0 and ask the kernel which one it gave.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

heading() { printf '\n== %s\n' "$*"; }
cli() {
    printf '$ redis-cli %s\n' "$*"
    redis-cli -p "$port" "$@"
}

heading "The Redis module: redis-server on 127.0.0.1:$port with redis-cuckoofilter.so"
redis-server --bind 127.0.0.1 --port "$port" --dir "$work" --save '' --appendonly no \
    --logfile "$work/server.log" --loadmodule "$module" &
server_pid=$!
for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.05
done
cli MODULE LIST
cli CF.RESERVE visitors 100000
cli CF.ADD visitors alice
cli CF.INSERT visitors ITEMS bob carol dave
cli CF.EXISTS visitors alice
cli CF.MEXISTS visitors bob erin
cli CF.ADDNX visitors carol
cli CF.DEL visitors dave
cli CF.COUNT visitors dave
heading "10,000 more items through a pipe, then CF.INFO"
printf '$ seq -f "CF.ADD visitors user-%%.0f" 1 10000 | redis-cli >/dev/null\n'
seq -f 'CF.ADD visitors user-%.0f' 1 10000 | redis-cli -p "$port" >/dev/null
cli CF.INFO visitors
cli MEMORY USAGE visitors
cli INFO cuckoo
heading "Errors are replies; the server stays up"
cli CF.RESERVE visitors 100000 || true
cli CF.RESERVE other 100000 BUCKETSIZE 0 || true
cli CF.LOADCHUNK copy 1 not-a-chunk || true
cli PING
heading "Stop the server"
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "stopped; docs/COMMANDS.md documents every command"
