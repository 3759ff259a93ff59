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

# A stream the supplier cuts off without usage: billed on the tokenizer's count, which the binary
# makes in its embedded worker (a second entry point of the build).
sim=$(grep -o 'simulated supplier http://[0-9.:]*' "$log" | awk '{print $3}')
node -e '
  const [base, key, sim] = process.argv.slice(1)
  ;(async () => {
    const set = await fetch(sim + "/sim/keys/*", { method: "PUT", body: JSON.stringify({ fault: "truncate", times: 1 }) })
    if (set.status !== 200) throw new Error("sim fault: " + set.status)
    const r = await fetch(base + "/v1/chat/completions", {
      method: "POST",
      headers: { authorization: "Bearer " + key, "content-type": "application/json" },
      body: JSON.stringify({ model: "svc/llama-3.3-70b", messages: [{ role: "user", content: "hi" }], stream: true }),
    })
    const frames = (await r.text()).split("\n\n").filter((f) => f.startsWith("data: ")).map((f) => f.slice(6))
    const cost = frames.map((f) => { try { return JSON.parse(f) } catch { return null } }).find((f) => f && f.object === "svc.cost")
    const last = frames.at(-1) ?? ""
    if (r.status !== 200 || !cost || !/^0\.\d{6}$/.test(cost.costUsdc) || cost.costUsdc === "0.000000" || !last.includes("stream_incomplete")) {
      throw new Error(r.status + " " + frames.join(" | "))
    }
    console.log("binary demo billed a cut-off stream on its own token count, cost", cost.costUsdc, "USDC")
  })().catch((e) => { console.error(e); process.exit(1) })
' "http://127.0.0.1:$port" "$key" "$sim"
# The pages are bundled into the binary: each page and every file it links is served by it.
node -e '
  const base = process.argv[1]
  ;(async () => {
    for (const path of ["/dashboard", "/supplier", "/admin"]) {
      const r = await fetch(base + path)
      const html = await r.text()
      if (r.status !== 200 || !(r.headers.get("content-security-policy") ?? "").includes("script-src \x27self\x27")) throw new Error(path + " " + r.status)
      const files = [...html.matchAll(/(?:src|href)="(\/pages\/assets\/[^"]+)"/g)].map((m) => m[1])
      if (files.length < 2) throw new Error(path + ": no bundled files linked")
      for (const file of files) {
        const a = await fetch(base + file)
        if (a.status !== 200 || (await a.arrayBuffer()).byteLength === 0) throw new Error(file + " " + a.status)
      }
    }
    console.log("binary demo served /dashboard, /supplier and /admin with their bundled files")
  })().catch((e) => { console.error(e); process.exit(1) })
' "http://127.0.0.1:$port"
# The OpenAPI generator and the MCP SDK load with their first request (dynamic imports): the
# binary carries them.
node -e '
  const [base, key] = process.argv.slice(1)
  ;(async () => {
    const doc = await fetch(base + "/openapi.json")
    if (doc.status !== 200 || !(await doc.json()).paths?.["/v1/chat/completions"]) throw new Error("/openapi.json " + doc.status)
    const mcp = await fetch(base + "/mcp", {
      method: "POST",
      headers: { authorization: "Bearer " + key, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    const tools = (await mcp.json())?.result?.tools ?? []
    if (mcp.status !== 200 || tools.length === 0) throw new Error("/mcp " + mcp.status)
    console.log("binary demo served /openapi.json and listed", tools.length, "MCP tools")
  })().catch((e) => { console.error(e); process.exit(1) })
' "http://127.0.0.1:$port" "$key"
kill -TERM "$pid"
wait "$pid" 2>/dev/null || true
