// Accounts and their keys in a market held apart, on a real three-master Redis Cluster: each
// account's own keys under its shard's tag, the market's indexes (wallets, accounts, key records)
// under the prefix's, and every script call reaching one slot. Creating, minting, limiting,
// renaming, revoking and crediting work as on one slot, a wallet never holds two accounts, a
// revoked key stops working at once, and an account made here pays for a request held apart.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { ApiKeyStore } from '../../src/accounts/key-store.ts'
import { auditFunding } from '../../src/funding/audit.ts'
import { PaymentLedger, paymentId, transactionPaymentId } from '../../src/funding/ledger.ts'
import type { Admission } from '../../src/market/admission.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { admitApart, clearApart, type Owners, ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem, MicroUsdc } from '../../src/money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { ACCOUNT_TABLE, type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { WebhookConsumer } from '../../src/webhooks/consumer.ts'
import { WebhookDeliveries } from '../../src/webhooks/delivery.ts'
import { WebhookStore } from '../../src/webhooks/endpoints.ts'
import { settledPayment } from '../helpers/accounts.ts'
import { admitRequest, meteredClear } from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'

let cluster: RedisCluster
let store: Store
let keys: Keyspace
let owners: Owners
let accounts: AccountStore
let apiKeys: ApiKeyStore

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-accounts-apart' })
  await store.whenReady(15_000)
  const prefix = `t${randomBytes(4).toString('hex')}:{m}`
  keys = keyspace(prefix, 'apart')
  owners = ownerKeyspaces(prefix)
  accounts = new AccountStore(store, keys)
  apiKeys = new ApiKeyStore(store, keys)
})
// Whatever a test did, the market held apart still audits clean once its steps are done.
afterEach(async () => {
  expect(await auditApart(store, keys.prefix)).toEqual([])
})
afterAll(() => {
  store.close()
  cluster.stop()
})

const wallet = () => `0x${randomBytes(20).toString('hex')}`
const slotOf = async (key: string) => Number(await store.call('CLUSTER', 'KEYSLOT', key))

/** Every key under the prefix on every master: what a flow left behind, wherever it is. */
async function everyKey(): Promise<string[]> {
  const pattern = `${keys.prefix.split(':')[0]}:*`
  const found = await Promise.all((await store.masters()).map((node) => node.keys(pattern)))
  return found.flat().sort()
}

describe('the keyspace held apart', () => {
  test("an account's own keys are its shard's, the same names the two-phase steps use; the indexes stay on the prefix's slot", async () => {
    const accountId = `acct_${randomBytes(12).toString('hex')}`
    const own = owners.account(accountId)
    expect(keys.account(accountId)).toBe(own.account(accountId))
    expect(keys.accountKeys(accountId)).toBe(own.accountKeys(accountId))
    expect(keys.accountActivity(accountId)).toBe(own.accountActivity(accountId))
    expect(keys.webhookEvents(`acct:${accountId}`)).toBe(own.webhookEvents(`acct:${accountId}`))
    expect(keys.accountBase(accountId)).toBe(own.base)
    const accountSlot = await slotOf(keys.account(accountId))
    expect(await slotOf(keys.auditOf(accountId))).toBe(accountSlot)
    expect(await slotOf(keys.wallets)).not.toBe(accountSlot)
    expect(await slotOf(keys.apiKey('d'))).toBe(await slotOf(keys.wallets))
    // On one slot nothing moves.
    const one = keyspace(keys.prefix)
    expect(one.account(accountId)).toBe(`${keys.prefix}:acct:${accountId}`)
    expect(one.auditOf(accountId)).toBe(one.audit)
  })
})

