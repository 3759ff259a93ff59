// Payouts on the local chain: a payout wallet (a fresh key given gas and test USDC), the gateway's
// payout environment, earnings written as a clear leaves them (the offer's earned and a fill), and
// readers for what the chain holds: the token's Transfer logs from the payout wallet.
import { randomBytes, randomUUID } from 'node:crypto'
import { type Address, getAddress, type Hex, parseAbiItem } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { type FundingConfig, loadGatewayConfig } from '../../src/config.ts'
import { OfferService } from '../../src/market/offers.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import { keyFetch } from './accounts.ts'
import type { TestChain } from './chain.ts'
import { seedSupplier } from './market.ts'
import { type TestStack, testRedisUrl } from './stack.ts'

export const TRANSFER = parseAbiItem(
  'event Transfer(address indexed from, address indexed to, uint256 value)',
)

/** A payout wallet holding `usdc` micro-USDC and 10 ETH of gas. */
export async function payoutWalletOn(chain: TestChain, usdc = 1_000_000_000n) {
  const key: Hex = generatePrivateKey()
  const address = privateKeyToAccount(key).address
  await chain.testClient.setBalance({ address, value: 10n ** 19n })
  if (usdc > 0n) await chain.mint(address, usdc)
  return { key, address }
}

/** The gateway's funding and payout configuration on this chain (a fast sender loop). */
export function payoutEnv(chain: TestChain, key: Hex, confirmations = 2): Record<string, string> {
  return {
    ...chain.env(confirmations),
    SVC_PAYOUT_PRIVATE_KEY: key,
    SVC_PAYOUT_INTERVAL_MS: '50',
    SVC_X402_RECEIPT_TIMEOUT_MS: '2000',
  }
}

/** The funding configuration a sender run by a test reads: the gateway's, loaded from payoutEnv. */
export function payoutFunding(chain: TestChain, key: Hex, confirmations: number): FundingConfig {
  return loadGatewayConfig({
    REDIS_URL: testRedisUrl(),
    SVC_ADMIN_TOKEN: 'x'.repeat(24),
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
    ...payoutEnv(chain, key, confirmations),
  }).funding!
}

/** Earnings of `micros` on a fresh offer of the supplier, as a clear writes them (earned and a fill). */
export async function seedEarnings(
  stack: Pick<TestStack, 'store' | 'keys'>,
  supplierId: string,
  micros: number,
): Promise<string> {
  const offers = new OfferService(stack.store, stack.keys, new Uint8Array(32))
  const digest = randomUUID()
  const offer = await offers.create({
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamApiKey: `k-${digest}`,
    askCents: 40,
    capacity: 5_000_000 as MicroDiem,
    status: 'paused',
    supplierId,
    upstreamKeyDigest: digest,
  })
  await stack.store.hset(stack.keys.offer(offer.id), 'earned', micros)
  await stack.store.xadd(
    stack.keys.supplierFills(supplierId),
    '*',
    'offer',
    offer.id,
    'earnedUsdc',
    String(micros),
  )
  return offer.id
}

/** Every USDC transfer from `from` (to `to`, when given) the chain holds. */
export async function transfersFrom(chain: TestChain, from: Address, to?: Address) {
  const logs = await chain.publicClient.getLogs({
    address: chain.usdc,
    event: TRANSFER,
    args: to ? { from, to } : { from },
    fromBlock: 0n,
  })
  return logs.map((log) => ({ to: log.args.to!, value: log.args.value!, tx: log.transactionHash }))
}

export interface PayoutBody {
  id: string
  amountUsdc: string
  wallet: string
  state: string
  txHash: string | null
  blockNumber: number | null
  error: string | null
}

export function postPayout(stack: TestStack, apiKey: string, amountUsdc: string, key: string | null) {
  return keyFetch(stack, apiKey, '/v1/supplier/payouts', {
    method: 'POST',
    json: { amountUsdc },
    headers: key === null ? {} : { 'idempotency-key': key },
  })
}

/** Polls the payout until it reaches one of `states`, mining a block each poll so confirmations come. */
export async function waitForPayout(
  stack: TestStack,
  chain: TestChain,
  apiKey: string,
  id: string,
  states: string[],
): Promise<PayoutBody> {
  const deadline = Date.now() + 20_000
  for (;;) {
    const payout = (await (await keyFetch(stack, apiKey, `/v1/supplier/payouts/${id}`)).json()) as PayoutBody
    if (states.includes(payout.state)) return payout
    if (Date.now() > deadline) throw new Error(`payout ${id} still ${payout.state}`)
    if (payout.state === 'pending') await chain.testClient.mine({ blocks: 1 })
    await Bun.sleep(50)
  }
}

export async function supplierMe(stack: TestStack, apiKey: string) {
  return (await (await keyFetch(stack, apiKey, '/v1/supplier/me')).json()) as Record<string, string>
}

/**
 * Passes of `sender` until the payout `id` holds what `holds` asks. The tests' senders hold a short
 * lock, so that one left hanging lapses soon; on a busy machine a renewal can stall past it and the
 * pass ends early: the next pass goes on from what was recorded.
 */
export async function passUntil(
  sender: PayoutSender,
  payouts: PayoutStore,
  id: string,
  holds: (payout: Payout) => boolean | Promise<boolean>,
): Promise<Payout> {
  for (;;) {
    await sender.tick()
    const payout = (await payouts.get(id))!
    if (await holds(payout)) return payout
    await Bun.sleep(10)
  }
}

/** A supplier earning `earned` micros, and its payout of `amount` in `sending`. */
export async function payoutOf(
  deps: Pick<TestStack, 'store' | 'keys'> & { payouts: PayoutStore },
  amount: number,
  earned = amount,
) {
  const supplierId = await seedSupplier(deps, 'active')
  await seedEarnings(deps, supplierId, earned)
  const { payout } = await deps.payouts.create(supplierId, amount, `key-${supplierId}`, 1)
  return { supplierId, payout, to: getAddress(payout.wallet) }
}

/** A supplier's paid out, pending and payable (earned less both). */
export async function supplierMoney(deps: Pick<TestStack, 'store' | 'keys'>, supplierId: string) {
  const s = await new SupplierStore(deps.store, deps.keys).require(supplierId)
  return { paidOut: s.paidOut, pending: s.pending, payable: s.earned - s.paidOut - s.pending }
}
