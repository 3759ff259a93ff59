// The operator's market-wide routes over HTTP: totals (what the clears counted, equal to what the
// buyers were told they paid), health (Redis, this replica seen through its reaper pass), and an
// account found by its wallet; bad input is a shaped 4xx that changes nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { REPLICA_ID } from '../../src/market/replicas.ts'
import { adminFetch, createAccount, keyFetch, randomWallet } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ env: { SVC_FEE_BPS: '1000', SVC_REAP_INTERVAL_MS: '100' } })
})
afterAll(() => stack.stop())

describe('GET /admin/v1/market', () => {
  test('the admin token is required', async () => {
    for (const path of [
      '/admin/v1/market',
      '/admin/v1/health',
      `/admin/v1/accounts?wallet=${randomWallet()}`,
    ]) {
      const response = await fetch(`${stack.url}${path}`)
      expect(response.status).toBe(401)
    }
  })

  test('spend is what buyers were charged, split into earnings and fees', async () => {
    await simOffer(stack, 45)
    const buyer = await fundedBuyer(stack)
    let charged = 0
    for (let i = 0; i < 3; i++) {
      const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
        method: 'POST',
        json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
      })
      expect(response.status).toBe(200)
      charged += Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
    }
    const totals = (await (await adminFetch(stack, '/admin/v1/market')).json()) as Record<string, string>
    const fees = Math.round(Number(totals.feesUsdc) * 1e6)
    expect(Math.round(Number(totals.spentUsdc) * 1e6)).toBe(charged)
    expect(Math.round(Number(totals.earnedUsdc) * 1e6 + fees)).toBe(charged)
    expect(fees).toBeGreaterThan(0)
    expect(totals).toMatchObject({
      object: 'market_totals',
      writtenOffUsdc: '0.000000',
      disputedBurnDiem: '0.000000',
    })
  })
})

describe('GET /admin/v1/health', () => {
  test('Redis answers, this replica is seen through its reaper pass', async () => {
    let body: {
      redis: { status: string; pingMs: number }
      replicas: { count: number; data: { id: string; lastSeenAt: string; earlierBuild: boolean }[] }
      reaper: { lastRunAt: string; replica: string; reaped: number } | null
    }
    do {
      body = (await (await adminFetch(stack, '/admin/v1/health')).json()) as typeof body
      if (!body.reaper) await Bun.sleep(50)
    } while (!body.reaper)
    expect(body.redis.status).toBe('ok')
    expect(body.redis.pingMs).toBeGreaterThanOrEqual(0)
    expect(body.replicas.data.map((r) => r.id)).toContain(REPLICA_ID)
    expect(body.replicas.count).toBe(body.replicas.data.length)
    expect(body.reaper.replica).toBe(REPLICA_ID)
    expect(Number.isNaN(Date.parse(body.reaper.lastRunAt))).toBe(false)
    expect(body.replicas.data.find((r) => r.id === REPLICA_ID)?.earlierBuild).toBe(false)
  })

  test('a replica of an earlier build (seen, never stamped as marking revoked keys) is named as one', async () => {
    const earlier = `earlier-build:${Date.now()}`
    await stack.store.zadd(stack.keys.replicas, Date.now(), earlier)
    try {
      const body = (await (await adminFetch(stack, '/admin/v1/health')).json()) as {
        replicas: { data: { id: string; earlierBuild: boolean }[] }
      }
      const byId = new Map(body.replicas.data.map((r) => [r.id, r.earlierBuild]))
      expect(byId.get(earlier)).toBe(true)
      expect(byId.get(REPLICA_ID)).toBe(false)
    } finally {
      await stack.store.zrem(stack.keys.replicas, earlier)
    }
  })
})

describe('GET /admin/v1/accounts?wallet=', () => {
  test('finds the account by its wallet in any case', async () => {
    const account = await createAccount(stack)
    for (const wallet of [account.wallet, account.wallet.toLowerCase()]) {
      const response = await adminFetch(stack, `/admin/v1/accounts?wallet=${wallet}`)
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ accountId: account.accountId, wallet: account.wallet })
    }
  })

  test('a malformed wallet is 400, an unknown one 404; nothing changes', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const [query, status, code] of [
      ['?wallet=0x123', 400, 'invalid_wallet'],
      ['', 400, 'invalid_wallet'],
      [`?wallet=${randomWallet()}`, 404, 'account_not_found'],
    ] as const) {
      const response = await adminFetch(stack, `/admin/v1/accounts${query}`)
      expect(response.status).toBe(status)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('hostile queries on the operator reads', () => {
  test('random wallet queries and query strings: a shaped 4xx or the answer, never a 500; nothing changes', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 80 }),
          fc.stringMatching(/^[0-9a-fA-F]{38,42}$/).map((h) => `0x${h}`),
        ),
        fc.webQueryParameters(),
        fc.constantFrom('/admin/v1/accounts', '/admin/v1/market', '/admin/v1/health'),
        async (wallet, extra, path) => {
          const response = await adminFetch(stack, `${path}?wallet=${encodeURIComponent(wallet)}&${extra}`)
          expect(response.status).toBeLessThan(500)
          if (response.status >= 400) {
            const body = (await response.json()) as { error: { code: string; message: string; type: string } }
            expect(Object.keys(body.error).sort()).toEqual(
              expect.arrayContaining(['code', 'message', 'type']),
            )
          } else await response.arrayBuffer()
        },
      ),
      { numRuns: 150 },
    )
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})
