// Event ids are unique across owners (Standard Webhooks: one id names one message): two owners'
// streams can hold entries of the same stream id (written in the same millisecond), and a
// receiver serving both at one URL dedups by id. Each id carries its owner's mark, keeps the
// stream id for ordering, and is the same in the body and svc-webhook-id on every try and replay;
// replay takes the owner's own id (or the same entry's id without a mark) and refuses another
// owner's or a malformed one with a 404 in the error shape, Redis unchanged; the listing finds an
// event's tries logged under either id. The entries are written with explicit stream ids, so the
// collision is certain, not a matter of timing.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { accountOwner } from '../../src/webhooks/events.ts'
import { createAccount, keyFetch, type TestAccount, waitForLastUsed } from '../helpers/accounts.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { type Received, registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
const receiver = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
})
afterAll(async () => {
  await stack.stop()
  await receiver.stop()
})

interface Owned {
  account: TestAccount
  endpointId: string
}

/** An account with one endpoint at the shared receiver, for key.budget.80. */
async function owned(): Promise<Owned> {
  const account = await createAccount(stack)
  const created = await registerWebhook(stack, account.apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['key.budget.80'],
  })
  expect(created.status).toBe(201)
  return { account, endpointId: ((await created.json()) as { id: string }).id }
}

/** An event entry of this stream id in the account's stream, its owner flagged for delivery. */
async function writeEntry({ account }: Owned, streamId: string): Promise<void> {
  const owner = accountOwner(account.accountId)
  const at = streamId.split('-')[0]!
  const data = JSON.stringify({ keyId: `key-of-${account.accountId}` })
  await stack.store.xadd(
    stack.keys.webhookEvents(owner),
    streamId,
    'type',
    'key.budget.80',
    'at',
    at,
    'data',
    data,
  )
  await stack.store.sadd(stack.keys.webhookDue(owner), owner)
}

const bodyOf = (r: Received) => JSON.parse(r.body) as { id: string; data: { keyId: string } }
const of = ({ account }: Owned) =>
  receiver.received.filter((r) => bodyOf(r).data.keyId === `key-of-${account.accountId}`)

/** Two owners' entries of one stream id, each delivered once: the tries each got. */
async function sameEntry(streamId: string): Promise<[Owned, Owned, Received, Received]> {
  const a = await owned()
  const b = await owned()
  await writeEntry(a, streamId)
  await writeEntry(b, streamId)
  await until(() => of(a).length === 1 && of(b).length === 1)
  return [a, b, of(a)[0]!, of(b)[0]!]
}

test("two owners' events of one stream id get different ids, each the same in the header and the body", async () => {
  const [a, b, toA, toB] = await sameEntry('1700000000000-1')
  expect(toA.id).not.toBe(toB.id)
  expect(bodyOf(toA).id).toBe(toA.id)
  expect(bodyOf(toB).id).toBe(toB.id)
  // The stream id stays readable first, for ordering within the owner.
  expect(toA.id).toMatch(/^evt_1700000000000-1_[0-9a-f]{16}$/)
  expect(toB.id).toMatch(/^evt_1700000000000-1_[0-9a-f]{16}$/)
  // The owner's listing names each event by the id it was delivered with, its try found.
  for (const [owner, delivered] of [
    [a, toA],
    [b, toB],
  ] as const) {
    const listed = (await (await keyFetch(stack, owner.account.apiKey, '/v1/agent/events')).json()) as {
      data: { id: string; deliveries: { state: string }[] }[]
    }
    expect(listed.data.map((event) => event.id)).toEqual([delivered.id])
    await until(async () => {
      const page = (await (await keyFetch(stack, owner.account.apiKey, '/v1/agent/events')).json()) as {
        data: { deliveries: { state: string }[] }[]
      }
      return page.data[0]?.deliveries[0]?.state === 'delivered'
    })
  }
})

test("replay takes the owner's own id and refuses another owner's or a malformed one, Redis unchanged", async () => {
  const [a, b, toA, toB] = await sameEntry('1700000000001-7')
  const replay = (id: string) =>
    keyFetch(
      stack,
      a.account.apiKey,
      `/v1/agent/webhooks/${a.endpointId}/deliveries/${encodeURIComponent(id)}/replay`,
      { method: 'POST' },
    )

  const sent = await replay(toA.id)
  expect(sent.status).toBe(200)
  expect(((await sent.json()) as { eventId: string }).eventId).toBe(toA.id)
  await until(() => of(a).length === 2)
  expect(of(a)[1]!.id).toBe(toA.id)
  expect(bodyOf(of(a)[1]!).id).toBe(toA.id)

  // The same entry's id without a mark (as ids were first given) names the owner's own entry.
  const unmarked = await replay('evt_1700000000001-7')
  expect(unmarked.status).toBe(200)
  await until(() => of(a).length === 3)
  expect(of(a)[2]!.id).toBe(toA.id)

  await waitForLastUsed(stack, a.account.apiKey)
  await until(
    async () => (await stack.store.scard(stack.keys.webhookDue(accountOwner(a.account.accountId)))) === 0,
  )
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const mark = toA.id.slice(-16)
  for (const id of [
    toB.id,
    `${toA.id}0`,
    `evt_1700000000001-7_${mark.slice(1)}`,
    `evt_1700000000001-7_${'g'.repeat(16)}`,
    `evt_1700000000001-7_A${mark.slice(1)}`,
    `evt_1700000000001-7-${mark}`,
    `evt_1700000000001-7__${mark}`,
    `evt_99999999999999999999999-0_${mark}`,
  ]) {
    const refused = await replay(id)
    expect({ id, status: refused.status }).toEqual({ id, status: 404 })
    const body = (await refused.json()) as { error: { code: string; message: string } }
    expect(body.error.code).toBe('event_not_found')
    expect(typeof body.error.message).toBe('string')
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  expect(of(a)).toHaveLength(3)
  expect(of(b)).toHaveLength(1)
})

test("a delivery log's record of the unmarked id is the same event's in the owner's listing", async () => {
  const c = await owned()
  await writeEntry(c, '1700000000002-3')
  await until(() => of(c).length === 1)
  const owner = accountOwner(c.account.accountId)
  const logged = async () =>
    (await stack.store.lrange(stack.keys.webhookLog(owner, c.endpointId), 0, -1)).length === 1
  await until(logged)
  const record = { eventId: 'evt_1700000000002-3', type: 'key.budget.80', attempt: 4, at: Date.now() }
  await stack.store
    .multi()
    .lpush(
      stack.keys.webhookLog(owner, c.endpointId),
      JSON.stringify({ ...record, ok: false, httpStatus: 500, error: 'HTTP 500', replay: false }),
    )
    .exec()
  const listed = (await (await keyFetch(stack, c.account.apiKey, '/v1/agent/events')).json()) as {
    data: { id: string; deliveries: { state: string; attempt: number | null; httpStatus: number | null }[] }[]
  }
  expect(listed.data).toHaveLength(1)
  expect(listed.data[0]!.id).toBe(of(c)[0]!.id)
  expect(listed.data[0]!.deliveries).toEqual([
    expect.objectContaining({ state: 'failing', attempt: 4, httpStatus: 500 }),
  ])
})
