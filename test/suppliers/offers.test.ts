// Self-served offers over real HTTP against the simulated supplier: the upstream key checked
// first and never shown, one key in one offer, own offers only, and every refusal a 4xx that
// changes nothing in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let supplier: TestSupplier

beforeAll(async () => {
  // One supplier posts every offer of this file within a minute: its key checks are not what is tested here.
  stack = await startStack({ env: { SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: '1000' } })
  supplier = await signInSupplier(stack)
})
afterAll(() => stack.stop())

const upstreamKey = () => `venice-${randomUUID()}`
const errorOf = async (response: Response) =>
  ((await response.json()) as { error: { code: string; message: string; type: string } }).error

function post(who: TestSupplier, body: Record<string, unknown>) {
  return keyFetch(stack, who.apiKey, '/v1/supplier/offers', { method: 'POST', json: body })
}

async function postOk(who: TestSupplier, key = upstreamKey(), askCents = 40) {
  const response = await post(who, { upstreamApiKey: key, askCents, capacityDiem: '10' })
  expect(response.status).toBe(201)
  return { ...((await response.json()) as { id: string; status: string; askCents: number }), key }
}

/** A refused request: its status and error code, with Redis exactly as before it. */
async function refused(request: () => Promise<Response>) {
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const response = await request()
  const error = await errorOf(response)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  return { status: response.status, code: error.code, message: error.message }
}

describe('posting an offer', () => {
  test('a key the upstream accepts stands at once, sealed, claimed by digest, on the ladder', async () => {
    const key = upstreamKey()
    const response = await post(supplier, {
      upstreamApiKey: key,
      askCents: 41,
      capacityDiem: '12.5',
      maxInFlight: 8,
    })
    expect(response.status).toBe(201)
    const text = await response.text()
    expect(text).not.toContain(key)
    expect(text).not.toContain(stack.sim.url)
    const offer = JSON.parse(text) as Record<string, unknown>
    expect(offer).toMatchObject({ askCents: 41, status: 'active', capacityDiem: '12.500000', maxInFlight: 8 })
    expect(offer.upstreamBaseUrl).toBeUndefined()
    const id = offer.id as string
    const stored = await stack.store.hgetall(stack.keys.offer(id))
    expect(stored.supplierId).toBe(supplier.supplierId)
    expect(stored.upstreamBaseUrl).toBe(stack.config.upstreamUrl)
    expect(stored.upstreamKeyEnc).toMatch(/^v1:/)
    expect(JSON.stringify(await snapshotKeys(stack.store, stack.keys.prefix))).not.toContain(
      Buffer.from(key).toString('hex'),
    )
    expect(await stack.store.hget(stack.keys.upstreamKeys, digestApiKey(key))).toBe(id)
    expect(await stack.store.sismember(stack.keys.supplierOffers(supplier.supplierId), id)).toBe(1)
    expect(await stack.store.zscore(stack.keys.ladder, id)).not.toBeNull()
  })

  test('a key the upstream refuses is a 400 upstream_key_rejected, in our words only', async () => {
    const key = upstreamKey()
    await fetch(`${stack.sim.url}/sim/keys/${key}`, {
      method: 'PUT',
      body: JSON.stringify({ revoked: true }),
    })
    const result = await refused(() =>
      post(supplier, { upstreamApiKey: key, askCents: 40, capacityDiem: '10' }),
    )
    expect(result).toMatchObject({ status: 400, code: 'upstream_key_rejected' })
    expect(result.message).not.toContain('Authentication failed')
  })

  test('one upstream key stands in one offer; deleting the offer frees it', async () => {
    const first = await postOk(supplier)
    const other = await signInSupplier(stack)
    for (const who of [supplier, other]) {
      expect(
        await refused(() => post(who, { upstreamApiKey: first.key, askCents: 50, capacityDiem: '1' })),
      ).toMatchObject({
        status: 409,
        code: 'upstream_key_in_use',
      })
    }
    const deleted = await keyFetch(stack, supplier.apiKey, `/v1/supplier/offers/${first.id}`, {
      method: 'DELETE',
    })
    expect(deleted.status).toBe(200)
    expect(await stack.store.hexists(stack.keys.upstreamKeys, digestApiKey(first.key))).toBe(0)
    const again = await postOk(other, first.key)
    expect(await stack.store.hget(stack.keys.upstreamKeys, digestApiKey(first.key))).toBe(again.id)
  })

  test('the same new key posted many times at once stands in exactly one offer', async () => {
    const key = upstreamKey()
    const responses = await Promise.all(
      Array.from({ length: 12 }, () =>
        post(supplier, { upstreamApiKey: key, askCents: 45, capacityDiem: '3' }),
      ),
    )
    const statuses = responses.map((r) => r.status).sort()
    expect(statuses.filter((s) => s === 201)).toHaveLength(1)
    expect(statuses.filter((s) => s === 409)).toHaveLength(11)
  })

  test('bad ask, capacity or fields are 400s that change nothing', async () => {
    const bodies: Record<string, unknown>[] = [
      { askCents: 29, capacityDiem: '10' },
      { askCents: 81, capacityDiem: '10' },
      { askCents: 40.5, capacityDiem: '10' },
      { askCents: '40', capacityDiem: '10' },
      { askCents: 40, capacityDiem: '0' },
      { askCents: 40, capacityDiem: '-1' },
      { askCents: 40, capacityDiem: 'ten' },
      { askCents: 40, capacityDiem: '1.0000001' },
      { askCents: 40, capacityDiem: '2000000' },
      { askCents: 40, capacityDiem: '10', upstreamBaseUrl: 'http://evil.example' },
      { askCents: 40, capacityDiem: '10', maxInFlight: 0 },
      { askCents: 40 },
    ]
    for (const body of bodies) {
      const result = await refused(() => post(supplier, { upstreamApiKey: upstreamKey(), ...body }))
      expect({ body, status: result.status }).toEqual({ body, status: 400 })
    }
    expect((await refused(() => post(supplier, { askCents: 40, capacityDiem: '10' }))).status).toBe(400)
    for (const upstreamApiKey of ['key\r\nx-injected: 1', 'two words', '', 'ключ']) {
      const result = await refused(() => post(supplier, { upstreamApiKey, askCents: 40, capacityDiem: '10' }))
      expect({ upstreamApiKey, status: result.status }).toEqual({ upstreamApiKey, status: 400 })
    }
  })
})

