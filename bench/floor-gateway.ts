// The latency floor of a prepaid gateway (bench only, never the product): Bun.serve, the key
// authenticated by its digest, the body parsed, one Redis round trip to hold (bench/floor-lua
// admit.lua), the supplier called with Bun's fetch, its usage read, one round trip to clear, the
// supplier's answer sent. No validation beyond that, no caps, records, metrics or logs: what any
// gateway that holds money in Redis per request must spend, for the gateway's figures to be read
// against. Buffered and streamed; a stream is cleared when its last byte has passed.
//   PORT=... UPSTREAM_URL=... REDIS_URL=... FLOOR_BASE=... bun bench/floor-gateway.ts
import { createHash } from 'node:crypto'
import { RedisClient } from 'bun'
import floorAdmit from './floor-lua/admit.lua' with { type: 'text' }
import floorClear from './floor-lua/clear.lua' with { type: 'text' }

const upstream = `${process.env.UPSTREAM_URL!}/chat/completions`
const upstreamKey = process.env.FLOOR_UPSTREAM_KEY ?? 'bench-supplier'
const base = process.env.FLOOR_BASE ?? 'bench:{floor}:'
const redis = new RedisClient(process.env.REDIS_URL!)
const sha = async (lua: string) => String(await redis.send('SCRIPT', ['LOAD', lua]))
const admitSha = await sha(floorAdmit)
const clearSha = await sha(floorClear)
let sequence = 0

/** The account a presented key names: the digest of the key, as the gateway looks keys up. */
const floorAccount = (apiKey: string) => createHash('sha256').update(apiKey).digest('hex')

const refuse = (status: number, message: string) =>
  Response.json({ error: { message, type: 'invalid_request_error' } }, { status })

/** Whole usage off a buffered answer, or 0 when it has none. */
function burnOf(text: string): number {
  try {
    const usage = (JSON.parse(text) as { usage?: { total_tokens?: number } }).usage
    return usage?.total_tokens ?? 0
  } catch {
    return 0
  }
}

Bun.serve({
  port: Number(process.env.PORT),
  hostname: '127.0.0.1',
  idleTimeout: 120,
  async fetch(request) {
    const auth = request.headers.get('authorization') ?? ''
    if (!auth.startsWith('Bearer svc_')) return refuse(401, 'missing key')
    const account = floorAccount(auth.slice(7))
    const text = await request.text()
    let body: { model?: unknown; stream?: unknown; max_tokens?: unknown }
    try {
      body = JSON.parse(text)
    } catch {
      return refuse(400, 'body is not JSON')
    }
    if (typeof body.model !== 'string') return refuse(400, 'model is required')
    const attemptId = `f${process.pid}.${++sequence}`
    const holdDiem = 100 + Number(body.max_tokens ?? 1000)
    // An unknown key has no balance to compare: the script errors, and that is a 401.
    const admitted = await redis
      .send('EVALSHA', [admitSha, '1', base, attemptId, account, String(holdDiem)])
      .catch(() => null)
    if (admitted === null) return refuse(401, 'unknown key')
    if (admitted !== 1) return refuse(402, 'insufficient balance')
    const answer = await fetch(upstream, {
      method: 'POST',
      headers: { authorization: `Bearer ${upstreamKey}`, 'content-type': 'application/json' },
      body: text,
    })
    if (body.stream !== true) {
      const out = await answer.text()
      await redis.send('EVALSHA', [clearSha, '1', base, attemptId, String(burnOf(out))])
      return new Response(out, { status: answer.status, headers: { 'content-type': 'application/json' } })
    }
    // Streamed: relayed as it comes; cleared at the end at the hold (the floor parses no frames).
    const clear = () => redis.send('EVALSHA', [clearSha, '1', base, attemptId, String(holdDiem)])
    const relay = new TransformStream<Uint8Array, Uint8Array>({ flush: () => clear().then(() => {}) })
    return new Response(answer.body!.pipeThrough(relay), {
      status: answer.status,
      headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
    })
  },
})
