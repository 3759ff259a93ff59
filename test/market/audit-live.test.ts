// The audit on a live market: paid requests admitting and clearing through the real gateway (the
// simulated supplier upstream, buffered and streamed) and the operator's credits landing, while the
// audit runs again and again, and late clears writing off. A market that is sound is named clean
// every time; an inconsistency planted on a busy account (a hold, or a write-off never listed) is
// still named, and the audit is clean again once it is undone.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditLive } from '../../src/cli/audit-live.ts'
import { admit } from '../../src/market/admission.ts'
import { clear, releaseAttempt } from '../../src/market/clearing.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { admitRequest, meteredClear } from '../helpers/market.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyers: TestAccount[]
let served = 0
let credited = 0
let lateBuyers: TestAccount[]
let writtenOff = 0
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

/** The operator crediting the buyers by hand, one after another. */
async function crediting() {
  for (let i = 0; running; i++) {
    const buyer = buyers[i % buyers.length]!
    const response = await adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}/credit`, {
      method: 'POST',
      json: { amountUsdc: '0.010000', note: 'live top-up' },
    })
    await response.text()
    if (response.status === 200) credited++
  }
}

/** A late clear's hold: 50,000 micro-DIEM at the 40-cent offer, 20,000 micro-USDC. */
const LATE_HOLD = { diem: 50_000, usdc: '0.020000' }

/**
 * A buyer's requests, each of whose result comes after its lease was reaped (its replica stopped
 * renewing it) and while a second request holds the balance its reap gave back: the late clear can
 * charge nothing, so it writes its cost off. The second is then released.
 */
async function lateClearing(buyer: TestAccount) {
  const [keyId] = await stack.store.hkeys(stack.keys.accountKeys(buyer.accountId))
  const request = (leaseMs: number) =>
    admitRequest(buyer.accountId, {
      apiKeyId: keyId!,
      holdDiem: LATE_HOLD.diem as MicroDiem,
      leaseMs,
      defaultMaxPriceCents: 40,
    })
  const admitted = async (leaseMs: number) => {
    const admission = await admit(stack.store, stack.keys, request(leaseMs))
    expect(admission.code).toBe(AdmitCode.Admitted)
    return (admission as { attemptId: string }).attemptId
  }
  while (running) {
    const late = await admitted(1)
    // The gateway's reaper takes it.
    const attempt = stack.keys.attempt(late)
    await until(async () => (await attemptRecord(stack.store, attempt)).state === 'reaped')
    const holding = await admitted(60_000)
    const cleared = await clear(stack.store, stack.keys, meteredClear(late, LATE_HOLD.diem))
    expect(Number(cleared.writtenOff)).toBeGreaterThan(0)
    writtenOff++
    await releaseAttempt(stack.store, stack.keys, {
      attemptId: holding,
      errorCode: 'upstream_5xx',
      cooldownMs: 0,
      upstreamBalance: null,
    })
  }
}

beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 6 },
    // A reaper that runs often, for the late clears' reaps.
    env: { SVC_KEY_MAX_IN_FLIGHT: '16', SVC_REAP_INTERVAL_MS: '50' },
  })
  await simOffer(stack, 40, { capacityDiem: '100000', maxInFlight: 1000 })
  await simOffer(stack, 45, { capacityDiem: '100000', maxInFlight: 1000 })
  buyers = await Promise.all([1, 2, 3].map(() => fundedBuyer(stack, '1000.000000')))
  // Each funded for one late request's hold exactly.
  lateBuyers = await Promise.all([1, 2, 3].map(() => fundedBuyer(stack, LATE_HOLD.usdc)))
  load = Promise.all([
    ...buyers.flatMap((buyer) => Array.from({ length: 8 }, (_, n) => client(buyer, n))),
    crediting(),
    ...lateBuyers.map(lateClearing),
  ])
  await until(() => served > 20 && credited > 2 && writtenOff > 2)
})

afterAll(async () => {
  running = false
  await load
  await stack.stop()
})

test('audited again and again under load with late clears: every invariant holds, every time', async () => {
  const start = { served, credited, writtenOff }
  let audits = 0
  while (
    audits < 8 ||
    served - start.served < 200 ||
    credited - start.credited < 10 ||
    writtenOff - start.writtenOff < 30
  ) {
    expect(await auditLive(stack.store, stack.keys)).toEqual([])
    audits++
  }
  // The command itself, as an operator runs it, on the live market: each write-off the late
  // clears made listed, then every invariant holds.
  const cli = await runCli(['audit'], { REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: stack.keys.prefix })
  expect({ code: cli.code, stderr: cli.stderr }).toEqual({ code: 0, stderr: '' })
  const lines = cli.stdout.trimEnd().split('\n')
  expect(lines.pop()).toBe('audit: every invariant holds')
  for (const line of lines) expect(line).toMatch(/^audit: write-off 0\.020000 USDC, attempt \S+ account /)
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

test('a write-off never listed is named under late clears, and gone once undone', async () => {
  const [buyer] = lateBuyers
  const account = stack.keys.account(buyer!.accountId)
  // Written off on the account and in no list: far more than the late clears write off while the
  // audit reads.
  const plant = (sign: 1 | -1) => stack.store.hincrby(account, 'writtenOff', sign * 1_000_000_000)
  await plant(1)
  const before = writtenOff
  const findings = await auditLive(stack.store, stack.keys)
  expect(writtenOff).toBeGreaterThan(before)
  expect(findings).toHaveLength(1)
  expect(findings[0]!.subject).toBe('market')
  expect(findings[0]!.problem).toMatch(/^accounts' written off \d+ != the write-off list's \d+$/)

  await plant(-1)
  const again = writtenOff
  expect(await auditLive(stack.store, stack.keys)).toEqual([])
  expect(writtenOff).toBeGreaterThan(again)
}, 120_000)
