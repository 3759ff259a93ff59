// One owner for each paid call: whatever throws after admission and before the clear (or the stream
// relay) takes over ends the attempt there, released with nothing charged: no lease left renewed
// and no hold left for the reaper to find. The lease is five minutes long, so only the owner's own
// release can explain a hold that is back.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { CatalogStore } from '../../src/catalog/store.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { InferenceService, inferenceCall } from '../../src/inference/service.ts'
import { createLogger } from '../../src/logger.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let service: InferenceService

beforeAll(async () => {
  stack = await startStack({ env: { SVC_LEASE_SECONDS: '300' } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  const logger = createLogger('silent')
  service = new InferenceService({
    store: stack.store,
    keys: stack.keys,
    catalog: new CatalogStore(stack.store, stack.keys),
    config: stack.config,
    logger,
  })
})
afterAll(() => stack.stop())

const BODY = {
  model: 'llama-3.3-70b',
  messages: [{ role: 'user' as const, content: 'hello' }],
  max_tokens: 8,
}
const requester = () => ({ apiKeyDigest: digestApiKey(buyer.apiKey) })

/** Nothing in flight: no lease, nothing held, the market sound. */
async function expectNothingLeft() {
  expect(await stack.store.zcard(stack.keys.leases)).toBe(0)
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}

describe('a throw after admission releases the attempt', () => {
  test('while the answer is shaped (a format that refuses the admitted chat)', async () => {
    const before = await balances(stack, buyer.accountId)
    const call = inferenceCall('req_shape', new AbortController().signal)
    await expect(
      service.answerChat(BODY, requester(), call, () => {
        throw new Error('cannot shape this answer')
      }),
    ).rejects.toThrow('cannot shape this answer')
    await expectNothingLeft()
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(before.confirmed)
    const attempt = await attemptRecord(stack.store, stack.keys.attempt(`${call.supportReference}.1`))
    expect([attempt.state, attempt.errorCode]).toEqual(['released', 'gateway_error'])
  })

  test('while the stream is handed to its relay', async () => {
    const before = await balances(stack, buyer.accountId)
    const call = inferenceCall('req_stream', new AbortController().signal)
    await expect(
      service.answerChat({ ...BODY, stream: true }, requester(), call, () => ({
        buffered: (chat) => chat,
        stream: () => {
          throw new Error('no relay for this stream')
        },
      })),
    ).rejects.toThrow('no relay for this stream')
    await expectNothingLeft()
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(before.confirmed)
  })

  test('while the supplier is called (an upstream key that does not open)', async () => {
    const offer = await simOffer(stack, 35)
    await stack.store.hset(stack.keys.offer(offer.id), 'upstreamKeyEnc', 'not-a-sealed-key')
    const before = await balances(stack, buyer.accountId)
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: BODY,
    })
    expect(response.status).toBe(500)
    await expectNothingLeft()
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(before.confirmed)
    const paused = await adminFetch(stack, `/admin/v1/offers/${offer.id}`, {
      method: 'PATCH',
      json: { status: 'paused' },
    })
    expect(paused.status).toBe(200)
  })
})