describe('own offers only', () => {
  test('list shows only the supplier’s own, never the key', async () => {
    const mine = await signInSupplier(stack)
    const a = await postOk(mine)
    const b = await postOk(mine, upstreamKey(), 60)
    await postOk(await signInSupplier(stack))
    await simOffer(stack, 35)
    const list = (await (await keyFetch(stack, mine.apiKey, '/v1/supplier/offers')).json()) as {
      object: string
      data: { id: string }[]
    }
    expect(list.object).toBe('list')
    expect(list.data.map((o) => o.id)).toEqual([a.id, b.id])
    expect(JSON.stringify(list)).not.toContain(a.key)
  })

  test("someone else's offer, or the operator's, is a 404 to read, change or delete", async () => {
    const theirs = await postOk(await signInSupplier(stack))
    const operators = await simOffer(stack, 44)
    for (const id of [theirs.id, operators.id, 'nope']) {
      for (const [method, json] of [['GET'], ['PATCH', { askCents: 30 }], ['DELETE']] as const) {
        const result = await refused(() =>
          keyFetch(stack, supplier.apiKey, `/v1/supplier/offers/${id}`, {
            method,
            ...(json ? { json } : {}),
          }),
        )
        expect({ id, method, ...result }).toMatchObject({ id, method, status: 404, code: 'offer_not_found' })
      }
    }
  })

  test('a change racing the delete of the same offer is its change or a 404, never a 500', async () => {
    const statuses = new Set<number>()
    for (let round = 0; round < 20; round++) {
      const { id } = await postOk(supplier)
      const path = `/v1/supplier/offers/${id}`
      const changes = [41, 42, 43, 44].map((askCents) =>
        keyFetch(stack, supplier.apiKey, path, { method: 'PATCH', json: { askCents } }),
      )
      const answers = await Promise.all([
        ...changes,
        keyFetch(stack, supplier.apiKey, path, { method: 'DELETE' }),
      ])
      for (const answer of answers) {
        statuses.add(answer.status)
        await answer.arrayBuffer()
      }
    }
    expect([...statuses].filter((status) => status !== 200 && status !== 204 && status !== 404)).toEqual([])
  })

  test('a capacity below the market minimum is refused, posted or changed, and nothing is written', async () => {
    // SVC_MIN_ROUTABLE_MICRO_DIEM's default: 0.01 DIEM.
    const small = await refused(() =>
      post(supplier, { upstreamApiKey: upstreamKey(), askCents: 40, capacityDiem: '0.009999' }),
    )
    expect(small).toMatchObject({ status: 400, code: 'invalid_capacity' })
    expect(small.message).toContain('at least 0.010000 DIEM')
    const offer = await postOk(supplier)
    const path = `/v1/supplier/offers/${offer.id}`
    const shrunk = await refused(() =>
      keyFetch(stack, supplier.apiKey, path, { method: 'PATCH', json: { capacityDiem: '0.000001' } }),
    )
    expect(shrunk).toMatchObject({ status: 400, code: 'invalid_capacity' })
    const least = await post(supplier, { upstreamApiKey: upstreamKey(), askCents: 40, capacityDiem: '0.01' })
    expect(least.status).toBe(201)
  })

  test('ask, capacity and status change; paused leaves the ladder, active returns; deleted is gone', async () => {
    const offer = await postOk(supplier)
    const path = `/v1/supplier/offers/${offer.id}`
    const patch = (json: unknown) => keyFetch(stack, supplier.apiKey, path, { method: 'PATCH', json })
    const changed = await patch({ askCents: 33, capacityDiem: '20' })
    expect(changed.status).toBe(200)
    expect(await changed.json()).toMatchObject({ askCents: 33, capacityDiem: '20.000000', status: 'active' })
    expect(await stack.store.zscore(stack.keys.ladder, offer.id)).not.toBeNull()
    expect((await patch({ status: 'paused' })).status).toBe(200)
    expect(await stack.store.zscore(stack.keys.ladder, offer.id)).toBeNull()
    expect((await patch({ status: 'active' })).status).toBe(200)
    expect(await stack.store.zscore(stack.keys.ladder, offer.id)).not.toBeNull()
    for (const body of [{}, { askCents: 90 }, { status: 'deleted' }, { upstreamApiKey: 'x' }]) {
      expect((await refused(() => patch(body))).status).toBe(400)
    }
    expect((await keyFetch(stack, supplier.apiKey, path, { method: 'DELETE' })).status).toBe(200)
    expect(await stack.store.zscore(stack.keys.ladder, offer.id)).toBeNull()
    expect((await keyFetch(stack, supplier.apiKey, path)).status).toBe(404)
    expect((await patch({ askCents: 40 })).status).toBe(404)
  })
})
