// The operator's CLI on a market held apart, run in-process (test/helpers/cli.ts) beside a real
// gateway started with SVC_REDIS_LAYOUT=apart: every command finds the layout recorded in Redis and
// reads and writes each owner's keys on its own slot, so what the CLI makes the gateway serves, and
// what the gateway made the CLI shows, audits and exports. The demo's account and offers too.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import OpenAI from 'openai'
import { createDemoAccount } from '../../src/cli/demo-account.ts'
import { seedDemoOffers } from '../../src/cli/demo-offers.ts'
import { ownerKeyspaces } from '../../src/market/two-phase.ts'
import { accountShard } from '../../src/redis/keys.ts'
import { randomWallet } from '../helpers/accounts.ts'
import { runCli } from '../helpers/cli.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let env: Record<string, string>
const cli = (...args: string[]) => runCli(args, env)
const json = async <T>(args: string[]) => {
  const result = await cli(...args)
  expect(result.stderr).toBe('')
  expect(result.code).toBe(0)
  return JSON.parse(result.stdout) as T
}

beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 8 },
    tune: (config) => {
      config.redisLayout = 'apart'
    },
  })
  env = {
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: stack.config.redisPrefix,
    SVC_MASTER_KEY: Buffer.from(stack.config.masterKey).toString('hex'),
  }
})
afterAll(() => stack.stop())

/** An offer on the simulated supplier, made by `offer create`. */
const createOffer = (ask: number) =>
  json<{ id: string }>([
    'offer',
    'create',
    '--base-url',
    stack.sim.url,
    '--key',
    `sim-${randomBytes(6).toString('hex')}`,
    '--ask',
    String(ask),
    '--capacity',
    '50',
  ])

const owners = () => ownerKeyspaces(stack.config.redisPrefix)
const market = () => stack.keys

