// A Cluster store is ready once its slots are known and a node has answered the ready check, even
// where its nodes are slow to connect: a node still connecting must not refuse the check (the
// Cluster then reconnects from scratch, and on a busy host went on past a gateway start's 15 s).
// Each master announces a port of a proxy here that holds every new connection a while before
// piping it through, so the store's own node connections are slow and its startup node is not.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Socket, TCPSocketListener } from 'bun'
import Redis from 'ioredis'
import { createStore } from '../../src/redis/store.ts'
import { type RedisCluster, startRedisCluster, until } from '../helpers/redis-cluster.ts'

const HELD_MS = 400

/** A TCP proxy to `port` that waits HELD_MS before it connects a new client through. */
function slowProxy(port: number): TCPSocketListener<{ upstream?: Socket; pending: Buffer[] }> {
  return Bun.listen<{ upstream?: Socket; pending: Buffer[] }>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        client.data = { pending: [] }
        setTimeout(async () => {
          const upstream = await Bun.connect({
            hostname: '127.0.0.1',
            port,
            socket: {
              data: (_, chunk) => void client.write(chunk),
              close: () => void client.end(),
              error: () => void client.end(),
            },
          }).catch(() => undefined)
          if (!upstream) return void client.end()
          client.data.upstream = upstream
          for (const chunk of client.data.pending) upstream.write(chunk)
        }, HELD_MS)
      },
      data(client, chunk) {
        if (client.data.upstream) client.data.upstream.write(chunk)
        else client.data.pending.push(Buffer.from(chunk))
      },
      close: (client) => void client.data.upstream?.end(),
      error: (client) => void client.data.upstream?.end(),
    },
  })
}

let cluster: RedisCluster
const proxies: TCPSocketListener<unknown>[] = []
beforeAll(async () => {
  cluster = await startRedisCluster()
  for (const node of cluster.nodes) {
    const proxy = slowProxy(node.port)
    proxies.push(proxy as TCPSocketListener<unknown>)
    const direct = new Redis(node.port, '127.0.0.1')
    await direct.config('SET', 'cluster-announce-port', String(proxy.port))
    direct.disconnect()
  }
  // Every master lists the others' proxies once the announcement has gone round.
  const proxied = new Set(proxies.map((p) => p.port))
  for (const node of cluster.nodes) {
    const direct = new Redis(node.port, '127.0.0.1')
    await until('the proxies announced', async () => {
      const slots = await direct.cluster('SLOTS')
      return slots.every(([, , master]) => master !== undefined && proxied.has(master[1]))
    })
    direct.disconnect()
  }
})
afterAll(() => {
  for (const proxy of proxies) proxy.stop(true)
  cluster.stop()
})

test('a serving store on a Cluster whose nodes are slow to connect is ready, every node connected', async () => {
  // The startup node is reached directly; the nodes the slots name, only through the proxies.
  const store = createStore(`redis+cluster://127.0.0.1:${cluster.nodes[0]!.port}`, { failFast: true })
  try {
    await store.whenReady(10_000)
    expect(await store.set('{ready}:probe', 'ok')).toBe('OK')
    expect(await store.get('{ready}:probe')).toBe('ok')
    const masters = await store.masters()
    expect(masters).toHaveLength(3)
    expect(await Promise.all(masters.map((m) => m.ping()))).toEqual(['PONG', 'PONG', 'PONG'])
  } finally {
    store.close()
  }
})
