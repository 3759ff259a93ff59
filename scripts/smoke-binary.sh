#!/usr/bin/env bash
# Smoke test of the compiled binary: --version, then `demo` answering GET /v1/models.
set -euo pipefail
bin="${1:-dist/svc-gateway}"
version=$("$bin" --version)
echo "binary version: $version"
[ "$version" = "$(node -p 'require("./package.json").version')" ]

port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
log=$(mktemp)
PORT="$port" "$bin" demo >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  if node -e 'fetch(process.argv[1]).then(async r=>{if(!r.ok)process.exit(1);require("fs").writeFileSync(process.argv[2],await r.text())},()=>process.exit(1))' \
    "http://127.0.0.1:$port/v1/models" /tmp/svc-smoke-models.json 2>/dev/null; then break; fi
  sleep 0.1
done
grep -q '"object":"list"' /tmp/svc-smoke-models.json
grep -q '"llama-3.3-70b"' /tmp/svc-smoke-models.json
echo "binary demo answered GET /v1/models"
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