describe('accounts and keys held apart', () => {
  test('a new account: its hash on its shard, its wallet and its first key indexed; the key resolves to it', async () => {
    const owner = wallet()
    const { account, apiKey } = await accounts.create(owner, 50)
    expect(await store.hget(keys.account(account.id), 'confirmed')).toBe('0')
    expect((await accounts.findByWallet(owner))?.id).toBe(account.id)
    expect(await store.sismember(keys.accounts, account.id)).toBe(1)
    const record = await apiKeys.resolve(digestApiKey(apiKey))
    expect(record?.accountId).toBe(account.id)
    expect((await apiKeys.list(account.id)).map((k) => k.id)).toEqual([record!.id])
  })

  test('five creates for one wallet at once: one account, four 409s, and nothing left of the others', async () => {
    const owner = wallet()
    const before = await everyKey()
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => accounts.create(owner, 50)))
    const made = results.filter((r) => r.status === 'fulfilled')
    expect(made.length).toBe(1)
    for (const r of results.filter((r) => r.status === 'rejected'))
      expect((r as PromiseRejectedResult).reason).toMatchObject({ status: 409, code: 'wallet_taken' })
    const id = (made[0] as PromiseFulfilledResult<{ account: { id: string } }>).value.account.id
    const added = (await everyKey()).filter((k) => !before.includes(k))
    // The one account's hash and keys, its first key's record; the indexes already existed or are
    // the ones it made (wallets, accounts).
    const accountKeys = added.filter((k) => k.includes(':acct:'))
    expect(accountKeys.sort()).toEqual([keys.account(id), keys.accountKeys(id)].sort())
  })

  test('mint, limit, rename and revoke: each key record follows its owner, and a revoked key stops at once', async () => {
    const { account, apiKey } = await accounts.create(wallet(), 50)
    const first = (await apiKeys.resolve(digestApiKey(apiKey)))!
    const agent = await apiKeys.mint(account.id, 'agent', 2_000_000)
    expect((await apiKeys.resolve(digestApiKey(agent.apiKey)))?.name).toBe('agent')
    // A limited key binds what it mints: its own limit drops by the new key's.
    const sub = await apiKeys.mint(account.id, 'sub', 500_000, agent.id)
    const spending = await apiKeys.list(account.id)
    expect(spending.find((k) => k.id === agent.id)?.limit).toBe(1_500_000)
    expect(spending.find((k) => k.id === sub.id)?.limit).toBe(500_000)

    const changed = await apiKeys.change(account.id, sub.id, { limit: 400_000, name: 'renamed' })
    expect([changed.limit, changed.name]).toEqual([400_000, 'renamed'])
    expect((await apiKeys.resolve(digestApiKey(sub.apiKey)))?.name).toBe('renamed')

    // A limited caller may not revoke a key without a limit: refused, and that key still works.
    await expect(apiKeys.revoke(account.id, first.id, agent.id)).rejects.toMatchObject({ status: 403 })
    expect((await apiKeys.resolve(digestApiKey(apiKey)))?.id).toBe(first.id)
    expect((await apiKeys.list(account.id)).length).toBe(3)

    // A revoke that stops between its two steps leaves a listed key that does not work: named.
    await store.del(keys.apiKey(digestApiKey(sub.apiKey)))
    expect(await auditApart(store, keys.prefix)).toEqual([
      {
        subject: `account ${account.id}`,
        problem: `key ${sub.id} is listed but has no record: it does not work`,
      },
    ])
    await apiKeys.revoke(account.id, sub.id)
    expect(await apiKeys.resolve(digestApiKey(sub.apiKey))).toBeNull()
    // A record left for a key no longer listed: a revoked key that still works, named.
    const subRecord = keys.apiKey(digestApiKey(sub.apiKey))
    await store.hset(subRecord, {
      id: sub.id,
      accountId: account.id,
      name: 'renamed',
      prefix: 'x',
      createdAt: 1,
    })
    expect(await auditApart(store, keys.prefix)).toEqual([
      {
        subject: `account ${account.id}`,
        problem: `key ${sub.id} has a record but is not listed: revoked, it still works`,
      },
    ])
    await store.del(subRecord)
    expect((await apiKeys.list(account.id)).map((k) => k.id).sort()).toEqual([first.id, agent.id].sort())
    await expect(apiKeys.revoke(account.id, sub.id)).rejects.toMatchObject({ status: 404 })
  })

  test('revokes of one key at once: never a record left for a key no longer listed', async () => {
    const { account } = await accounts.create(wallet(), 50)
    const agent = await apiKeys.mint(account.id, 'agent', 2_000_000)
    for (let round = 0; round < 6; round++) {
      const key = await apiKeys.mint(account.id, `k${round}`, null)
      const digest = digestApiKey(key.apiKey)
      // Two allowed revokes (the owner twice: a double click, a retry), or one refused for its
      // caller's limit beside one allowed: in each, the key ends unlisted and unusable.
      const callers = round % 2 === 0 ? ['', ''] : [agent.id, '']
      const results = await Promise.allSettled(
        callers.map((caller) => apiKeys.revoke(account.id, key.id, caller)),
      )
      expect(results.filter((r) => r.status === 'fulfilled').length).toBe(1)
      expect(await apiKeys.resolve(digest)).toBeNull()
      expect((await apiKeys.list(account.id)).map((k) => k.id)).not.toContain(key.id)
    }
    // A revoke refused for its caller's limit leaves the key working, its record as it was.
    const kept = await apiKeys.mint(account.id, 'kept', null)
    const record = keys.apiKey(digestApiKey(kept.apiKey))
    await store.hset(record, 'lastUsedAt', '1700000000000')
    const before = await store.hgetall(record)
    await expect(apiKeys.revoke(account.id, kept.id, agent.id)).rejects.toMatchObject({ status: 403 })
    expect(await store.hgetall(record)).toEqual(before)
    // Three such revokes at once: each refused, and the key still works.
    for (let round = 0; round < 10; round++) {
      const refused = await Promise.allSettled(
        [0, 1, 2].map(() => apiKeys.revoke(account.id, kept.id, agent.id)),
      )
      expect(refused.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected'])
      expect((await apiKeys.resolve(digestApiKey(kept.apiKey)))?.id).toBe(kept.id)
    }
  })

  test("a key's limit lifted between the caller's check and the owner's step: refused there, the record put back as it was", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const agent = await apiKeys.mint(account.id, 'agent', 2_000_000)
    const target = await apiKeys.mint(account.id, 'target', 100_000)
    const record = keys.apiKey(digestApiKey(target.apiKey))
    const before = await store.hgetall(record)
    // The owner lifts the target's limit right after the revoke's check read it.
    const lifting = new Proxy(store, {
      get(base, name) {
        if (name === 'hmget')
          return async (...args: Parameters<Store['hmget']>) => {
            const read = await base.hmget(...args)
            await base.hdel(keys.account(account.id), `limit:${target.id}`)
            return read
          }
        const value = Reflect.get(base, name)
        return typeof value === 'function' ? value.bind(base) : value
      },
    })
    await expect(
      new ApiKeyStore(lifting, keys).revoke(account.id, target.id, agent.id),
    ).rejects.toMatchObject({
      status: 403,
    })
    expect(await store.hgetall(record)).toEqual(before)
    expect((await apiKeys.list(account.id)).map((k) => k.id)).toContain(target.id)
  })

  test("a limited key's refused revokes never stop the key they aim at working, not even meanwhile", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const agent = await apiKeys.mint(account.id, 'agent', 2_000_000)
    const target = await apiKeys.mint(account.id, 'target', null)
    const digest = digestApiKey(target.apiKey)
    let revoking = true
    const misses: number[] = []
    // Three readers resolve the key back to back, as auth on other replicas would, while the
    // limited key's revokes are refused one after another.
    const readers = [0, 1, 2].map(async () => {
      let reads = 0
      while (revoking) {
        if ((await apiKeys.resolve(digest))?.id !== target.id) misses.push(reads)
        reads++
      }
      return reads
    })
    for (let round = 0; round < 20; round++)
      await expect(apiKeys.revoke(account.id, target.id, agent.id)).rejects.toMatchObject({ status: 403 })
    revoking = false
    const reads = await Promise.all(readers)
    expect(Math.min(...reads)).toBeGreaterThan(0)
    expect(misses).toEqual([])
  })

  test("a hand credit moves the balance and is recorded on the account's own slot", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const credited = await accounts.credit(account.id, '2.500000', 'test funds', 'test')
    expect(credited.balances).toMatchObject({ confirmed: 2_500_000, funded: 2_500_000 })
    const entries = await store.xrange(keys.auditOf(account.id), '-', '+')
    expect(entries.length).toBe(1)
    expect(entries[0]![1]).toEqual(
      expect.arrayContaining(['accountId', account.id, 'amountMicroUsdc', '2500000']),
    )
  })

  test('an account made here pays for a request held apart, through its own key', async () => {
    const { account, apiKey } = await accounts.create(wallet(), 50)
    await accounts.credit(account.id, '1.000000', 'test funds', 'test')
    const key = (await apiKeys.resolve(digestApiKey(apiKey)))!
    const offerId = randomUUID()
    await store.hset(owners.offer(offerId).offer(offerId), {
      id: offerId,
      status: 'active',
      askCents: 40,
      capacity: 5_000_000,
      burned: 0,
      held: 0,
      earned: 0,
      fees: 0,
      maxInFlight: 100,
      inflight: 0,
      cooldownUntil: 0,
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamKeyEnc: 'sealed',
      supplierId: 'spl_apart',
    })
    const result = await admitApart(store, owners, {
      ...admitRequest(account.id),
      apiKeyId: key.id,
      apiKeyDigest: digestApiKey(apiKey),
      holdDiem: 10_000 as MicroDiem,
      offerId,
      maxCents: 50,
    })
    expect(result.code).toBe(AdmitCode.Admitted)
    const admission = result as Admission
    const who = { accountId: account.id, offerId, model: 'llama-3.3-70b' }
    const cleared = await clearApart(store, owners, who, meteredClear(admission.attemptId, 5_000))
    expect(cleared.charged).toBe(2_000 as never)
    expect((await accounts.get(account.id))?.balances).toMatchObject({ confirmed: 998_000, spent: 2_000 })
    expect(await auditApart(store, keys.prefix)).toEqual([])
    // The same key, revoked, is refused by the account's own side: nothing held, nothing reserved.
    await apiKeys.revoke(account.id, key.id)
    const refused = await admitApart(store, owners, {
      ...admitRequest(account.id),
      attemptId: `${randomUUID()}.1`,
      apiKeyId: key.id,
      apiKeyDigest: digestApiKey(apiKey),
      holdDiem: 10_000 as MicroDiem,
      offerId,
      maxCents: 50,
    })
    expect(refused.code).toBe(AdmitCode.UnknownKey)
    expect(await store.hget(owners.offer(offerId).offer(offerId), 'held')).toBe('0')
  })
})

