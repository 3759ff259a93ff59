// The funding audit against a real local EVM: an account's funded is its credited payments and the
// operator's credits by hand, each credited payment's authorization says so, and with the chain
// read every credited payment is a success holding the payer's transfer to the gateway's wallet by
// the payment's own authorization.
// Money that reaches an account any other way, or a credit the chain does not back, is named.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import type { Hex } from 'viem'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { marketGlob, scanHashes } from '../../src/market/audit.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { auditStackOnChain } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack

beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 1 })
  ;({ chain, stack } = chainStack)
}, 60_000)

afterAll(() => chainStack.stop())

/** An account made by a real x402 signup of `usdc`; its id. */
async function signup(usdc: string): Promise<string> {
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: usdc }))
  const answer = await post(url, { amountUsdc: usdc }, { 'x-payment': header })
  expect(answer.status).toBe(201)
  const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
  expect(accountId).toBeTruthy()
  return accountId!
}

const readChain = () => auditStackOnChain(stack, chain)

const problemsOf = async (subject: string) =>
  (await auditAll(stack.store, stack.keys)).filter((f) => f.subject === subject).map((f) => f.problem)

test('payments and credits by hand are all an account was given; anything else is named', async () => {
  const paid = await signup('3.000000')
  await new AccountStore(stack.store, stack.keys).credit(paid, '1.500000', 'goodwill', 'test')
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  const onChain = await readChain()
  expect(onChain.findings).toEqual([])
  expect(onChain.checked).toBeGreaterThanOrEqual(1)

  // Money that came from nowhere, with the balance's own sum kept: only the funding audit sees it.
  const account = stack.keys.account(paid)
  await stack.store.hincrby(account, 'confirmed', 7)
  await stack.store.hincrby(account, 'funded', 7)
  expect(await problemsOf(`account ${paid}`)).toEqual([
    'funded 4500007 != its credited payments 3000000 + credits by hand 1500000',
  ])
  await stack.store.hincrby(account, 'confirmed', -7)
  await stack.store.hincrby(account, 'funded', -7)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 90_000)

test("a credited payment's authorization released could move the money again: named", async () => {
  const accountId = await signup('2.000000')
  const mine = (await scanHashes(stack.store, marketGlob(stack.keys.prefix, 'x402:payment:*'))).filter(
    (row) => row.accountId === accountId,
  )
  expect(mine).toHaveLength(1)
  const payment = mine[0]!
  const auth = stack.keys.authorization(payment.authorization!)
  const kept = await stack.store.hgetall(auth)
  await stack.store.del(auth)
  expect(await problemsOf(`payment ${payment.id}`)).toEqual([
    `its authorization ${payment.authorization} is missing`,
  ])
  await stack.store.hset(auth, kept)
  expect(await problemsOf(`payment ${payment.id}`)).toEqual([])
}, 90_000)

test('with the chain read, a credit no transfer to the gateway backs is named', async () => {
  const accountId = await signup('1.000000')
  const ledger = new PaymentLedger(stack.store, stack.keys)
  // A transaction that is on chain but pays someone else (a mint to a payer), and one that never was.
  const payer = await chain.newPayer(5_000_000n)
  const block = await chain.publicClient.getBlock({ blockTag: 'latest' })
  const mint = block.transactions[0] as Hex
  const nowhere = `0x${randomBytes(32).toString('hex')}` as Hex
  const ids: string[] = []
  for (const transaction of [mint, nowhere]) {
    const auth = authorizationId(
      chain.chainId,
      chain.usdc,
      payer.address,
      `0x${randomBytes(32).toString('hex')}`,
    )
    ids.push(paymentId(chain.chainId, transaction, auth))
    const credited = await ledger.credit({
      accountId,
      amount: 5_000_000 as MicroUsdc,
      chainId: chain.chainId,
      transaction,
      authorizationId: auth,
      blockNumber: block.number,
      payer: payer.address,
    })
    expect(credited.status).toBe('credited')
  }
  const problems = (await readChain()).findings
  expect(problems).toContainEqual({
    subject: `payment ${ids[0]}`,
    problem: `its transaction holds no transfer of 5000000 from ${payer.address} to ${chain.payTo}`,
  })
  expect(problems).toContainEqual({
    subject: `payment ${ids[1]}`,
    problem: 'pending, but its transaction is not on chain',
  })
  expect(problems).toHaveLength(2)
}, 90_000)

test("with the chain read, a credit on the payer's plain transfer, not its authorization, is named", async () => {
  const accountId = await signup('1.000000')
  const payer = await chain.newPayer(5_000_000n)
  const { transaction: plain, blockNumber } = await chain.plainTransfer(payer, chain.payTo, 5_000_000n)
  const authorization = authorizationId(
    chain.chainId,
    chain.usdc,
    payer.address,
    `0x${randomBytes(32).toString('hex')}`,
  )
  const credited = await new PaymentLedger(stack.store, stack.keys).credit({
    accountId,
    amount: 5_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: plain,
    authorizationId: authorization,
    blockNumber,
    payer: payer.address,
  })
  expect(credited.status).toBe('credited')
  const subject = `payment ${paymentId(chain.chainId, plain, authorization)}`
  expect((await readChain()).findings.filter((f) => f.subject === subject)).toEqual([
    { subject, problem: `its transaction did not use its authorization ${authorization}` },
  ])
}, 90_000)