describe('the CLI on a market held apart', () => {
  test("account and offer commands write on the owners' slots; the gateway serves what they made", async () => {
    const offer = await createOffer(42)
    const own = owners().offer(offer.id)
    expect(await stack.store.hget(own.offer(offer.id), 'askCents')).toBe('42')
    expect(await stack.store.exists(market().offer(offer.id))).toBe(0)
    expect(await stack.store.zscore(market().ladder, offer.id)).not.toBeNull()

    const account = await json<{ accountId: string; apiKey: string }>([
      'account',
      'create',
      '--wallet',
      randomWallet(),
    ])
    await json([
      'account',
      'credit',
      account.accountId,
      '3.000000',
      '--note',
      'cli funds',
      '--idempotency-key',
      `t-${account.accountId}`,
    ])
    const shard = owners().account(account.accountId)
    expect(await stack.store.hget(shard.account(account.accountId), 'confirmed')).toBe('3000000')
    expect(await stack.store.exists(market().account(account.accountId))).toBe(0)

    const client = new OpenAI({ apiKey: account.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    const { response } = await client.chat.completions
      .create({ model: 'svc/llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse()
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('42')
    const cost = Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
    expect(cost).toBeGreaterThan(0)

    const shown = await json<{ balances: { confirmedUsdc: string } }>(['account', 'show', account.accountId])
    expect(Math.round(Number(shown.balances.confirmedUsdc) * 1e6)).toBe(3_000_000 - cost)
    const listed = await json<{ data: { id: string; burnedDiem: string }[] }>(['offer', 'list'])
    expect(listed.data.find((o) => o.id === offer.id)!.burnedDiem).not.toBe('0.000000')

    await json(['offer', 'pause', offer.id])
    expect(await stack.store.zscore(market().ladder, offer.id)).toBeNull()
    await json(['offer', 'resume', offer.id])
    await json(['offer', 'update', offer.id, '--ask', '44'])
    expect(Number(await stack.store.zscore(market().ladder, offer.id))).toBeGreaterThanOrEqual(44e9)
    await json(['offer', 'delete', offer.id])
    expect(await stack.store.hget(own.offer(offer.id), 'status')).toBe('deleted')
    expect(await stack.store.zscore(market().ladder, offer.id)).toBeNull()
  })

  test('supplier commands: suspending takes its offers off the ladder and marks them on their slots', async () => {
    const s = await signInSupplier(stack)
    const posted = await fetch(`${stack.url}/v1/supplier/offers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        upstreamApiKey: `sim-${randomBytes(6).toString('hex')}`,
        askCents: 39,
        capacityDiem: '10',
      }),
    })
    expect(posted.status).toBe(201)
    const { id } = (await posted.json()) as { id: string }
    const shown = await json<{ supplierId: string; offerCount: number }>(['supplier', 'show', s.supplierId])
    expect(shown).toMatchObject({ supplierId: s.supplierId, offerCount: 1 })
    const list = await json<{ data: { supplierId: string }[] }>(['supplier', 'list'])
    expect(list.data.map((row) => row.supplierId)).toContain(s.supplierId)

    await json(['supplier', 'suspend', s.supplierId])
    expect(await stack.store.zscore(market().ladder, id)).toBeNull()
    expect(await stack.store.hget(owners().offer(id).offer(id), 'suspended')).toBe('1')
    await json(['supplier', 'reinstate', s.supplierId])
    expect(await stack.store.zscore(market().ladder, id)).not.toBeNull()
    expect(await stack.store.hget(owners().offer(id).offer(id), 'suspended')).toBeNull()
    const again = await json<{ data: { id: string }[] }>(['offer', 'list'])
    expect(again.data.map((o) => o.id)).toContain(id)
  })

  test('the demo seeds its account and offers in the recorded layout', async () => {
    const buyer = await createDemoAccount(stack.config)
    expect(
      await stack.store.hget(owners().account(buyer.accountId).account(buyer.accountId), 'confirmed'),
    ).toBe('25000000')
    expect(await seedDemoOffers(stack.config, stack.sim.url)).toEqual([38, 45, 62])
    const listed = await json<{ data: { id: string; askCents: number }[] }>(['offer', 'list'])
    for (const ask of [38, 45, 62]) {
      const row = listed.data.find((o) => o.askCents === ask)!
      expect(await stack.store.hget(owners().offer(row.id).offer(row.id), 'askCents')).toBe(String(ask))
    }
  })

  test('audit runs the audit of every slot: clean after traffic, and names a pair that does not agree', async () => {
    const clean = await cli('audit')
    expect(clean.stderr).toBe('')
    expect(clean.stdout).toContain('every invariant holds')
    expect(clean.code).toBe(0)

    // An account charged on its slot whose offer never learnt of it: the pair across slots is off.
    const account = await json<{ accountId: string }>(['account', 'create', '--wallet', randomWallet()])
    const shard = owners().account(account.accountId)
    const attemptId = `req_${randomBytes(8).toString('hex')}.1`
    await stack.store.hset(shard.attempt(attemptId), {
      id: attemptId,
      state: 'cleared',
      accountId: account.accountId,
      offerId: 'no-such-offer',
      costUsdc: '0',
    })
    const broken = await cli('audit')
    expect(broken.code).toBe(1)
    expect(broken.stdout).toContain(
      `attempt ${attemptId}: cleared on its account with no reservation on its offer`,
    )
    await stack.store.del(shard.attempt(attemptId))
    expect((await cli('audit')).code).toBe(0)
  })

  test("export reads every shard's Stream: each paid request once, its id naming its shard", async () => {
    const offer = await createOffer(30)
    const served: string[] = []
    for (let i = 0; i < 3; i++) {
      const account = await json<{ accountId: string; apiKey: string }>([
        'account',
        'create',
        '--wallet',
        randomWallet(),
      ])
      await json([
        'account',
        'credit',
        account.accountId,
        '1.000000',
        '--idempotency-key',
        `t-${account.accountId}`,
      ])
      const client = new OpenAI({ apiKey: account.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
      const { response } = await client.chat.completions
        .create({ model: 'svc/llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] })
        .withResponse()
      served.push(response.headers.get('x-svc-support-reference')!)
    }
    const first = await cli('export', '--group', 'warehouse', '--once')
    expect(first.code).toBe(0)
    const lines = first.stdout
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as { id: string; supportReference: string; accountId: string; status: string },
      )
    for (const reference of served) {
      const line = lines.find((l) => l.supportReference === reference)!
      expect(line.status).toBe('completed')
      expect(line.id.startsWith(`a.${accountShard(line.accountId)}:`)).toBe(true)
    }
    expect(new Set(lines.map((l) => l.id)).size).toBe(lines.length)
    const next = await cli('export', '--group', 'warehouse', '--once')
    expect(next).toMatchObject({ code: 0, stdout: '' })
    await json(['offer', 'delete', offer.id])
  })
})
