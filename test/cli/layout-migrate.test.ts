// `svc-gateway layout` and `layout migrate apart` on a real market: a one-slot gateway serves real
// traffic (buyers funded by operator credits and by payments, paid requests buffered and streamed,
// suppliers' offers filled, an operator's offer, a payout asked for), is stopped, and the market is
// moved apart: refused (exit 1, nothing changed) while the replica is seen or a request is in
// flight, stopped part-way twice as a kill would stop it (once with a key left on both sides), and
// finished by running it again. A gateway started apart then answers every balance, offer, key,
// request record, earning and total as before, the audit of every slot is clean, and paid
// requests work. On a single Redis and, under `npm run test:cluster`, on a Cluster.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import OpenAI from 'openai'
import { MigrationStopped, migrateApart } from '../../src/cli/migrate-apart.ts'
import { PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { startGateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/logger.ts'
import { marketSteps } from '../../src/market/steps.ts'
import { ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { PayoutStore } from '../../src/payouts/store.ts'
import { ACCOUNT_TABLE, keyspace } from '../../src/redis/keys.ts'
import { claimLayout, LayoutMigratingError } from '../../src/redis/layout.ts'
import { adminFetch, createAccount, keyFetch, settledPayment, type TestAccount } from '../helpers/accounts.ts'
import { runCli } from '../helpers/cli.ts'
import { admitRequest } from '../helpers/market.ts'
import { snapshotKeys, startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let gatewayStopped = false
const stopGateway = async () => {
  gatewayStopped = true
  await stack.gateway.stop()
}
let env: Record<string, string>
const cli = (...args: string[]) => runCli(args, env)
const model = 'svc/llama-3.3-70b'
const messages = [{ role: 'user' as const, content: 'Tell me about markets.' }]

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 }, env: { SVC_FEE_BPS: '500' } })
  env = {
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: stack.config.redisPrefix,
    SVC_MASTER_KEY: Buffer.from(stack.config.masterKey).toString('hex'),
  }
})
afterAll(async () => {
  if (!gatewayStopped) await stack.gateway.stop()
  await stack.sim.stop()
  stack.store.close()
})

const json = async <T>(response: Response): Promise<T> => {
  expect(response.status).toBe(200)
  return (await response.json()) as T
}

async function paid(url: string, account: TestAccount, stream = false): Promise<string> {
  const client = new OpenAI({ apiKey: account.apiKey, baseURL: `${url}/v1`, maxRetries: 0 })
  if (!stream) {
    const { response } = await client.chat.completions.create({ model, messages }).withResponse()
    return response.headers.get('x-svc-support-reference')!
  }
  const { data, response } = await client.chat.completions
    .create({ model, messages, stream: true })
    .withResponse()
  for await (const _ of data) {
    // read to the end: the clear commits before [DONE]
  }
  return response.headers.get('x-svc-support-reference')!
}

async function postOffer(at: TestStack, who: TestSupplier, askCents: number): Promise<string> {
  const response = await keyFetch(at, who.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `sim-${randomBytes(6).toString('hex')}`, askCents, capacityDiem: '40' },
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as { id: string }).id
}

/** Everything a client, a supplier and the operator can read of the market, as the gateway at `at` answers. */
async function everything(
  at: TestStack,
  buyers: TestAccount[],
  references: [string, TestAccount][],
  supplier: TestSupplier,
) {
  const buyerViews = await Promise.all(
    buyers.map(async (b) => ({
      me: await json(await keyFetch(at, b.apiKey, '/v1/agent/me')),
      keys: await json(await keyFetch(at, b.apiKey, '/v1/agent/keys')),
      activity: await json(await keyFetch(at, b.apiKey, '/v1/agent/activity?limit=100')),
      account: await json(await adminFetch(at, `/admin/v1/accounts/${b.accountId}`)),
    })),
  )
  const requests = await Promise.all(
    references.map(async ([reference, owner]) =>
      json(await keyFetch(at, owner.apiKey, `/v1/agent/requests/${reference}`)),
    ),
  )
  return {
    buyers: buyerViews,
    requests,
    supplier: {
      me: await json(await keyFetch(at, supplier.apiKey, '/v1/supplier/me')),
      offers: await json(await keyFetch(at, supplier.apiKey, '/v1/supplier/offers')),
      fills: await json(await keyFetch(at, supplier.apiKey, '/v1/supplier/fills?limit=200')),
      earnings: await json(await keyFetch(at, supplier.apiKey, '/v1/supplier/earnings?window=7d')),
      payouts: await json(await keyFetch(at, supplier.apiKey, '/v1/supplier/payouts')),
    },
    offers: await json(await adminFetch(at, '/admin/v1/offers')),
    suppliers: await json(await adminFetch(at, '/admin/v1/suppliers')),
    market: await json(await adminFetch(at, '/admin/v1/market')),
  }
}