describe('funding held apart', () => {
  const settled = settledPayment
  const balances = async (accountId: string) => (await accounts.get(accountId))!.balances
  const ledger = () => new PaymentLedger(store, keys)

  test('credited to pending, then confirmed: each once, whatever is replayed', async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 3_000_000)
    expect(await ledger().credit(payment)).toEqual({
      status: 'credited',
      pending: 3_000_000,
      funded: 3_000_000,
    } as never)
    expect((await ledger().credit(payment)).status).toBe('already_credited')
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    expect(await ledger().confirm(id, account.id)).toEqual({
      status: 'confirmed',
      confirmed: 3_000_000,
      pending: 0,
    } as never)
    expect(await ledger().confirm(id, account.id)).toEqual({ status: 'nothing_to_do' })
    expect(await balances(account.id)).toMatchObject({ confirmed: 3_000_000, pending: 0, funded: 3_000_000 })
    expect(await ledger().unconfirmedUpTo(1_000n)).not.toContain(id)
    expect(await ledger().credit(settled('acct_000000000000000000000000', 1))).toEqual({
      status: 'no_account',
    })
  })

  test('a replica that stops after recording the payment: a retried credit or the confirmation credits the account once', async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 1_000_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    const recordOnly = () =>
      runScript(
        store,
        'creditPayment',
        [
          keys.payment(id),
          keys.authorization(payment.authorizationId),
          keys.paymentsInFlight,
          keys.paymentsUnconfirmed,
          keys.transactionPayments(transactionPaymentId(84532, payment.transaction)),
        ],
        {
          accountId: account.id,
          amount: payment.amount,
          paymentId: id,
          authorizationId: payment.authorizationId,
          blockNumber: '100',
          payer: payment.payer,
          table: ACCOUNT_TABLE,
        },
      )
    await recordOnly()
    expect(await balances(account.id)).toMatchObject({ pending: 0, funded: 0 })
    expect(await auditApart(store, keys.prefix)).toEqual([
      { subject: `payment ${id}`, problem: `recorded pending but not credited to account ${account.id}` },
    ])
    expect((await ledger().credit(payment)).status).toBe('already_credited')
    expect(await balances(account.id)).toMatchObject({ pending: 1_000_000, funded: 1_000_000 })
    expect((await ledger().credit(payment)).status).toBe('already_credited')
    expect(await balances(account.id)).toMatchObject({ pending: 1_000_000, funded: 1_000_000 })

    // Another payment recorded alone is finished by the watcher's confirmation.
    const second = settled(account.id, 500_000)
    const secondId = paymentId(84532, second.transaction, second.authorizationId)
    await runScript(
      store,
      'creditPayment',
      [
        keys.payment(secondId),
        keys.authorization(second.authorizationId),
        keys.paymentsInFlight,
        keys.paymentsUnconfirmed,
        keys.transactionPayments(transactionPaymentId(84532, second.transaction)),
      ],
      {
        accountId: account.id,
        amount: second.amount,
        paymentId: secondId,
        authorizationId: second.authorizationId,
        blockNumber: '100',
        payer: second.payer,
        table: ACCOUNT_TABLE,
      },
    )
    expect((await ledger().confirm(secondId, account.id)).status).toBe('confirmed')
    expect(await balances(account.id)).toMatchObject({
      confirmed: 500_000,
      pending: 1_000_000,
      funded: 1_500_000,
    })
  })

  const recordOnly = (payment: ReturnType<typeof settled>) => {
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    return runScript(
      store,
      'creditPayment',
      [
        keys.payment(id),
        keys.authorization(payment.authorizationId),
        keys.paymentsInFlight,
        keys.paymentsUnconfirmed,
        keys.transactionPayments(transactionPaymentId(84532, payment.transaction)),
      ],
      {
        accountId: payment.accountId,
        amount: payment.amount,
        paymentId: id,
        authorizationId: payment.authorizationId,
        blockNumber: '100',
        payer: payment.payer,
        table: ACCOUNT_TABLE,
      },
    )
  }
  const newPaymentId = () => `84532:0x${randomBytes(32).toString('hex')}`
  const fundingOf = async (accountId: string) =>
    (await auditFunding(store, keys)).filter((f) => f.subject === `account ${accountId}`)

  test('moved to another transaction, then confirmed: the account lists the new payment in its place, credited once', async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 2_000_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    await ledger().credit(payment)
    const movedTo = newPaymentId()
    expect(await ledger().move(id, movedTo, 120n)).toEqual({ status: 'done' })
    expect(await ledger().move(id, movedTo, 120n)).toEqual({ status: 'nothing_to_do' })
    expect(await store.hgetall(keys.accountPayments(account.id))).toEqual({
      [id]: 'moved',
      [movedTo]: 'pending',
    })
    expect(await balances(account.id)).toMatchObject({ pending: 2_000_000, funded: 2_000_000 })
    expect(await auditApart(store, keys.prefix)).toEqual([])
    expect(await ledger().confirm(movedTo, account.id)).toMatchObject({ status: 'confirmed' })
    expect(await balances(account.id)).toMatchObject({ confirmed: 2_000_000, pending: 0, funded: 2_000_000 })
    // A replica that stalled before the old payment's account step: it credits nothing now.
    const late = await runScript(
      store,
      'creditPending',
      [keys.account(account.id), keys.accountPayments(account.id)],
      {
        accountId: account.id,
        paymentId: id,
        amount: 2_000_000,
        table: ACCOUNT_TABLE,
      },
    )
    expect(late).toEqual([0, id])
    expect(await balances(account.id)).toMatchObject({ confirmed: 2_000_000, pending: 0, funded: 2_000_000 })
    expect(await fundingOf(account.id)).toEqual([])
  })

  test("a replica that stops between a move's two steps: the confirmation finishes it, crediting nothing twice", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 2_000_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    await ledger().credit(payment)
    const movedTo = newPaymentId()
    const moved = await runScript(
      store,
      'movePayment',
      [
        keys.payment(id),
        keys.payment(movedTo),
        keys.authorization(payment.authorizationId),
        keys.paymentsUnconfirmed,
        keys.paymentMovedTo(id),
        keys.transactionPayments(movedTo.split(':').slice(0, 2).join(':')),
      ],
      { paymentId: id, movedTo, blockNumber: '120', recordRetentionMs: DEFAULT_RECORD_RETENTION_MS },
    )
    expect(moved).toEqual([1])
    expect(await auditApart(store, keys.prefix)).not.toEqual([])
    expect(await ledger().confirm(movedTo, account.id)).toMatchObject({ status: 'confirmed' })
    expect(await store.hgetall(keys.accountPayments(account.id))).toEqual({
      [id]: 'moved',
      [movedTo]: 'confirmed',
    })
    expect(await balances(account.id)).toMatchObject({ confirmed: 2_000_000, pending: 0, funded: 2_000_000 })

    // Moved before its credit reached the account: the new payment's confirmation credits it, once.
    const unlisted = settled(account.id, 1_000_000)
    const unlistedId = paymentId(84532, unlisted.transaction, unlisted.authorizationId)
    await recordOnly(unlisted)
    const unlistedTo = newPaymentId()
    expect(await ledger().move(unlistedId, unlistedTo, 120n)).toEqual({ status: 'done' })
    // The old id answers lookups for the record retention, no longer.
    expect(await store.pttl(keys.paymentMovedTo(unlistedId))).toBeWithin(1, DEFAULT_RECORD_RETENTION_MS + 1)
    expect(await ledger().confirm(unlistedTo, account.id)).toMatchObject({ status: 'confirmed' })
    expect(await balances(account.id)).toMatchObject({ confirmed: 3_000_000, pending: 0, funded: 3_000_000 })
    expect(await fundingOf(account.id)).toEqual([])
  })

  test("taken back: the account's balance first, once, whatever step a replica stopped after; its endpoint told once", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const owner = `acct:${account.id}` as const
    const webhooks = new WebhookStore(store, keys, randomBytes(32), { allowLoopback: true })
    const endpoint = await webhooks.create(owner, {
      url: 'http://127.0.0.1:9/hook',
      events: ['funding.reversed'],
    })
    const payment = settled(account.id, 2_000_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    await ledger().credit(payment)
    expect(await ledger().takeBack(id, account.id)).toEqual({ status: 'done' })
    expect(await ledger().takeBack(id, account.id)).toEqual({ status: 'nothing_to_do' })
    expect(await store.pttl(keys.paymentReversed(id))).toBeWithin(1, DEFAULT_RECORD_RETENTION_MS + 1)
    expect(await store.hgetall(keys.accountPayments(account.id))).toEqual({ [id]: 'taken back' })
    expect(await store.hgetall(keys.payment(id))).toEqual({})
    expect(await balances(account.id)).toMatchObject({ pending: 0, funded: 0 })

    // Stopped after the account's step: balanced already; the next pass drops the records.
    const second = settled(account.id, 1_000_000)
    const secondId = paymentId(84532, second.transaction, second.authorizationId)
    await ledger().credit(second)
    const accountStep = await runScript(store, 'takeBackPending', [keys.accountBase(account.id)], {
      accountId: account.id,
      paymentId: secondId,
      amount: 1_000_000,
    })
    expect(accountStep).toEqual([1])
    expect(await auditApart(store, keys.prefix)).toEqual([])
    expect(await ledger().takeBack(secondId, account.id)).toEqual({ status: 'done' })
    expect(await balances(account.id)).toMatchObject({ pending: 0, funded: 0 })

    // Taken back before its credit reached the account: nothing to take from it, and nothing credited later.
    const unlisted = settled(account.id, 500_000)
    const unlistedId = paymentId(84532, unlisted.transaction, unlisted.authorizationId)
    await recordOnly(unlisted)
    expect(await ledger().takeBack(unlistedId, account.id)).toEqual({ status: 'done' })
    // The credit's account step, from a replica that stalled: it finds the payment taken back.
    const late = await runScript(
      store,
      'creditPending',
      [keys.account(account.id), keys.accountPayments(account.id)],
      { accountId: account.id, paymentId: unlistedId, amount: 500_000, table: ACCOUNT_TABLE },
    )
    expect(late).toEqual([0, unlistedId])
    expect(await balances(account.id)).toMatchObject({ pending: 0, funded: 0 })
    expect(await fundingOf(account.id)).toEqual([])

    // funding.reversed, on the account's slot, once for each balance that shrank: none for the
    // payment its balance never held.
    const events = await store.xrange(keys.webhookEvents(owner), '-', '+')
    expect(events.map(([, fields]) => [fields[1], JSON.parse(fields[5]!)])).toEqual([
      ['funding.reversed', { paymentId: id, amountUsdc: '2.000000', pendingUsdc: '0.000000' }],
      ['funding.reversed', { paymentId: secondId, amountUsdc: '1.000000', pendingUsdc: '0.000000' }],
    ])
    expect(await store.smembers(keys.webhookDue(owner))).toEqual([owner])
    // Nothing left for the consumers of the tests after: the endpoint, its events and its flag.
    await webhooks.remove(owner, endpoint.id)
    await store.del(keys.webhookEvents(owner))
    await store.srem(keys.webhookDue(owner), owner)
  })

  test("a replica that stops between the account's confirmation and the payment's mark: the next pass marks it, moving nothing", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 2_000_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    await ledger().credit(payment)
    await runScript(store, 'confirmPending', [keys.accountBase(account.id)], {
      accountId: account.id,
      paymentId: id,
      amount: 2_000_000,
    })
    expect(await ledger().unconfirmedUpTo(1_000n)).toContain(id)
    expect(await auditApart(store, keys.prefix)).toEqual([
      { subject: `payment ${id}`, problem: 'confirmed on its account, not marked' },
    ])
    expect(await ledger().confirm(id, account.id)).toEqual({ status: 'nothing_to_do' })
    expect(await ledger().unconfirmedUpTo(1_000n)).not.toContain(id)
    expect((await ledger().payment(id)).state).toBe('confirmed')
    expect(await balances(account.id)).toMatchObject({ confirmed: 2_000_000, pending: 0, funded: 2_000_000 })
  })

  test('concurrent credits and confirmations of one payment from many replicas move it once', async () => {
    const { account } = await accounts.create(wallet(), 50)
    const payment = settled(account.id, 700_000)
    const id = paymentId(84532, payment.transaction, payment.authorizationId)
    const credits = await Promise.all(Array.from({ length: 8 }, () => ledger().credit(payment)))
    expect(credits.filter((c) => c.status === 'credited').length).toBe(1)
    const confirms = await Promise.all(Array.from({ length: 8 }, () => ledger().confirm(id, account.id)))
    expect(confirms.filter((c) => c.status === 'confirmed').length).toBe(1)
    expect(await balances(account.id)).toMatchObject({ confirmed: 700_000, pending: 0, funded: 700_000 })
  })

  test('the audit names an account whose pending is not what its payments have pending', async () => {
    const { account } = await accounts.create(wallet(), 50)
    await ledger().credit(settled(account.id, 900_000))
    await store.hincrby(keys.account(account.id), 'pending', 1)
    await store.hincrby(keys.account(account.id), 'funded', 1)
    expect(await auditApart(store, keys.prefix)).toEqual([
      { subject: `account ${account.id}`, problem: 'pending 900001 != its payments pending 900000' },
    ])
    await store.hincrby(keys.account(account.id), 'pending', -1)
    await store.hincrby(keys.account(account.id), 'funded', -1)
  })
})

