// A video job whose hold the reaper took: one poll hears the supplier fail (or lose) it and ends it
// uncharged, while another poll, its MP4 arrived, had read the job still queued and goes on to
// clear it late. Writes are paused in Redis so the two scripts queue up in the order the test
// sets: whichever runs first decides, and the other poll answers it. The end first: the late clear
// finds the attempt ended for good (410, nothing charged, no MP4). The clear first: the end finds
// it charged and answers with the MP4. The job, the money and the request's record agree.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { auditAll } from '../../src/cli/audit.ts'
import { parseMicros } from '../../src/money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../src/records/support-reference.ts'
import { TINY_MP4 } from '../../src/sim/video.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { watchCommands } from '../helpers/monitor.ts'
import { ownRedis, startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { videoQuote } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

// The file pauses its server's writes: a server (or Cluster) of its own.
await ownRedis({ like: 'run' })

let stack: TestStack
let supplier: Server<undefined>
let buyer: TestAccount
let queued = 0
/** Each job's retrieves so far, the gates its first two wait on, and what the second answers. */
const retrieves = new Map<string, number>()
const gates = new Map<string, () => void>()
let secondAnswers = 500
// The reaper and the lease renewer run only when the test says (config.market.every).
const timers: { periodMs: number; run: () => unknown }[] = []

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (request) => {
      const body = (await request.json()) as { queue_id?: string }
      if (new URL(request.url).pathname === '/video/quote') return videoQuote()
      if (new URL(request.url).pathname === '/video/queue') {
        queued += 1
        return Response.json({ model: 'wan-2.1-video', queue_id: `q-${queued}` })
      }
      const queueId = body.queue_id!
      const n = (retrieves.get(queueId) ?? 0) + 1
      retrieves.set(queueId, n)
      if (n <= 2)
        await new Promise<void>((resolve) => {
          gates.set(`${queueId}#${n}`, resolve)
        })
      // The second poll hears the job failed (500) or gone (404); every other gets the MP4.
      if (n === 2) return Response.json({ error: 'no video' }, { status: secondAnswers })
      return new Response(TINY_MP4, { headers: { 'content-type': 'video/mp4' } })
    },
  })
  stack = await startStack({
    env: { SVC_OFFER_COOLDOWN_MS: '0' },
    tune: (config) => {
      config.market.every = (periodMs, run) => {
        const timer = { periodMs, run }
        timers.push(timer)
        return () => {
          timers.splice(timers.indexOf(timer), 1)
        }
      }
    },
  })
  await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const post = (path: string, json: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })

/**
 * Queues a job and starts two polls, both waiting at the supplier's gates (each read the job
 * queued): the MP4's and the failure's; then the reaper takes the job's hold (its lease ran out, a
 * replica's renewal stopped).
 */
