// (c) One client opens 500 streams, waits until every one is flowing, then drops all of them at
// once. The gateway notices each disconnect by itself (the lease is long, so no reaper can hide a
// leak): every slot and hold comes back, the upstream streams are cancelled, the audit is clean.
import { afterAll, expect, test } from 'bun:test'
import type { Socket } from 'bun'
import { keyspace } from '../src/redis/keys.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { testRedisUrl } from '../test/helpers/stack.ts'
import { type Cluster, fundedBuyer, MODEL, runAudit, settled, simOffer, startCluster } from './cluster.ts'

const STREAMS = 500
// Slow tokens: each stream would run for a minute if nobody dropped it.
const sim = startSim({ port: 0, tokensPerSecond: 2, outputTokens: 120 })
const store = createStore(testRedisUrl(), { name: 'chaos-c' })
let cluster: Cluster | undefined
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  store.close()
})

/**
 * A raw HTTP/1.1 stream request on its own socket (no client connection pool to queue behind);
 * resolves with the socket once the first SSE bytes arrive.
 */
function openStream(url: URL, apiKey: string): Promise<Socket> {
  const body = JSON.stringify({
    model: MODEL,
    stream: true,
    max_tokens: 120,
    messages: [{ role: 'user', content: 'hi' }],
  })
  return new Promise((resolve, reject) => {
    let seen = ''
    Bun.connect({
      hostname: url.hostname,
      port: Number(url.port),
      socket: {
        open(socket) {
          socket.write(
            `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${apiKey}\r\n` +
              `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          )
        },
        data(socket, data) {
          seen += data.toString()
          if (!seen.startsWith('HTTP/1.1 200')) reject(new Error(seen.slice(0, 600)))
          else if (seen.includes('data: ')) resolve(socket)
        },
        error(_socket, error) {
          reject(error)
        },
      },
    }).catch(reject)
  })
}

test('500 streams dropped at once: no leaked slot or hold', async () => {
  const started = Date.now()
  cluster = await startCluster({
    redisUrl: testRedisUrl(),
    sim,
    replicas: 1,
    // A long lease: only the gateway's own disconnect handling can settle these in time.
    env: {
      SVC_LEASE_SECONDS: '300',
      SVC_KEY_MAX_IN_FLIGHT: '1000',
      SVC_WALLET_MAX_IN_FLIGHT: '1000',
      // Bun's fetch keeps at most 256 upstream requests open per process by default.
      BUN_CONFIG_MAX_HTTP_REQUESTS: '1024',
    },
  })
  const upstreamKey = await simOffer(cluster, sim, 40, 1_000)
  const buyer = await fundedBuyer(cluster)
  const keys = keyspace(cluster.prefix)
  const url = new URL(cluster.replicas[0]!.url)

  const sockets = await Promise.all(Array.from({ length: STREAMS }, () => openStream(url, buyer.apiKey)))
  const opened = Date.now() - started
  expect(await store.hget(keys.account(buyer.accountId), `inflight:${buyer.keyId}`)).toBe(String(STREAMS))
  expect(Number(await store.hget(keys.account(buyer.accountId), 'held'))).toBeGreaterThan(0)

  const dropped = Date.now()
  for (const socket of sockets) socket.terminate()
  const settleMs = await settled(store, cluster.prefix, 30_000)

  const account = await store.hgetall(keys.account(buyer.accountId))
  const upstream = (await (await fetch(`${sim.url}/sim/keys/${upstreamKey}`)).json()) as {
    cancelledStreams: number
  }
  console.log(
    `(c) ${STREAMS} streams open after ${opened} ms, dropped at once; every slot and hold back in ` +
      `${Date.now() - dropped} ms (settled ${settleMs} ms); held ${account.held}, spent ${account.spent}; ` +
      `upstream streams cancelled ${upstream.cancelledStreams}`,
  )
  expect(account.held).toBe('0')
  expect([account.inflight, account[`inflight:${buyer.keyId}`]]).toEqual(['0', '0'])
  expect(await store.zcard(keys.leases)).toBe(0)
  expect(upstream.cancelledStreams).toBe(STREAMS)
  const audit = await runAudit(cluster.redisUrl, cluster.prefix)
  expect(audit.output).toContain('every invariant holds')
  expect(audit.code).toBe(0)
}, 120_000)
