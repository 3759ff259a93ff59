// Two polls of one video job racing, the supplier answering them differently (a hostile or flaky
// supplier): one poll is told the job failed (refunded in full), the other gets the MP4 after the
// refund committed. The job ends once: the late MP4 is not charged, and its poll gets the job's
// outcome, not a 500.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { type GatedVideoSupplier, gatedVideoSupplier, videoFailed, videoMp4 } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: GatedVideoSupplier
let buyer: TestAccount

beforeAll(async () => {
  // The first poll's MP4 waits for the gate; the second poll is told the job failed.
  supplier = gatedVideoSupplier((n) => (n === 1 ? videoMp4() : videoFailed()))
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

describe('racing polls of one video job', () => {
  test('an MP4 that arrives after the refund: not charged, answered as refunded, never a 500', async () => {
    const before = await balances(stack, buyer.accountId)
    const queued = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
    const { id } = (await queued.json()) as { id: string }
    const slow = post('/v1/video/retrieve', { id })
    await until(() => supplier.retrieves() === 1)
    const failed = await post('/v1/video/retrieve', { id })
    expect(failed.status).toBe(410)
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe('video_refunded')
    supplier.openGate()
    const late = await slow
    const text = await late.text()
    expect(late.status, text).toBe(410)
    expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe('video_refunded')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
