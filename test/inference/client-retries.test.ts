// What the OpenAI SDK does with our answers, left at its default retries: a refusal that waiting
// cannot cure is sent once, and every answer carries the request id the SDK exposes.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack()
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

/** The SDK with its default retries, counting every request it sends. */
function countingClient() {
  const sent = { count: 0 }
  const client = new OpenAI({
    apiKey: buyer.apiKey,
    baseURL: `${stack.url}/v1`,
    fetch: (input, init) => {
      sent.count++
      return fetch(input, init)
    },
  })
  return { client, sent }
}

const messages = [{ role: 'user' as const, content: 'hello' }]

test('no_eligible_supply is not retried: one request, x-should-retry false', async () => {
  const offer = await simOffer(stack, 70) // above the default max of 50
  const { client, sent } = countingClient()
  const error = await client.chat.completions
    .create({ model: 'llama-3.3-70b', messages, max_tokens: 5 })
    .catch((e: unknown) => e)
  expect(error).toBeInstanceOf(OpenAI.APIError)
  expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
  expect((error as { code?: string }).code).toBe('no_eligible_supply')
  expect((error as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false')
  expect(sent.count).toBe(1)
  await keyFetch(stack, null, `/admin/v1/offers/${offer.id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${stack.config.adminToken}` },
  })
})

test('the SDK reads the request id: _request_id on answers and request_id on errors', async () => {
  await simOffer(stack, 40)
  const { client } = countingClient()
  const completion = await client.chat.completions.create({ model: 'llama-3.3-70b', messages, max_tokens: 5 })
  expect(completion._request_id).toMatch(/^req_[0-9a-f]{24}$/)
  const models = await client.models.list()
  expect(models.data.length).toBeGreaterThan(0)
  const error = (await client.chat.completions
    .create({ model: 'no-such-model', messages })
    .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>
  expect(error.requestID).toMatch(/^req_[0-9a-f]{24}$/)
})
