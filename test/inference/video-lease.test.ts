// A video job's hold must last as long as the job: its lease (the reaper's deadline, counted from
// admission) may not end before the job's own expiry (counted, before the fix, from when the
// supplier's queue call returned). In between, the reaper gives the hold back while the job still
// answers: its MP4 is then charged late, out of whatever balance is left, the rest written off.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { videoQuote } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: Server<undefined>
let buyer: TestAccount
let openGate: (() => void) | null = null

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (request) => {
      if (new URL(request.url).pathname === '/video/quote') return videoQuote()
      // The queue call returns when the test says: a supplier that takes its time to accept.
      await new Promise<void>((resolve) => {
        openGate = resolve
      })
      return Response.json({ model: 'wan-2.1-video', queue_id: 'q-1' })
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

/** The one lease in the store: its attempt and deadline (ms). */
async function onlyLease(): Promise<{ attemptId: string; deadline: number }> {
  const [attemptId, deadline] = (await stack.store.call(
    'ZRANGE',
    stack.keys.leases,
    0,
    -1,
    'WITHSCORES',
  )) as string[]
  return { attemptId: attemptId!, deadline: Number(deadline) }
}

describe('a video job does not outlive its hold', () => {
  test('the lease lasts at least until the job expires', async () => {
    const ttl = stack.config.inference.videoJobTtlMs
    const queued = keyFetch(stack, buyer.apiKey, '/v1/video/queue', {
      method: 'POST',
      json: { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' },
    })
    await until(async () => (await balances(stack, buyer.accountId)).held > 0)
    const admitted = await onlyLease()
    // The supplier accepts the job a little after admission, as any real call does.
    await until(() => Date.now() > admitted.deadline - ttl + 20)
    // Opened once the queue call has reached the supplier: admission comes before it.
    await until(() => openGate !== null)
    openGate!()
    const response = await queued
    expect(response.status).toBe(200)
    const { id } = (await response.json()) as { id: string }
    const expiresAt = Number(await stack.store.hget(stack.keys.videoJob(id), 'expiresAt'))
    const lease = await onlyLease()
    expect(lease.attemptId).toBe(admitted.attemptId)
    expect(lease.deadline).toBeGreaterThanOrEqual(expiresAt)
  })
})
