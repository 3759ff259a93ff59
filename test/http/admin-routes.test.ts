// /admin/v1/accounts over real HTTP: the operator's fixed interface, behind the admin token.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { adminFetch, createAccount, keyFetch, randomWallet } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

type ErrorBody = { error: { message: string; type: string; code: string } }
const zeroBalances = {
  confirmedUsdc: '0.000000',
  pendingUsdc: '0.000000',
  heldUsdc: '0.000000',
  spentUsdc: '0.000000',
  fundedUsdc: '0.000000',
  writtenOffUsdc: '0.000000',
}

const credit = (accountId: string, body: unknown) =>
  adminFetch(stack, `/admin/v1/accounts/${accountId}/credit`, { method: 'POST', json: body })

describe('the admin token', () => {
  test('missing, wrong, or a buyer key: 401 on every route, nothing written', async () => {
    const account = await createAccount(stack)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const authorization of [
      null,
      'Bearer wrong-token-of-some-length-000000',
      `Bearer ${stack.config.adminToken}x`,
      `Bearer ${stack.config.adminToken.slice(0, -1)}`,
      stack.config.adminToken,
      `Bearer ${account.apiKey}`,
    ]) {
      const headers: Record<string, string> = authorization ? { authorization } : {}
      const requests = [
        fetch(`${stack.url}/admin/v1/accounts`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ wallet: randomWallet() }),
        }),
        fetch(`${stack.url}/admin/v1/accounts/${account.accountId}/credit`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ amountUsdc: '1.000000' }),
        }),
        fetch(`${stack.url}/admin/v1/accounts/${account.accountId}`, { headers }),
      ]
      for (const response of await Promise.all(requests)) {
        expect(response.status).toBe(401)
        expect(((await response.json()) as ErrorBody).error.type).toBe('authentication_error')
      }
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('POST /admin/v1/accounts', () => {
  test('201 {accountId, wallet, apiKey}: the wallet checksummed, the key working at once', async () => {
    const wallet = randomWallet()
    const response = await adminFetch(stack, '/admin/v1/accounts', {
      method: 'POST',
      json: { wallet: wallet.toLowerCase() },
    })
    expect(response.status).toBe(201)
    const body = (await response.json()) as { accountId: string; wallet: string; apiKey: string }
    expect(Object.keys(body).sort()).toEqual(['accountId', 'apiKey', 'wallet'])
    expect(body.wallet).toBe(wallet)
    expect(body.accountId).toMatch(/^acct_[0-9a-f]{24}$/)
    const me = await keyFetch(stack, body.apiKey, '/v1/agent/me')
    expect(me.status).toBe(200)
    expect(((await me.json()) as { accountId: string }).accountId).toBe(body.accountId)
  })

  test('an existing wallet, in any case, is a 409 and writes nothing', async () => {
    const { wallet } = await createAccount(stack)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const variant of [wallet, wallet.toLowerCase()]) {
      const response = await adminFetch(stack, '/admin/v1/accounts', {
        method: 'POST',
        json: { wallet: variant },
      })
      expect(response.status).toBe(409)
      expect(((await response.json()) as ErrorBody).error.code).toBe('wallet_taken')
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('a bad body is a 400 and writes nothing', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const wallet = randomWallet()
    for (const body of [
      {},
      { wallet: 5 },
      { wallet: null },
      { wallet: '' },
      { wallet: '0x1234' },
      { wallet: wallet.slice(2) },
      { wallet: `${wallet}00` },
      // EIP-55 mixed case with one letter flipped: a mistyped address, not a new one.
      { wallet: '0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' },
    ]) {
      const response = await adminFetch(stack, '/admin/v1/accounts', { method: 'POST', json: body })
      expect({ body, status: response.status }).toEqual({ body, status: 400 })
    }
    for (const raw of ['', '{', 'wallet=0x00']) {
      const response = await adminFetch(stack, '/admin/v1/accounts', {
        method: 'POST',
        body: raw,
        headers: {
          'content-type': raw.startsWith('wallet') ? 'application/x-www-form-urlencoded' : 'application/json',
        },
      })
      expect({ raw, status: response.status }).toEqual({ raw, status: 400 })
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('POST /admin/v1/accounts/{accountId}/credit', () => {
  test('adds to confirmed and funded, answers the balances, writes an audit entry each time', async () => {
    const account = await createAccount(stack)
    const first = await credit(account.accountId, { amountUsdc: '10.000000', note: 'welcome' })
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({
      accountId: account.accountId,
      creditedUsdc: '10.000000',
      auditId: expect.stringMatching(/^\d+-\d+$/),
      balances: { ...zeroBalances, confirmedUsdc: '10.000000', fundedUsdc: '10.000000' },
    })
    const second = (await (await credit(account.accountId, { amountUsdc: '0.5' })).json()) as {
      balances: Record<string, string>
    }
    expect(second.balances).toEqual({ ...zeroBalances, confirmedUsdc: '10.500000', fundedUsdc: '10.500000' })

    const audit = (await stack.store.xrange(stack.keys.audit, '-', '+')).filter(([, fields]) =>
      fields.includes(account.accountId),
    )
    expect(audit).toHaveLength(2)
    expect(audit[0]![1]).toEqual(expect.arrayContaining(['note', 'welcome', 'actor', 'admin-api']))
    expect(audit[1]![1]).toEqual(expect.arrayContaining(['amountMicroUsdc', '500000', 'note', '']))

    const me = (await (await keyFetch(stack, account.apiKey, '/v1/agent/me')).json()) as {
      balances: Record<string, string>
    }
    expect(me.balances).toEqual({ confirmedUsdc: '10.500000', pendingUsdc: '0.000000', heldUsdc: '0.000000' })
  })

  test('with an Idempotency-Key: retried, the first credit again and nothing added', async () => {
    const account = await createAccount(stack)
    const keyed = (amountUsdc: string, key: string) =>
      adminFetch(stack, `/admin/v1/accounts/${account.accountId}/credit`, {
        method: 'POST',
        json: { amountUsdc },
        headers: { 'idempotency-key': key },
      })
    const first = await keyed('2.000000', 'refund-7')
    expect(first.status).toBe(200)
    expect(first.headers.get('idempotent-replayed')).toBeNull()
    const firstBody = (await first.json()) as { auditId: string }
    const [again, other] = await Promise.all([keyed('2.000000', 'refund-7'), keyed('2.000000', 'refund-8')])
    expect(again.status).toBe(200)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(((await again.json()) as { auditId: string }).auditId).toBe(firstBody.auditId)
    expect(other.status).toBe(200)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const reused = await keyed('3.000000', 'refund-7')
    expect(reused.status).toBe(409)
    expect(((await reused.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_reused')
    const invalid = await keyed('3.000000', 'naïve key')
    expect(invalid.status).toBe(400)
    expect(((await invalid.json()) as { error: { code: string } }).error.code).toBe('invalid_idempotency_key')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    expect(await stack.store.hget(stack.keys.account(account.accountId), 'funded')).toBe('4000000')
  })

  test('1,000,000 USDC is the most one credit adds', async () => {
    const account = await createAccount(stack)
    expect((await credit(account.accountId, { amountUsdc: '1000000.000000' })).status).toBe(200)
    expect((await credit(account.accountId, { amountUsdc: '1000000.000001' })).status).toBe(400)
  })

  test('bad amounts and bodies are 400s, an unknown account a 404; nothing changes', async () => {
    const account = await createAccount(stack)
    await credit(account.accountId, { amountUsdc: '1' })
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const body of [
      {},
      { note: 'no amount' },
      { amountUsdc: 10 },
      { amountUsdc: null },
      { amountUsdc: '0' },
      { amountUsdc: '0.000000' },
      { amountUsdc: '-1.000000' },
      { amountUsdc: '1.0000001' },
      { amountUsdc: '1e3' },
      { amountUsdc: ' 1' },
      { amountUsdc: '1,5' },
      { amountUsdc: '' },
      { amountUsdc: '2000000' },
      { amountUsdc: '1', note: 5 },
      { amountUsdc: '1', note: 'n'.repeat(501) },
      // Kept in the audit trail an operator reads: no controls, bidi overrides or lone surrogates.
      ...['paid\u0000', 'two\nlines', 'esc\u001b[2J', 'gpj\u202eexe', 'lone \ud800'].map((note) => ({
        amountUsdc: '1',
        note,
      })),
    ]) {
      const response = await credit(account.accountId, body)
      expect({ body, status: response.status }).toEqual({ body, status: 400 })
      expect(((await response.json()) as ErrorBody).error.type).toBe('invalid_request_error')
    }
    const nonJson = await adminFetch(stack, `/admin/v1/accounts/${account.accountId}/credit`, {
      method: 'POST',
      body: 'amountUsdc=1',
      headers: { 'content-type': 'text/plain' },
    })
    expect(nonJson.status).toBe(400)
    for (const id of [
      'acct_000000000000000000000000',
      'nope',
      encodeURIComponent(`${account.accountId}:keys`),
    ]) {
      const response = await credit(id, { amountUsdc: '1.000000' })
      expect(response.status).toBe(404)
      expect(((await response.json()) as ErrorBody).error.code).toBe('account_not_found')
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('GET /admin/v1/accounts/{accountId}', () => {
  test('the account with every balance and its key count, never a key', async () => {
    const account = await createAccount(stack)
    await credit(account.accountId, { amountUsdc: '3.25' })
    await keyFetch(stack, account.apiKey, '/v1/agent/keys', { method: 'POST', json: { name: 'two' } })
    const response = await adminFetch(stack, `/admin/v1/accounts/${account.accountId}`)
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).not.toContain(account.apiKey)
    expect(text).not.toContain(account.apiKey.slice(12))
    expect(JSON.parse(text)).toEqual({
      accountId: account.accountId,
      wallet: account.wallet,
      createdAt: expect.any(String),
      maxPriceCents: 50,
      balances: { ...zeroBalances, confirmedUsdc: '3.250000', fundedUsdc: '3.250000' },
      activeApiKeyCount: 2,
    })
  })

  test('an unknown account is a 404', async () => {
    for (const id of ['acct_000000000000000000000000', 'whatever']) {
      const response = await adminFetch(stack, `/admin/v1/accounts/${id}`)
      expect(response.status).toBe(404)
      expect(((await response.json()) as ErrorBody).error).toMatchObject({
        type: 'not_found_error',
        code: 'account_not_found',
      })
    }
  })
})
