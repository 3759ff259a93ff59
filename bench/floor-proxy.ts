// The memory floor of any Bun gateway holding a stream: Bun.serve plus one fetch per request, the
// supplier's body piped through untouched. Run by bench/floor.ts, never by the gateway.
const upstream = process.env.UPSTREAM_URL!

Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  idleTimeout: 120,
  async fetch(request) {
    const response = await fetch(`${upstream}/chat/completions`, {
      method: 'POST',
      headers: request.headers,
      body: await request.text(),
    })
    return new Response(response.body, {
      headers: { 'content-type': response.headers.get('content-type') ?? 'text/event-stream' },
    })
  },
})