describe('webhooks held apart', () => {
  test("an account's endpoint lives on its slot, its funding.confirmed is written there once, and removing it leaves nothing", async () => {
    const { account } = await accounts.create(wallet(), 50)
    const owner = `acct:${account.id}` as const
    const webhooks = new WebhookStore(store, keys, randomBytes(32), { allowLoopback: true })
    const endpoint = await webhooks.create(owner, {
      url: 'http://127.0.0.1:9/hook',
      events: ['funding.confirmed'],
    })
    expect(await slotOf(keys.webhooks(owner))).toBe(await slotOf(keys.account(account.id)))
    expect(await store.sismember(keys.webhookOwners, owner)).toBe(1)
    expect((await webhooks.list(owner)).map((e) => e.id)).toEqual([endpoint.id])

    const tx = `0x${randomBytes(32).toString('hex')}`
    const payment = {
      accountId: account.id,
      amount: 1_000_000 as MicroUsdc,
      chainId: 84532,
      transaction: tx,
      authorizationId: `84532:usdc:payer:${tx}`,
      blockNumber: 100n,
      payer: wallet(),
    }
    const ledger = new PaymentLedger(store, keys)
    await ledger.credit(payment)
    await ledger.confirm(paymentId(84532, tx, payment.authorizationId), account.id)
    await ledger.confirm(paymentId(84532, tx, payment.authorizationId), account.id)
    const events = await store.xrange(keys.webhookEvents(owner), '-', '+')
    expect(events.map(([, fields]) => fields[1])).toEqual(['funding.confirmed'])
    // The same call flagged the account in its shard's due set, on its slot, which the consumers
    // read: a pass that does not sweep finds the event there.
    expect(await slotOf(keys.webhookDue(owner))).toBe(await slotOf(keys.account(account.id)))
    expect(await store.smembers(keys.webhookDue(owner))).toEqual([owner])
    expect(await store.sismember(keys.webhookDueSets, keys.webhookDue(owner))).toBe(1)
    const config = { allowLoopback: true, timeoutMs: 200, backoffMs: 60_000, maxAttempts: 2, pollMs: 50 }
    const deliveries = new WebhookDeliveries(store, keys, webhooks, config)
    const consumer = new WebhookConsumer(store, keys, webhooks, deliveries, config)
    expect(await consumer.pass(false)).toBe(1)

    await webhooks.remove(owner, endpoint.id)
    expect(await webhooks.list(owner)).toEqual([])
    expect(await store.hgetall(keys.webhookHooks(owner))).toEqual({})
    await expect(webhooks.remove(owner, endpoint.id)).rejects.toMatchObject({ status: 404 })
  })
})
