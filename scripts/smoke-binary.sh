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

# A paid chat completion through the binary: the embedded Lua scripts admit and clear it.
key=$(grep -o 'svc_[A-Za-z0-9_-]*' "$log" | head -1)
node -e '
  const [base, key] = process.argv.slice(1)
  fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: { authorization: "Bearer " + key, "content-type": "application/json" },
    body: JSON.stringify({ model: "svc/llama-3.3-70b", messages: [{ role: "user", content: "hi" }] }),
  }).then(async (r) => {
    const cost = r.headers.get("x-svc-cost-usdc")
    if (r.status !== 200 || !/^0\.\d{6}$/.test(cost ?? "")) { console.error(r.status, await r.text()); process.exit(1) }
    console.log("binary demo cleared a chat completion, cost", cost, "USDC")
  }, (e) => { console.error(e); process.exit(1) })
' "http://127.0.0.1:$port" "$key"
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
