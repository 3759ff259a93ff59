// One replica syncs the catalog per period: the first replica to claim the period asks the upstream,
// the others skip it, and a sync that fails gives the claim back so another replica's turn syncs.
import { afterAll, expect, test } from 'bun:test'
import pino from 'pino'
import { CatalogStore } from '../../src/catalog/store.ts'
import { startCatalogSync } from '../../src/catalog/sync.ts'
import { startSim } from '../../src/sim/server.ts'
import { marketFixture } from '../helpers/market.ts'

const fx = marketFixture()
const sim = startSim({ port: 0 })
let failing = false
let asked = 0
// The upstream's /models, counted; answering 503 while `failing`.
const upstream = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: async (request) => {
    asked++
    if (failing) return new Response('down', { status: 503 })
    const url = new URL(request.url)
    return fetch(`${sim.url}${url.pathname.replace(/^\/api\/v1/, '')}${url.search}`)
  },
})
afterAll(async () => {
  fx.close()
  upstream.stop(true)
  await sim.stop()
})

/** A replica's sync loop whose ticks the test runs by hand. */
function replica(name: string) {
  let tick: (() => unknown) | undefined
  const catalog = new CatalogStore(fx.store, fx.keys)
  const stop = startCatalogSync(
    catalog,
    { upstreamUrl: `http://127.0.0.1:${upstream.port}`, disabledModels: [] },
    300,
    {
      store: fx.store,
      keys: fx.keys,
      logger: pino({ level: 'silent' }),
      replica: name,
      every: (_periodMs, run) => {
        tick = run
        return () => {}
      },
    },
  )
  return { tick: async () => await tick!(), stop }
}

test('one replica of many asks the upstream per period; a failed sync lets another try', async () => {
  const [a, b, c] = [replica('replica-a'), replica('replica-b'), replica('replica-c')]
  await a.tick()
  await b.tick()
  await c.tick()
  expect(asked).toBe(1)
  expect(await fx.store.get(fx.keys.catalogSyncClaim)).toBe('replica-a')
  expect(await fx.store.hlen(fx.keys.catalog)).toBeGreaterThan(0)
  await a.tick() // the period is still a's: synced once already
  expect(asked).toBe(1)

  // The next period: whoever ticks first syncs; while the upstream fails, each failure hands on.
  await fx.store.del(fx.keys.catalogSyncClaim)
  failing = true
  await b.tick()
  expect(asked).toBe(2)
  expect(await fx.store.exists(fx.keys.catalogSyncClaim)).toBe(0)
  failing = false
  await c.tick()
  expect(asked).toBe(3)
  expect(await fx.store.get(fx.keys.catalogSyncClaim)).toBe('replica-c')
  await a.tick()
  await b.tick()
  expect(asked).toBe(3)
  for (const r of [a, b, c]) r.stop()
})
