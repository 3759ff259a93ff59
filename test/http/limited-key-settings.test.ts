// A key with a spending limit is an agent's budget, not the account's owner: it reads the account's
// settings but changes none of them. Its PATCH of the max price and its registering, removing or
// replaying to webhook endpoints are 403 key_limit_binding with Redis unchanged (raising the max
// price would raise what every key pays; removing an endpoint would silence the owner's budget
// alerts; a replay sends to the owner's endpoint again); a key without a limit does all of them.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch, mintKey, waitForLastUsed } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { registerWebhook, startWebhookStack } from '../webhooks/helpers.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startWebhookStack()
})
afterAll(() => stack.stop())

const hook = { url: 'http://127.0.0.1:9/hook', events: ['balance.low'], balanceThresholdUsdc: '1' }

async function expectBinding(response: Response) {
  expect(response.status).toBe(403)
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe('key_limit_binding')
}

test("a limited key reads the account's max price and webhooks but changes neither", async () => {
  const owner = await fundedBuyer(stack)
  const agent = await mintKey(stack, owner.apiKey, { name: 'agent', limitUsdc: '1' })
  const registered = await registerWebhook(stack, owner.apiKey, '/v1/agent', hook)
  expect(registered.status).toBe(201)
  const { id } = (await registered.json()) as { id: string }
  await waitForLastUsed(stack, agent.apiKey)

  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  await expectBinding(
    await keyFetch(stack, agent.apiKey, '/v1/agent/max-price', {
      method: 'PATCH',
      json: { maxPriceCents: 80 },
    }),
  )
  await expectBinding(await registerWebhook(stack, agent.apiKey, '/v1/agent', hook))
  await expectBinding(await keyFetch(stack, agent.apiKey, `/v1/agent/webhooks/${id}`, { method: 'DELETE' }))
  await expectBinding(
    await keyFetch(stack, agent.apiKey, `/v1/agent/webhooks/${id}`, {
      method: 'PATCH',
      json: { disabled: true },
    }),
  )
  await expectBinding(
    await keyFetch(stack, agent.apiKey, `/v1/agent/webhooks/${id}/deliveries/evt_unknown/replay`, {
      method: 'POST',
    }),
  )
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)

  const listed = (await (await keyFetch(stack, agent.apiKey, '/v1/agent/webhooks')).json()) as {
    webhooks: { id: string }[]
  }
  expect(listed.webhooks.map((w) => w.id)).toEqual([id])
  expect((await keyFetch(stack, agent.apiKey, '/v1/agent/me')).status).toBe(200)
})

test('a key without a limit changes both', async () => {
  const owner = await fundedBuyer(stack)
  const patched = await keyFetch(stack, owner.apiKey, '/v1/agent/max-price', {
    method: 'PATCH',
    json: { maxPriceCents: 80 },
  })
  expect(patched.status).toBe(200)
  expect(await stack.store.hget(stack.keys.account(owner.accountId), 'maxPriceCents')).toBe('80')
  const registered = await registerWebhook(stack, owner.apiKey, '/v1/agent', hook)
  expect(registered.status).toBe(201)
  const { id } = (await registered.json()) as { id: string }
  const replayed = await keyFetch(
    stack,
    owner.apiKey,
    `/v1/agent/webhooks/${id}/deliveries/evt_unknown/replay`,
    {
      method: 'POST',
    },
  )
  expect(replayed.status).toBe(404)
  expect((await keyFetch(stack, owner.apiKey, `/v1/agent/webhooks/${id}`, { method: 'DELETE' })).status).toBe(
    200,
  )
})
