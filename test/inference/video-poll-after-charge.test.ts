// A poll that read a video job as queued, and heard the supplier fail it only after another poll
// had its MP4 and charged it: the job's outcome follows the money. That poll is not told the job
// was refunded, the job stays charged, and its request's record says so.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../src/records/support-reference.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { type GatedVideoSupplier, gatedVideoSupplier, videoFailed, videoMp4 } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: GatedVideoSupplier
let buyer: TestAccount

beforeAll(async () => {
  // The first poll's answer waits for the gate, and is that the job failed; every other poll gets the MP4.
  supplier = gatedVideoSupplier((n) => (n === 1 ? videoFailed() : videoMp4()))
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  await postOffer(stack, supplier.url, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})

const post = (path: string, json: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })

describe('a video job failed by the supplier after another poll charged it', () => {
  test('the slow poll is not told refunded; the job and its record stay charged', async () => {
    const queued = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
    expect(queued.status).toBe(200)
    const reference = queued.headers.get(SUPPORT_REFERENCE_HEADER)!
    const { id } = (await queued.json()) as { id: string }
    const slow = post('/v1/video/retrieve', { id })
    await until(() => supplier.retrieves() === 1)
    const media = await post('/v1/video/retrieve', { id })
    expect(media.headers.get('content-type')).toBe('video/mp4')
    expect(media.headers.get('x-svc-cost-usdc')).not.toBeNull()
    await media.arrayBuffer()
    const charged = await balances(stack, buyer.accountId)
    expect(charged.held).toBe(0)

    supplier.openGate()
    const late = await slow
    const text = await late.text()
    expect(late.status, text).not.toBe(500)
    if (late.status !== 200) {
      const { error } = JSON.parse(text) as { error: { code: string; message: string } }
      expect(error.code).not.toBe('video_refunded')
      expect(error.message).not.toContain('refunded')
      expect(error.message).not.toContain('nothing was charged')
    }
    expect(await balances(stack, buyer.accountId)).toEqual(charged)

    // The job's own outcome: its MP4 again, never a 410 refunded.
    const again = await post('/v1/video/retrieve', { id })
    expect(again.status).toBe(200)
    expect(again.headers.get('content-type')).toBe('video/mp4')
    await again.arrayBuffer()
    const record = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
    expect(((await record.json()) as { status: string }).status).toBe('completed')
    expect(await balances(stack, buyer.accountId)).toEqual(charged)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
