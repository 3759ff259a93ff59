// A video job whose hold the reaper took while a poll was still reading its MP4: another poll, past
// the job's expiry, ends it as expired and tells the buyer nothing was charged. The slow poll's
// MP4 then arrives: the job's first outcome stands, so it is not charged late, nor delivered.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../src/records/support-reference.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { type GatedVideoSupplier, gatedVideoSupplier, videoMp4 } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: GatedVideoSupplier
let buyer: TestAccount
// The jobs' clock runs ahead when the test says so: past the TTL without waiting it out.
let ahead = 0

beforeAll(async () => {
  // The first poll's MP4 waits for the gate.
  supplier = gatedVideoSupplier(videoMp4)
  stack = await startStack({
    env: { SVC_OFFER_COOLDOWN_MS: '0', SVC_REAP_INTERVAL_MS: '50' },
    tune: (config) => {
      config.inference.videoClock = () => Date.now() + ahead
    },
  })
  await postOffer(stack, supplier.url, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})

const post = (path: string, json: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })

describe('a video job reaped, then expired by one poll while another reads its MP4', () => {
  test('the slow poll is not charged late: the job, the money and the record say expired', async () => {
    const before = await balances(stack, buyer.accountId)
    const queued = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
    expect(queued.status).toBe(200)
    const reference = queued.headers.get(SUPPORT_REFERENCE_HEADER)!
    const { id } = (await queued.json()) as { id: string }
    const slow = post('/v1/video/retrieve', { id })
    await until(() => supplier.retrieves() === 1)

    // The lease runs out (a replica's renewal stopped): the reaper gives the hold back.
    const [attemptId] = (await stack.store.zrange(stack.keys.leases, 0, -1)) as string[]
    await until(async () => {
      await stack.store.call('ZADD', stack.keys.leases, 'XX', '0', attemptId!)
      return (await balances(stack, buyer.accountId)).held === 0
    })
    expect(await balances(stack, buyer.accountId)).toEqual(before)

    // Past its expiry, another poll ends the job: nothing was charged.
    ahead = stack.config.inference.videoJobTtlMs + 1
    const expired = await post('/v1/video/retrieve', { id })
    expect(expired.status).toBe(410)
    const told = (await expired.json()) as { error: { code: string; message: string } }
    expect(told.error.code).toBe('video_expired')
    expect(told.error.message).toContain('nothing was charged')

    supplier.openGate()
    const late = await slow
    const text = await late.text()
    expect(late.status, text).toBe(410)
    expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe('video_expired')
    expect(await balances(stack, buyer.accountId)).toEqual(before)

    const again = await post('/v1/video/retrieve', { id })
    expect(again.status).toBe(410)
    await again.arrayBuffer()
    const record = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
    expect(((await record.json()) as { status: string }).status).not.toBe('completed')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