async function twoPollsOnAReapedJob(answer: 404 | 500) {
  secondAnswers = answer
  const queuedJob = await post('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
  expect(queuedJob.status).toBe(200)
  const reference = queuedJob.headers.get(SUPPORT_REFERENCE_HEADER)!
  const { id } = (await queuedJob.json()) as { id: string }
  const queueId = `q-${queued}`
  const withMedia = post('/v1/video/retrieve', { id })
  await until(() => gates.has(`${queueId}#1`))
  const withFailure = post('/v1/video/retrieve', { id })
  await until(() => gates.has(`${queueId}#2`))

  const [attemptId] = (await stack.store.zrange(stack.keys.leases, 0, -1)) as string[]
  const reaper = timers.find((t) => t.periodMs === stack.config.market.reapIntervalMs)!
  await until(async () => {
    await stack.store.call('ZADD', stack.keys.leases, 'XX', '0', attemptId!)
    await reaper.run()
    return (await balances(stack, buyer.accountId)).held === 0
  })
  return {
    id,
    reference,
    withMedia,
    withFailure,
    media: () => gates.get(`${queueId}#1`)!(),
    failure: () => gates.get(`${queueId}#2`)!(),
  }
}

/** Pauses every master's writes (scripts included) until the returned call; reads go on. */
async function pauseWrites(): Promise<() => Promise<void>> {
  const masters = await stack.store.masters()
  await Promise.all(masters.map((m) => m.call('CLIENT', 'PAUSE', '60000', 'WRITE')))
  return async () => {
    await Promise.all(masters.map((m) => m.call('CLIENT', 'UNPAUSE')))
  }
}

/** Clients whose script waits out the pause. */
async function scriptsWaiting(): Promise<number> {
  const masters = await stack.store.masters()
  const lists = (await Promise.all(masters.map((m) => m.call('CLIENT', 'LIST')))) as string[]
  return lists
    .flatMap((list) => list.split('\n'))
    .filter((line) => /\bflags=\S*b/.test(line) && /\bcmd=(fcall|evalsha|eval)\b/.test(line)).length
}

async function recordOf(reference: string) {
  const record = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  return (await record.json()) as { status: string; costUsdc: string; errorCode: string | null }
}

async function errorOf(response: Response) {
  const text = await response.text()
  expect(response.status, text).toBe(410)
  return (JSON.parse(text) as { error: { code: string; message: string } }).error
}

describe('a reaped video job: one poll ends it uncharged while another clears its MP4', () => {
  for (const [answer, code, told] of [
    [500, 'video_refunded', 'refunded in full'],
    [404, 'video_expired', 'nothing was charged'],
  ] as const) {
    test(`the end (supplier ${answer}) runs first: the late clear charges nothing, the MP4 is not sent`, async () => {
      const before = await balances(stack, buyer.accountId)
      const job = await twoPollsOnAReapedJob(answer)
      expect(await balances(stack, buyer.accountId)).toEqual(before)

      const key = stack.keys.videoJob(job.id)
      const master = stack.store.masterOf(key)
      const feed = await watchCommands(master ? `redis://${master}` : testRedisUrl())
      const reads = () =>
        feed.seen.filter(([name, arg]) => name!.toLowerCase() === 'hgetall' && arg === key).length
      const resume = await pauseWrites()
      try {
        // The failure: its poll ends the job, its release waiting out the pause.
        job.failure()
        await until(async () => (await scriptsWaiting()) === 1)
        // The MP4: its poll reads the job again, still queued (no outcome is written yet).
        const seen = reads()
        job.media()
        await until(() => reads() > seen)
      } finally {
        await resume()
        feed.stop()
      }

      const ended = await errorOf(await job.withFailure)
      expect(ended.code).toBe(code)
      expect(ended.message).toContain(told)
      const late = await job.withMedia
      expect(late.headers.get('x-svc-cost-usdc')).toBeNull()
      const lateError = await errorOf(late)
      expect(lateError.code).toBe(code)
      expect(lateError.message).toContain(told)
      expect(await balances(stack, buyer.accountId)).toEqual(before)

      expect((await errorOf(await post('/v1/video/retrieve', { id: job.id }))).code).toBe(code)
      const record = await recordOf(job.reference)
      expect(record.status).not.toBe('completed')
      expect(record.errorCode).toBe(code)
      expect(record.costUsdc).toBe('0.000000')
      expect(await balances(stack, buyer.accountId)).toEqual(before)
      expect(await auditAll(stack.store, stack.keys)).toEqual([])
    })
  }

  test('the clear runs first: the end answers the charged job with its MP4', async () => {
    const before = await balances(stack, buyer.accountId)
    const job = await twoPollsOnAReapedJob(500)
    job.media()
    const media = await job.withMedia
    expect(media.status).toBe(200)
    expect(media.headers.get('content-type')).toBe('video/mp4')
    const charged = parseMicros(media.headers.get('x-svc-cost-usdc') ?? '')!
    expect(charged).toBeGreaterThan(0)
    await media.arrayBuffer()

    job.failure()
    const ended = await job.withFailure
    const text = ended.status === 200 ? '' : await ended.text()
    expect(ended.status, text).toBe(200)
    expect(ended.headers.get('content-type')).toBe('video/mp4')
    expect(ended.headers.get('x-svc-cost-usdc')).toBeNull()
    await ended.arrayBuffer()

    const after = await balances(stack, buyer.accountId)
    expect(after.held).toBe(0)
    expect(before.confirmed - after.confirmed).toBe(charged)
    expect(after.spent - before.spent).toBe(charged)
    const record = await recordOf(job.reference)
    expect(record.status).toBe('completed')
    expect(parseMicros(record.costUsdc)).toBe(charged)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
