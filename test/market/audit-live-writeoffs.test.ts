// The live audit's write-offs on a market held apart (SVC_REDIS_LAYOUT=apart: a late clear writes
// off on its account's shard): paid requests through the real gateway, and late clears of
// admissions the store lost writing off what their empty accounts could not pay, one after
// another, while the audit runs again and again. Sound, it is named clean every time; a write-off
// on an account that no list holds, and one listed that no account wrote off, are each named once
// under that load, and gone once undone. On a single Redis, and on a Cluster with
// TEST_REDIS_TOPOLOGY=cluster.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { auditLive } from '../../src/cli/audit-live.ts'
import { OfferService } from '../../src/market/offers.ts'
import { clearApart, ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem, MicroUsdc } from '../../src/money/units.ts'
import { accountShard, type Keyspace, keyspace, ownerPrefix } from '../../src/redis/keys.ts'
import { createAccount, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { meteredClear } from '../helpers/market.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let keys: Keyspace
let buyers: TestAccount[]
let offerId: string
let served = 0
let writtenOff = 0
let running = true
let failed: unknown
let load: Promise<unknown>

const MODEL = 'llama-3.3-70b'
const body = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }
/** A late clear's burn at the offer's 40 cents: 400 micro-USDC, all written off on an empty account. */
const LATE = { burn: 1_000, ask: 40, cost: 400 }

/** A loop of the load: it ends when the tests are done, or at its first failure, kept for them to throw. */
async function loop(step: () => Promise<void>) {
  try {
    while (running) await step()
  } catch (error) {
    failed ??= error
  }
}

/** One client of a buyer: paid requests, one after another, streamed every other time. */
function client(buyer: TestAccount, n: number) {
  let i = 0
  return loop(async () => {
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: (n + i++) % 2 === 0 },
    })
    await response.text()
    if (response.status === 200) served++
  })
}

/**
 * Results of a buyer with nothing to pay with, each for an admission the store lost (a failover):
 * cleared late, each writes its whole cost off on the account's shard, and posts on the offer.
 */
async function writingOff(buyer: TestAccount) {
  const owners = ownerKeyspaces(keys.prefix)
  const [apiKeyId] = Object.keys(await stack.store.hgetall(keys.accountKeys(buyer.accountId)))
  const who = { accountId: buyer.accountId, offerId, model: MODEL }
  await loop(async () => {
    const at = served
    const attemptId = randomUUID()
    const admission = {
      accountId: buyer.accountId,
      apiKeyId: apiKeyId!,
      offerId,
      askCents: LATE.ask,
      holdUsdc: LATE.cost as MicroUsdc,
      holdDiem: LATE.burn as MicroDiem,
      model: MODEL,
      requestId: `req_${attemptId}`,
    }
    const cleared = await clearApart(stack.store, owners, who, {
      ...meteredClear(attemptId, LATE.burn),
      admission,
    })
    if (Number(cleared.writtenOff) !== LATE.cost) throw new Error(`written off ${cleared.writtenOff}`)
    writtenOff++
    // A write-off per request served: what the audit reads grows with the market's load, not
    // faster than a busy machine lets the audit read it.
    await until(() => served > at || !running)
  })
}

/** Waits until `done` holds, auditing the market each time: the load's first failure ends it. */
async function auditing(done: () => boolean, each: () => Promise<void>) {
  await until(async () => {
    if (failed) throw failed
    await each()
    return done()
  })
}

const cliEnv = () => ({ REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: stack.keys.prefix })
const writeOffLine = /^audit: write-off 0\.000400 USDC, attempt \S+ account \S+, offer \S+: /
const writeOffFinding = /^accounts' written off \d+ != the write-off list's \d+$/

beforeAll(async () => {
  stack = await startStack({
    // A moment upstream keeps requests in flight while the audit reads them.
    sim: { outputTokens: 6, latencyMs: 20, ttftMs: 20 },
    env: { SVC_KEY_MAX_IN_FLIGHT: '16' },
    tune: (config) => {
      config.redisLayout = 'apart'
    },
  })
  keys = keyspace(stack.config.redisPrefix, 'apart')
  const { supplierId } = await signInSupplier(stack)
  const offers = new OfferService(stack.store, keys, stack.config.masterKey)
  const offer = await offers.create({
    upstreamBaseUrl: stack.sim.url,
    upstreamApiKey: `sim-${randomUUID()}`,
    askCents: LATE.ask,
    capacity: 100_000_000_000 as MicroDiem,
    maxInFlight: 1000,
    supplierId,
    upstreamKeyDigest: randomUUID(),
  })
  offerId = offer.id
  buyers = await Promise.all([1, 2].map(() => fundedBuyer(stack, '1000.000000')))
  const empty = await Promise.all([1, 2].map(() => createAccount(stack)))
  load = Promise.all([
    ...buyers.flatMap((buyer) => Array.from({ length: 3 }, (_, n) => client(buyer, n))),
    ...empty.map(writingOff),
  ])
  await until(() => {
    if (failed) throw failed
    return served > 20 && writtenOff > 10
  })
})

afterAll(async () => {
  running = false
  await load
  await stack.stop()
})

test('held apart, audited again and again while late clears write off: every invariant holds, every time', async () => {
  const start = { served, writtenOff }
  let audits = 0
  await auditing(
    () => audits >= 8 && served - start.served >= 100 && writtenOff - start.writtenOff >= 50,
    async () => {
      expect(await auditLive(stack.store, keys)).toEqual([])
      audits++
    },
  )
  // The command lists each write-off, then holds every invariant.
  const cli = await runCli(['audit'], cliEnv())
  expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
  const lines = cli.stdout.trimEnd().split('\n')
  expect(lines.pop()).toBe('audit: every invariant holds')
  expect(lines.length).toBeGreaterThan(0)
  for (const line of lines) expect(line).toMatch(writeOffLine)
}, 120_000)

test('held apart, a write-off no list holds and one no account wrote off are each named once while late clears write off, and gone once undone', async () => {
  const [buyer] = buyers
  const account = keys.account(buyer!.accountId)
  // Far more than the late clears write off while the audit reads.
  const unlisted = (sign: 1 | -1) => stack.store.hincrby(account, 'writtenOff', sign * 1_000_000_000)
  const shardList = keyspace(ownerPrefix(keys.prefix, `a.${accountShard(buyer!.accountId)}`)).writeoffs
  const ghost = `ghost-${randomUUID()}`

  for (const [plant, undo] of [
    [() => unlisted(1), () => unlisted(-1)],
    [() => stack.store.hset(shardList, ghost, 1_000_000_000), () => stack.store.hdel(shardList, ghost)],
  ] as const) {
    await plant()
    const before = writtenOff
    await auditing(
      () => writtenOff > before,
      async () => {
        const findings = await auditLive(stack.store, keys)
        expect(findings).toHaveLength(1)
        expect(findings[0]!.subject).toBe('market')
        expect(findings[0]!.problem).toMatch(writeOffFinding)
      },
    )
    const cli = await runCli(['audit'], cliEnv())
    expect(cli.code).toBe(1)
    expect(cli.stdout).toContain("audit: market: accounts' written off ")
    expect(cli.stdout).toContain('audit: 1 finding(s)')

    await undo()
    const again = writtenOff
    await auditing(
      () => writtenOff > again,
      async () => expect(await auditLive(stack.store, keys)).toEqual([]),
    )
  }
}, 120_000)
