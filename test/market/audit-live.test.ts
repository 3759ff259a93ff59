// The audit on a live market: paid requests admitting and clearing through the real gateway (the
// simulated supplier upstream, buffered and streamed) and the operator's credits landing, while the
// audit runs again and again. A market that is sound is named clean every time; an inconsistency
// planted on a busy account is still named, and the audit is clean again once it is undone.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditLive } from '../../src/cli/audit-live.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyers: TestAccount[]
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

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 6 }, env: { SVC_KEY_MAX_IN_FLIGHT: '16' } })
  await simOffer(stack, 40, { capacityDiem: '100000', maxInFlight: 1000 })
  await simOffer(stack, 45, { capacityDiem: '100000', maxInFlight: 1000 })
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

test('audited again and again under load: every invariant holds, every time', async () => {
  const start = { served, credited }
  let audits = 0
  while (audits < 8 || served - start.served < 200 || credited - start.credited < 10) {
    expect(await auditLive(stack.store, stack.keys)).toEqual([])
    audits++
  }
  // The command itself, as an operator runs it, on the live market.
  const cli = await runCli(['audit'], { REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: stack.keys.prefix })
  expect(cli).toEqual({ code: 0, stdout: 'audit: every invariant holds\n', stderr: '' })
}, 120_000)

test('a hold planted on a busy account and a fee kept twice are named under load, and gone once undone', async () => {
  const [buyer] = buyers
  const account = stack.keys.account(buyer!.accountId)
  const [offerId] = await stack.store.smembers(stack.keys.offers)
  const offer = stack.keys.offer(offerId!)
  // Money moved from confirmed to held with no attempt holding it (funded still adds up), and an
  // offer's fees counted twice: far more than the load moves while the audit reads.
  const plant = async (sign: 1 | -1) => {
    await stack.store.hincrby(account, 'held', sign * 7)
    await stack.store.hincrby(account, 'confirmed', sign * -7)
    await stack.store.hincrby(offer, 'fees', sign * 1_000_000)
  }
  await plant(1)
  const before = served
  const findings = await auditLive(stack.store, stack.keys)
  expect(served).toBeGreaterThan(before)
  expect(findings.map((f) => f.subject)).toEqual([`account ${buyer!.accountId}`, 'market'])
  expect(findings[0]!.problem).toMatch(/^held \d+ != holds of its open attempts \d+$/)
  expect(findings[1]!.problem).toMatch(/^buyer spend \d+ != supplier earnings \d+ \+ fees \d+$/)
  const cli = await runCli(['audit'], { REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: stack.keys.prefix })
  expect(cli.code).toBe(1)
  expect(cli.stdout).toContain(`audit: account ${buyer!.accountId}: held `)
  expect(cli.stdout).toContain('audit: 2 finding(s)')

  await plant(-1)
  const again = served
  expect(await auditLive(stack.store, stack.keys)).toEqual([])
  expect(served).toBeGreaterThan(again)
}, 120_000)
