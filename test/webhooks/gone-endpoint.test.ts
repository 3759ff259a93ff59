// A receiver that answers 410 Gone unsubscribes, as Standard Webhooks say: that one try and no
// retry, the endpoint disabled with its reason in GET .../webhooks, later events not sent to it
// (another endpoint of the owner still gets them; listed skipped at this one, in its log too), and
// once its owner enables it again (PATCH .../webhooks/{id}) the next event is sent to it. The whole
// gateway, real Redis, receivers of the test's own on loopback.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { adminFetch, keyFetch } from '../helpers/accounts.ts'
import type { TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'
import { registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
let supplier: TestSupplier
// Were the 410 retried, its retry would be accepted (the script's answers run out at 200).
const gone = startReceiver([410])
const other = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
  supplier = await signInSupplier(stack)
})
afterAll(async () => {
  await stack.stop()
  await gone.stop()
  await other.stop()
})

interface Listed {
  id: string
  disabled: { reason: string; at: number } | null
}
interface ListedEvent {
  id: string
  deliveries: { endpointId: string; state: string; reason: string | null }[]
}

test('a 410 Gone disables the endpoint after one try, until its owner enables it', async () => {
  const register = async (url: string) => {
    const response = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
      url,
      events: ['supplier.suspended', 'supplier.reinstated'],
    })
    expect(response.status).toBe(201)
    return ((await response.json()) as { id: string }).id
  }
  const goneId = await register(gone.url)
  await register(other.url)
  const setStatus = (status: string) =>
    adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, { method: 'PATCH', json: { status } })
  // Every event the other endpoint got is acknowledged: no try left waiting anywhere.
  const settled = async (events: number) => {
    if (other.unique().length < events) return false
    const stream = stack.keys.webhookEvents(`supplier:${supplier.supplierId}`)
    return ((await stack.store.xpending(stream, 'deliver')) as [number])[0] === 0
  }
  const listed = async () => {
    const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/webhooks')
    return ((await response.json()) as { webhooks: Listed[] }).webhooks
  }

  expect((await setStatus('suspended')).status).toBe(200)
  await until(() => settled(1))
  expect(gone.received).toHaveLength(1)
  // Registered in the same millisecond, the two may list in either order: found by id.
  const views = await listed()
  const goneView = views.find((view) => view.id === goneId)
  const otherView = views.find((view) => view.id !== goneId)
  expect(goneView?.disabled?.reason).toBe('answered 410 Gone')
  expect(otherView?.disabled).toBeNull()
  const log = (await (
    await keyFetch(stack, supplier.apiKey, `/v1/supplier/webhooks/${goneId}/deliveries`)
  ).json()) as { deliveries: { httpStatus: number | null }[] }
  expect(log.deliveries.map((record) => record.httpStatus)).toEqual([410])

  // Disabled: a later event goes to the other endpoint only, and is listed skipped at this one.
  expect((await setStatus('active')).status).toBe(200)
  await until(() => settled(2))
  expect(gone.received).toHaveLength(1)
  const skippedId = other.unique()[1]!.id
  const stateAtGone = async () => {
    const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/events')
    const { data } = (await response.json()) as { data: ListedEvent[] }
    const event = data.find((e) => e.id === skippedId)
    return event?.deliveries.find((d) => d.endpointId === goneId)
  }
  const skipped = { state: 'skipped', reason: 'endpoint disabled', attempt: null, httpStatus: null }
  expect(await stateAtGone()).toMatchObject(skipped)
  const logged = (await (
    await keyFetch(stack, supplier.apiKey, `/v1/supplier/webhooks/${goneId}/deliveries`)
  ).json()) as { deliveries: { eventId: string; skipped?: string }[] }
  expect(logged.deliveries[0]).toMatchObject({ eventId: skippedId, skipped: 'endpoint disabled' })

  // Enabled again by its owner: the next event is sent to it.
  const patch = (id: string, json: unknown) =>
    keyFetch(stack, supplier.apiKey, `/v1/supplier/webhooks/${id}`, { method: 'PATCH', json })
  expect((await patch(goneId, { disabled: 'no' })).status).toBe(400)
  expect((await patch('wh_000000000000000000000000', { disabled: false })).status).toBe(404)
  const enabled = await patch(goneId, { disabled: false })
  expect(enabled.status).toBe(200)
  expect(((await enabled.json()) as Listed).disabled).toBeNull()
  expect((await setStatus('suspended')).status).toBe(200)
  await until(() => settled(3))
  const sent = other.unique().map((r) => r.id)
  expect(gone.unique().map((r) => r.id)).toEqual([sent[0] as string, sent[2] as string])
  // Enabled again, the event dropped meanwhile is still listed skipped, not unknown.
  expect(await stateAtGone()).toMatchObject(skipped)
})
