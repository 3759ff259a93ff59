// The audit on a live market held apart (SVC_REDIS_LAYOUT=apart: accounts, offers and suppliers
// on slots of their own, a request's money moved across them in two steps): paid requests through
// the real gateway on offers of a supplier, the operator's credits landing, while the audit runs
// again and again. Sound, it is named clean every time; a hold planted on a busy account, a fee
// kept twice and an offer's earnings with no fill are still named, and gone once undone; a pair
// charged on its account and not yet posted on its offer is in transit while its lease runs. On a
// single Redis, and on a Cluster with TEST_REDIS_TOPOLOGY=cluster.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { auditAll } from '../../src/cli/audit-all.ts'
import { auditLive } from '../../src/cli/audit-live.ts'
import { IN_TRANSIT } from '../../src/market/audit-pairs.ts'
import { OfferService } from '../../src/market/offers.ts'
import { PostQueue } from '../../src/market/post-queue.ts'
import { admitApart, clearApart, ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { admitRequest, meteredClear } from '../helpers/market.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let keys: Keyspace
let buyers: TestAccount[]
let offerIds: string[]
let supplierId: string
let served = 0
let credited = 0
let running = true
let load: Promise<unknown>

const body = { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }

/** One client of a buyer: paid requests, one after another, streamed every other time. */
async function client(buyer: TestAccount, n: number) {
  for (let i = 0; running; i++) {
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: (n + i) % 2 === 0 },
    })
    await response.text()
    if (response.status === 200) served++
  }
}

/**
 * The operator crediting the buyers by hand, one after another, a credit per request served: the
 * market's load stays the buyers', and the records the audit reads grow with them.
 */
async function crediting() {
  for (let i = 0; running; i++) {
    const at = served
    const buyer = buyers[i % buyers.length]!
    const response = await adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}/credit`, {
      method: 'POST',
      json: { amountUsdc: '0.010000', note: 'live top-up' },
    })
    await response.text()
    if (response.status === 200) credited++
    await until(() => served > at || !running)
  }
}

const cliEnv = () => ({ REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: stack.keys.prefix })

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
  // The supplier's offers, so that its fills and earnings move under the load too.
  supplierId = (await signInSupplier(stack)).supplierId
  const offers = new OfferService(stack.store, keys, stack.config.masterKey)
  offerIds = []
  for (const askCents of [40, 45]) {
    const offer = await offers.create({
      upstreamBaseUrl: stack.sim.url,
      upstreamApiKey: `sim-${randomUUID()}`,
      askCents,
      capacity: 100_000_000_000 as MicroDiem,
      maxInFlight: 1000,
      supplierId,
      upstreamKeyDigest: randomUUID(),
    })
    offerIds.push(offer.id)
  }
  buyers = await Promise.all([1, 2, 3].map(() => fundedBuyer(stack, '1000.000000')))
  load = Promise.all([
    ...buyers.flatMap((buyer) => Array.from({ length: 8 }, (_, n) => client(buyer, n))),
    crediting(),
  ])
  await until(() => served > 20 && credited > 2)
})

afterAll(async () => {
  running = false
  await load
  await stack.stop()
})

test('held apart, audited again and again under load: every invariant holds, every time', async () => {
  const start = { served, credited }
  let audits = 0
  while (audits < 8 || served - start.served < 200 || credited - start.credited < 10) {
    expect(await auditLive(stack.store, keys)).toEqual([])
    audits++
  }
  const cli = await runCli(['audit'], cliEnv())
  expect(cli).toEqual({ code: 0, stdout: 'audit: every invariant holds\n', stderr: '' })
}, 120_000)

test('held apart, a planted hold, a fee kept twice and earnings with no fill are named under load, and gone once undone', async () => {
  const [buyer] = buyers
  const account = keys.account(buyer!.accountId)
  const [feeOffer, earnOffer] = offerIds.map((id) => keys.offer(id))
  // Money moved from confirmed to held with no attempt holding it (funded still adds up), one
  // offer's fees counted twice, and another's earnings with no fill for them: far more than the
  // load moves while the audit reads.
  const plant = async (sign: 1 | -1) => {
    await stack.store.hincrby(account, 'held', sign * 7)
    await stack.store.hincrby(account, 'confirmed', sign * -7)
    await stack.store.hincrby(feeOffer!, 'fees', sign * 1_000_000)
    await stack.store.hincrby(earnOffer!, 'earned', sign * 3_000_000)
  }
  await plant(1)
  const before = served
  const findings = await auditLive(stack.store, keys)
  expect(served).toBeGreaterThan(before)
  expect(findings.map((f) => f.subject)).toEqual([
    `account ${buyer!.accountId}`,
    'market',
    `supplier ${supplierId}`,
  ])
  expect(findings[0]!.problem).toMatch(/^held \d+ != holds of its admitted attempts \d+$/)
  expect(findings[1]!.problem).toMatch(
    /^buyer spend \d+ != supplier earnings and fees less uncovered \d+ \+ in transit \d+$/,
  )
  expect(findings[2]!.problem).toMatch(/^fills earned \d+ != its offers' earned \d+$/)
  const cli = await runCli(['audit'], cliEnv())
  expect(cli.code).toBe(1)
  expect(cli.stdout).toContain(`audit: account ${buyer!.accountId}: held `)
  expect(cli.stdout).toContain('audit: 3 finding(s)')

  await plant(-1)
  const again = served
  expect(await auditLive(stack.store, keys)).toEqual([])
  expect(served).toBeGreaterThan(again)
}, 120_000)

test('held apart, a pair charged and not yet posted is in transit while its lease runs, under load', async () => {
  const buyer = await fundedBuyer(stack, '1.000000')
  const [keyId, digest] = Object.entries(await stack.store.hgetall(keys.accountKeys(buyer.accountId)))[0]!
  const owners = ownerKeyspaces(keys.prefix)
  const offerId = offerIds[0]!
  const admission = await admitApart(stack.store, owners, {
    ...admitRequest(buyer.accountId, { apiKeyId: keyId }),
    apiKeyDigest: digest,
    offerId,
    maxCents: 50,
  })
  expect(admission.code).toBe(AdmitCode.Admitted)
  const { attemptId } = admission as { attemptId: string }
  // Charged on its account, its post queued by a replica that has not sent it yet.
  const posts = new PostQueue(stack.store, (id) => owners.offer(id).base, 600_000)
  const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
  await clearApart(stack.store, owners, who, meteredClear(attemptId, 600), posts)
  const inTransit = { subject: `attempt ${attemptId}`, problem: IN_TRANSIT }
  expect(await auditAll(stack.store, keys)).toContainEqual(inTransit)
  const before = served
  expect(await auditLive(stack.store, keys)).toEqual([])
  expect(served).toBeGreaterThan(before)

  await posts.flush()
  expect(await auditAll(stack.store, keys)).not.toContainEqual(inTransit)
  expect(await auditLive(stack.store, keys)).toEqual([])
}, 120_000)
