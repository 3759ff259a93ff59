// A video job that was charged (its MP4 delivered once) stays charged in what the buyer is told:
// a supplier that later fails or forgets the job must not make the gateway answer "refunded in
// full" or "nothing was charged", which a client books as money come back.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { auditAll } from '../../src/cli/audit.ts'
import { TINY_MP4 } from '../../src/sim/video.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { videoQuote } from '../helpers/video.ts'

let stack: TestStack
let supplier: Server<undefined>
let buyer: TestAccount
/** What the supplier answers a retrieve with. */
let retrieveAnswer: () => Response = () =>
  new Response(TINY_MP4, { headers: { 'content-type': 'video/mp4' } })

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: (request) => {
      const path = new URL(request.url).pathname
      if (path === '/video/quote') return videoQuote()
      return path === '/video/queue'
        ? Response.json({ model: 'wan-2.1-video', queue_id: crypto.randomUUID() })
        : retrieveAnswer()
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

/** A job queued and retrieved once: its MP4 delivered and charged. */
async function chargedJob(): Promise<{ id: string; after: Awaited<ReturnType<typeof balances>> }> {
  retrieveAnswer = () => new Response(TINY_MP4, { headers: { 'content-type': 'video/mp4' } })
  const queued = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
  expect(queued.status).toBe(200)
  const { id } = (await queued.json()) as { id: string }
  const media = await post('/v1/video/retrieve', { id })
  expect(media.headers.get('content-type')).toBe('video/mp4')
  expect(media.headers.get('x-svc-cost-usdc')).not.toBeNull()
  await media.arrayBuffer()
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  return { id, after }
}

describe('a charged video job is never reported refunded', () => {
  test('the supplier failing a later retrieve: not 410 video_refunded, nothing moves', async () => {
    const { id, after } = await chargedJob()
    retrieveAnswer = () => Response.json({ error: 'boom' }, { status: 500 })
    const again = await post('/v1/video/retrieve', { id })
    const { error } = (await again.json()) as { error: { code: string; message: string } }
    expect(error.code).not.toBe('video_refunded')
    expect(error.message).not.toContain('refunded')
    expect(await balances(stack, buyer.accountId)).toEqual(after)
  })

  test('the supplier forgetting the job: 410, without saying nothing was charged', async () => {
    const { id, after } = await chargedJob()
    retrieveAnswer = () => Response.json({ error: 'not found' }, { status: 404 })
    const again = await post('/v1/video/retrieve', { id })
    expect(again.status).toBe(410)
    const { error } = (await again.json()) as { error: { code: string; message: string } }
    expect(error.message).not.toContain('nothing was charged')
    expect(await balances(stack, buyer.accountId)).toEqual(after)
  })

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
