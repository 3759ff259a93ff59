// An event id of the right shape whose Stream id Redis cannot parse (past 64 bits) is no such
// event: a 404 to replay, never a 500.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import type { TestStack } from '../helpers/stack.ts'
import { registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
const receiver = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
})
afterAll(async () => {
  await stack.stop()
  await receiver.stop()
})

test('replaying an event id past 64 bits is a 404, not a 500; a page before one is a 400', async () => {
  const buyer = await fundedBuyer(stack)
  const created = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['key.budget.80'],
  })
  expect(created.status).toBe(201)
  const { id } = (await created.json()) as { id: string }
  const replay = await keyFetch(
    stack,
    buyer.apiKey,
    `/v1/agent/webhooks/${id}/deliveries/evt_99999999999999999999999-0/replay`,
    { method: 'POST' },
  )
  expect(replay.status).toBe(404)
  const page = await keyFetch(stack, buyer.apiKey, '/v1/agent/events?before=99999999999999999999999-0')
  expect(page.status).toBe(400)
})
