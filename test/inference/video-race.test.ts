// Two polls of one video job racing, the supplier answering them differently (a hostile or flaky
// supplier): one poll is told the job failed (refunded in full), the other gets the MP4 after the
// refund committed. The job ends once: the late MP4 is not charged, and its poll gets the job's
// outcome, not a 500.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { auditAll } from '../../src/cli/audit.ts'
import { TINY_MP4 } from '../../src/sim/video.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: Server<undefined>
let buyer: TestAccount
let retrieves = 0
let openGate: () => void = () => {}

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (request) => {
      if (new URL(request.url).pathname === '/video/queue')
        return Response.json({ model: 'wan-2.1-video', queue_id: 'q-1' })
      retrieves += 1
      // The first poll's MP4 waits for the gate; the second poll is told the job failed.
      if (retrieves === 1) {
        await new Promise<void>((resolve) => {
          openGate = resolve
        })
        return new Response(TINY_MP4, { headers: { 'content-type': 'video/mp4' } })
      }
      return Response.json({ error: 'failed' }, { status: 500 })
    },
  })
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const post = (path: string, json: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })

describe('racing polls of one video job', () => {
  test('an MP4 that arrives after the refund: not charged, answered as refunded, never a 500', async () => {
    const before = await balances(stack, buyer.accountId)
    const queued = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
    const { id } = (await queued.json()) as { id: string }
    const slow = post('/v1/video/retrieve', { id })
    await until(() => retrieves === 1)
    const failed = await post('/v1/video/retrieve', { id })
    expect(failed.status).toBe(410)
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe('video_refunded')
    openGate()
    const late = await slow
    const text = await late.text()
    expect(late.status, text).toBe(410)
    expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe('video_refunded')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
