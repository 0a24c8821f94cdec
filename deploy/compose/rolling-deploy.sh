#!/usr/bin/env bash
# A rolling deploy of the compose quick start, as Kubernetes does it with maxSurge 1 and
# maxUnavailable 0: the standby engine is replaced first by one of the new rollout (it
# stands by), then the serving one is stopped (SIGTERM: it hands the lease over to the
# new engine and drains) and replaced by a hot standby of the new rollout. No call is
# lost: docs/operations.md "What a deploy does".
#
#   deploy/compose/rolling-deploy.sh v2
set -euo pipefail
new=${1:?usage: $0 NEW_ROLLOUT_ID (e.g. v2)}
cd "$(dirname "$0")"

# docker compose (the plugin), else the older docker-compose.
if docker compose version >/dev/null 2>&1; then dc=(docker compose); else dc=(docker-compose); fi
compose() { ABI_ROLLOUT_ID="$new" "${dc[@]}" -f compose.yaml "$@"; }
port() { case $1 in engine-a) echo 8081 ;; engine-b) echo 8082 ;; esac; }
state() { curl -fsS "http://127.0.0.1:$(port "$1")/status" 2>/dev/null | grep -o '"state":"[a-z]*"' | cut -d'"' -f4 || true; }
wait_state() { # engine state seconds
  local i
  for ((i = 0; i < $3 * 2; i++)); do
    [ "$(state "$1")" = "$2" ] && return 0
    sleep 0.5
  done
  echo "rolling-deploy: $1 is not $2 after $3 s (state: $(state "$1"))" >&2
  return 1
}

if [ "$(state engine-a)" = serving ]; then
  old=engine-a standby=engine-b
elif [ "$(state engine-b)" = serving ]; then
  old=engine-b standby=engine-a
else
  echo "rolling-deploy: no engine serves; start the quick start first (docker compose up -d)" >&2
  exit 1
fi

echo "--- build the image of rollout $new"
compose build "$standby"
echo "--- $standby: replaced by an engine of rollout $new, which stands by"
compose up -d --no-deps --no-build "$standby"
wait_state "$standby" standby 60
echo "--- $old: stopped (it hands over to $standby and drains), replaced by a hot standby of $new"
compose up -d --no-deps --no-build "$old"
wait_state "$standby" serving 60
wait_state "$old" standby 60
echo "--- done: $standby serves rollout $new, $old stands by"