describe('svc-gateway layout', () => {
  test('show: what is recorded; migrate one-slot: not supported; bad arguments: usage', async () => {
    expect(await cli('layout')).toMatchObject({ code: 0, stdout: 'one-slot\n' })
    expect(await cli('layout', 'show')).toMatchObject({ code: 0, stdout: 'one-slot\n' })
    const back = await cli('layout', 'migrate', 'one-slot')
    expect(back.code).toBe(1)
    expect(back.stderr).toContain('not supported')
    for (const args of [
      ['layout', 'migrate'],
      ['layout', 'migrate', 'sideways'],
      ['layout', 'frobnicate'],
    ]) {
      const result = await cli(...args)
      expect(result.code).toBe(2)
      expect(result.stderr).toContain('usage:')
    }
    const fresh = await runCli(['layout'], {
      ...env,
      SVC_REDIS_PREFIX: `test:{${randomBytes(6).toString('hex')}}`,
    })
    expect(fresh).toMatchObject({ code: 0, stdout: 'none recorded (no market yet)\n' })
  })

  test('a one-slot market with traffic moved apart: every record the same, the audit clean, requests paid', async () => {
    const prefix = stack.config.redisPrefix
    // Buyers: funded by the operator's credits, and by payments (one confirmed, one still pending).
    const buyers = await Promise.all([createAccount(stack), createAccount(stack), createAccount(stack)])
    for (const b of buyers) {
      const credited = await cli('account', 'credit', b.accountId, '2.000000', '--note', 'migration test')
      expect(credited.code).toBe(0)
    }
    const ledger = new PaymentLedger(stack.store, stack.keys)
    const payment = settledPayment
    const confirmed = payment(buyers[0]!.accountId, 1_500_000)
    const pending = payment(buyers[1]!.accountId, 700_000)
    await ledger.credit(confirmed)
    await ledger.credit(pending)
    await ledger.confirm(
      paymentId(84532, confirmed.transaction, confirmed.authorizationId),
      confirmed.accountId,
    )

    // Supply: a supplier's two offers and the operator's.
    const supplier = await signInSupplier(stack)
    const cheap = await postOffer(stack, supplier, 35)
    const dearer = await postOffer(stack, supplier, 40)
    const operator = await cli(
      'offer',
      'create',
      '--base-url',
      stack.sim.url,
      '--key',
      'sim-op',
      '--ask',
      '45',
      '--capacity',
      '30',
    )
    expect(operator.code).toBe(0)
    // A suspended supplier's offer: off the ladder, its suspension copied onto it when moved.
    const suspended = await signInSupplier(stack)
    const idle = await postOffer(stack, suspended, 30)
    expect((await cli('supplier', 'suspend', suspended.supplierId)).code).toBe(0)
    const references: [string, TestAccount][] = []
    for (const b of buyers)
      references.push([await paid(stack.url, b), b], [await paid(stack.url, b, true), b])
    // The cheaper offer paused: the next requests fill the dearer one, then the operator's.
    const patch = (id: string, status: string) =>
      keyFetch(stack, supplier.apiKey, `/v1/supplier/offers/${id}`, { method: 'PATCH', json: { status } })
    expect((await patch(cheap, 'paused')).status).toBe(200)
    references.push([await paid(stack.url, buyers[0]!), buyers[0]!])
    expect((await patch(dearer, 'paused')).status).toBe(200)
    references.push([await paid(stack.url, buyers[1]!, true), buyers[1]!])
    expect((await patch(cheap, 'active')).status).toBe(200)
    // A payout asked for (no payout wallet here: it stays pending on the market's slot).
    const earned = (
      await json<{ earnedUsdc: string }>(await keyFetch(stack, supplier.apiKey, '/v1/supplier/me'))
    ).earnedUsdc
    expect(Number(earned)).toBeGreaterThan(0)
    await new PayoutStore(stack.store, stack.keys).create(supplier.supplierId, 1, 'migration-payout', 1)

    // The supplier's oldest fill trimmed, as the record retention trims: its sums are bounds now.
    const fillsStream = stack.keys.supplierFills(supplier.supplierId)
    await stack.store.xtrim(fillsStream, 'MAXLEN', (await stack.store.xlen(fillsStream)) - 1)
    const before = await everything(stack, buyers, references, supplier)
    // A warehouse's export group, caught up before the move.
    const exported = (result: { stdout: string }) =>
      result.stdout
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { id: string; attemptId: string; supportReference: string })
    const early = exported(await cli('export', '--group', 'warehouse', '--once'))
    expect(early.map((l) => l.supportReference)).toEqual(expect.arrayContaining(references.map(([r]) => r)))
    // A buyer outside what is compared: its request is left in flight below.
    const extra = await createAccount(stack)
    expect((await cli('account', 'credit', extra.accountId, '1.000000')).code).toBe(0)
    expect((await cli('audit')).code).toBe(0)

    // Refused while the gateway runs: its replica is seen. Nothing changed.
    const keysBefore = await snapshotKeys(stack.store, prefix)
    const running = await cli('layout', 'migrate', 'apart')
    expect(running.code).toBe(1)
    expect(running.stderr).toContain('reaped within the last')
    expect(await snapshotKeys(stack.store, prefix)).toEqual(keysBefore)

    await stopGateway()
    // Refused while a request is in flight (a replica killed mid-request leaves one until reaped).
    const steps = marketSteps(stack.store, stack.keys)
    const inFlight = admitRequest(extra.accountId, {
      apiKeyId: (await stack.store.hkeys(stack.keys.accountKeys(extra.accountId)))[0]!,
      holdDiem: 500 as MicroDiem,
    })
    const admission = await steps.admit(inFlight)
    expect(admission.code).toBe(1)
    const held = await snapshotKeys(stack.store, prefix)
    const busy = await cli('layout', 'migrate', 'apart')
    expect(busy.code).toBe(1)
    expect(busy.stderr).toContain('1 lease(s) open')
    expect(busy.stderr).toContain(`account(s) ${extra.accountId}`)
    expect(await snapshotKeys(stack.store, prefix)).toEqual(held)
    const offerId = (admission as { offerId: string }).offerId
    const who = { attemptId: inFlight.attemptId, accountId: extra.accountId, offerId, model: inFlight.model }
    expect(await steps.release(who, { errorCode: 'test', cooldownMs: 0, upstreamBalance: null })).toBe(true)

    // An account as a build before the table field made it: every field but `table`, a listpack.
    const { table: _, ...untabled } = await stack.store.hgetall(stack.keys.account(extra.accountId))
    await stack.store.del(stack.keys.account(extra.accountId))
    await stack.store.hset(stack.keys.account(extra.accountId), untabled)
    expect(await stack.store.call('OBJECT', 'ENCODING', stack.keys.account(extra.accountId))).toBe('listpack')

    // Stopped part-way, twice, as a kill would stop it: the market is refused to every other user.
    const options = { seenWithinMs: 10_000, say: () => {} }
    await expect(migrateApart(stack.store, prefix, { ...options, writes: 3 })).rejects.toBeInstanceOf(
      MigrationStopped,
    )
    expect(await cli('layout')).toMatchObject({
      code: 0,
      stdout: 'one-slot, part-way through a migration to apart\n',
    })
    const refused = await cli('account', 'show', buyers[0]!.accountId)
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('layout migrate apart')
    const apartConfig = { ...stack.config, redisLayout: 'apart' as const }
    // What a gateway's start claims first (src/gateway.ts), refused for either layout.
    await expect(claimLayout(stack.store, prefix, 'apart')).rejects.toBeInstanceOf(LayoutMigratingError)
    await expect(claimLayout(stack.store, prefix, 'one-slot')).rejects.toBeInstanceOf(LayoutMigratingError)
    await expect(migrateApart(stack.store, prefix, { ...options, writes: 25 })).rejects.toBeInstanceOf(
      MigrationStopped,
    )
    // A key copied to its shard and not yet deleted on the market's slot (RESTORE done, DEL not).
    const one = keyspace(prefix)
    const owners = ownerKeyspaces(prefix)
    const last = buyers[2]!.accountId
    expect(await stack.store.exists(one.account(last))).toBe(1)
    await stack.store.restore(
      owners.account(last).account(last),
      0,
      (await stack.store.dumpBuffer(one.account(last)))!,
    )

    const finished = await cli('layout', 'migrate', 'apart')
    expect(finished.stderr).toBe('')
    expect(finished.code).toBe(0)
    expect(finished.stdout).toContain('the market is held apart')
    expect(await cli('layout')).toMatchObject({ code: 0, stdout: 'apart\n' })
    expect(await cli('layout', 'migrate', 'apart')).toMatchObject({ code: 0 })
    expect(await stack.store.exists(one.account(last))).toBe(0)
    for (const b of buyers)
      expect(await stack.store.exists(one.account(b.accountId), one.accountKeys(b.accountId))).toBe(0)
    // The account made without its table field moved as a hash table, every field kept.
    const moved = owners.account(extra.accountId).account(extra.accountId)
    expect(await stack.store.call('OBJECT', 'ENCODING', moved)).toBe('hashtable')
    expect(await stack.store.hgetall(moved)).toEqual({ ...untabled, table: ACCOUNT_TABLE })
    for (const id of [cheap, dearer]) expect(await stack.store.exists(one.offer(id))).toBe(0)
    expect(await stack.store.exists(one.supplierFills(supplier.supplierId))).toBe(0)
    // The record of a request keeps its retention on its shard.
    const [[reference, owner]] = references as [[string, TestAccount]]
    expect(await stack.store.pttl(owners.account(owner.accountId).attempt(`${reference}.1`))).toBeGreaterThan(
      0,
    )
    const audit = await cli('audit')
    expect(audit.stdout).toContain('every invariant holds')
    expect(audit.code).toBe(0)

    // A one-slot gateway is refused now; one started apart answers as the one-slot one did.
    await expect(claimLayout(stack.store, prefix, 'one-slot')).rejects.toThrow("'apart' layout")
    const gateway = await startGateway(apartConfig, createLogger('silent'))
    const after: TestStack = {
      ...stack,
      gateway,
      url: gateway.url,
      config: apartConfig,
      keys: keyspace(prefix, 'apart'),
    }
    try {
      expect(await everything(after, buyers, references, supplier)).toEqual(before)
      // The pending payment confirms once, on its account's shard.
      expect(
        await new PaymentLedger(stack.store, after.keys).confirm(
          paymentId(84532, pending.transaction, pending.authorizationId),
          pending.accountId,
        ),
      ).toMatchObject({ status: 'confirmed', pending: 0 })
      // Paid requests work, on the cheapest offer, and fill it.
      const fillsBefore = (before.supplier.fills as { data: unknown[] }).data.length
      const more: [string, TestAccount][] = [
        [await paid(after.url, buyers[0]!), buyers[0]!],
        [await paid(after.url, buyers[1]!, true), buyers[1]!],
      ]
      for (const [ref, by] of more) {
        const record = await json<{ status: string }>(
          await keyFetch(after, by.apiKey, `/v1/agent/requests/${ref}`),
        )
        expect(record.status).toBe('completed')
      }
      // Held apart, the offer's side (the fill) is posted a moment after the answer (post-queue.ts).
      const fillsNow = async () =>
        json<{ data: { offerId: string }[] }>(
          await keyFetch(after, supplier.apiKey, '/v1/supplier/fills?limit=200'),
        )
      await until(async () => (await fillsNow()).data.length >= fillsBefore + 2)
      const fills = await fillsNow()
      expect(fills.data.length).toBe(fillsBefore + 2)
      expect(fills.data[0]!.offerId).toBe(cheap)
      // The suspended supplier's offer carries its suspension on its own slot, and comes back when reinstated.
      expect(await stack.store.hget(owners.offer(idle).offer(idle), 'suspended')).toBe('1')
      expect((await cli('supplier', 'reinstate', suspended.supplierId)).code).toBe(0)
      expect(await stack.store.hget(owners.offer(idle).offer(idle), 'suspended')).toBeNull()
      expect(await stack.store.zscore(after.keys.ladder, idle)).not.toBeNull()
      expect(await stack.store.hget(after.keys.supplierOfferStates(suspended.supplierId), idle)).toBe(
        'active',
      )
      // The export group goes on: only what ended since (the request left in flight, released on the
      // market's slot before the move, and those served since, from their shards' Streams).
      const late = exported(await cli('export', '--group', 'warehouse', '--once'))
      const since = [inFlight.attemptId, ...more.map(([r]) => `${r}.1`)]
      expect(late.map((l) => l.attemptId).sort()).toEqual(since.sort())
      for (const line of late)
        if (line.attemptId !== inFlight.attemptId) expect(line.id).toMatch(/^a\.[0-9a-f]{3}:\d+-\d+$/)
      const clean = await cli('audit')
      expect(clean.stdout).toContain('every invariant holds')
      expect(clean.code).toBe(0)
    } finally {
      await gateway.stop()
    }
  })
})
