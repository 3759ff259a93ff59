// Video end to end: quote (no-wait select), queue (hold the worst case), retrieve (status, then the
// MP4, cleared on the first success), a refund to the micro-USDC, 410 after expiry.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer
const stacks: TestStack[] = []

// wan-2.1-video lists 0.05 DIEM per second: a 5 s job burns 250,000 micro-DIEM
const BURN_5S = 250_000

beforeAll(async () => {
  stack = await startStack({ sim: { videoJobMs: 150 } })
  stacks.push(stack)
  offer = await simOffer(stack, 40, { maxInFlight: 2 })
  buyer = await fundedBuyer(stack, '3.000000')
})
afterAll(async () => {
  for (const s of stacks) await s.stop()
})

const post = (s: TestStack, key: string, path: string, json: Record<string, unknown>) =>
  keyFetch(s, key, path, { method: 'POST', json })
const job = { model: 'svc/wan-2.1-video', prompt: 'waves on a harbour', duration: '5s' }

async function pollUntilDone(s: TestStack, key: string, id: string): Promise<Response> {
  // No deadline of its own: the test's time limit is the hang guard.
  for (;;) {
    const response = await post(s, key, '/v1/video/retrieve', { id })
    const json = response.headers.get('content-type')?.startsWith('application/json')
    if (response.status !== 200 || !json) return response
    const body = (await response.json()) as { status: string }
    expect(body.status).toBe('processing')
    expect(response.headers.get('x-svc-support-reference')).toBeNull() // polls carry the request id only
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_/)
    await Bun.sleep(40)
  }
}

describe('video', () => {
  test('quote: the price at the ask it would clear at, nothing held, request id only', async () => {
    const before = await balances(stack, buyer.accountId)
    const response = await post(stack, buyer.apiKey, '/v1/video/quote', job)
    expect(response.status).toBe(200)
    expect(response.headers.get('x-svc-support-reference')).toBeNull()
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_/)
    expect(await response.json()).toEqual({
      object: 'video.quote',
      model: 'wan-2.1-video',
      seconds: 5,
      quoteUsdc: formatMicros(Math.ceil((BURN_5S * 40) / 100)),
      clearingPriceCents: 40,
    })
    expect(await balances(stack, buyer.accountId)).toEqual(before)
  })

  test('queue holds the quote; retrieve answers processing, then the MP4, charged once', async () => {
    const before = await balances(stack, buyer.accountId)
    const queued = await post(stack, buyer.apiKey, '/v1/video/queue', job)
    expect(queued.status).toBe(200)
    expect(queued.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
    expect(queued.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    const body = (await queued.json()) as { id: string; status: string; heldUsdc: string }
    expect(body.status).toBe('queued')
    const cost = Math.ceil((BURN_5S * 40) / 100)
    expect(body.heldUsdc).toBe(formatMicros(cost))
    expect((await balances(stack, buyer.accountId)).held).toBe(cost)

    const media = await pollUntilDone(stack, buyer.apiKey, body.id)
    expect(media.status).toBe(200)
    expect(media.headers.get('content-type')).toBe('video/mp4')
    expect(media.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    expect(media.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
    const bytes = new Uint8Array(await media.arrayBuffer())
    expect(new TextDecoder().decode(bytes.subarray(4, 8))).toBe('ftyp')
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(cost)
    expect(after.held).toBe(0)

    // retrieving again gives the media again and charges nothing more
    const again = await post(stack, buyer.apiKey, '/v1/video/retrieve', { id: body.id })
    expect(again.headers.get('content-type')).toBe('video/mp4')
    expect(again.headers.get('x-svc-cost-usdc')).toBeNull()
    expect(await balances(stack, buyer.accountId)).toEqual(after)
  })

  test('a job the supplier fails is refunded to the micro-USDC and answers 410 from then on', async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'job_fail', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const { id } = (await (await post(stack, buyer.apiKey, '/v1/video/queue', job)).json()) as { id: string }
    expect((await balances(stack, buyer.accountId)).held).toBeGreaterThan(0)
    const failed = await pollUntilDone(stack, buyer.apiKey, id)
    expect(failed.status).toBe(410)
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe('video_refunded')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    const later = await post(stack, buyer.apiKey, '/v1/video/retrieve', { id })
    expect(later.status).toBe(410)
  })

  test('another account cannot see a job; an unknown id is 404', async () => {
    const { id } = (await (await post(stack, buyer.apiKey, '/v1/video/queue', job)).json()) as { id: string }
    const other = await fundedBuyer(stack)
    expect((await post(stack, other.apiKey, '/v1/video/retrieve', { id })).status).toBe(404)
    expect((await post(stack, buyer.apiKey, '/v1/video/retrieve', { id: 'vid_nope' })).status).toBe(404)
    await pollUntilDone(stack, buyer.apiKey, id)
  })

  test('quote answers 503 keys_busy when every eligible key is in flight', async () => {
    const busy = await startStack({ sim: { videoJobMs: 60_000 } })
    stacks.push(busy)
    await simOffer(busy, 40, { maxInFlight: 1 })
    const who = await fundedBuyer(busy)
    expect((await post(busy, who.apiKey, '/v1/video/queue', job)).status).toBe(200)
    const quote = await post(busy, who.apiKey, '/v1/video/quote', job)
    expect(quote.status).toBe(503)
    expect(((await quote.json()) as { error: { code: string } }).error.code).toBe('keys_busy')
    expect(quote.headers.get('x-svc-support-reference')).toBeNull()
  })

  test('a job not retrieved before it expires: its hold comes back, its media answers 410', async () => {
    // The jobs' clock runs ahead when the test says so: past the TTL without waiting it out.
    let ahead = 0
    const brief = await startStack({
      sim: { videoJobMs: 60_000 },
      tune: (config) => {
        config.inference.videoClock = () => Date.now() + ahead
      },
    })
    stacks.push(brief)
    await simOffer(brief, 40)
    const who = await fundedBuyer(brief)
    const before = await balances(brief, who.accountId)
    const { id } = (await (await post(brief, who.apiKey, '/v1/video/queue', job)).json()) as { id: string }
    // Within its TTL the job is still running (the supplier takes a minute).
    const running = await post(brief, who.apiKey, '/v1/video/retrieve', { id })
    expect(running.status).toBe(200)
    expect(((await running.json()) as { status: string }).status).toBe('processing')
    expect((await balances(brief, who.accountId)).held).toBeGreaterThan(0)
    ahead = brief.config.inference.videoJobTtlMs + 1
    const expired = await post(brief, who.apiKey, '/v1/video/retrieve', { id })
    expect(expired.status).toBe(410)
    expect(((await expired.json()) as { error: { code: string } }).error.code).toBe('video_expired')
    expect(await balances(brief, who.accountId)).toEqual(before)
    expect(await auditAll(brief.store, brief.keys)).toEqual([])
  })

  for (const [why, body, code] of [
    ['a duration the model does not offer', { ...job, duration: '7s' }, 'invalid_duration'],
    ['a malformed duration', { ...job, duration: 'long' }, 'invalid_request'],
    ['an image model', { ...job, model: 'flux-dev' }, 'model_not_video'],
    ['no prompt', { model: job.model, duration: '5s' }, 'invalid_request'],
  ] as [string, Record<string, unknown>, string][]) {
    test(`${why}: 400 ${code}`, async () => {
      const response = await post(stack, buyer.apiKey, '/v1/video/queue', body)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code)
    })
  }

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
