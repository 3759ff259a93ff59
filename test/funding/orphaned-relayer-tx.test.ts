// A relayer transaction held pending under a base fee that rose past its fee, and the replica that
// sent it gone before raising it. What a replacement needs is in Redis, so another replica on the
// same key raises it: its own watch loop, recording the new hash on the claim first, or a relayer
// with no claim to record it on, whose transfer the reconciler finds by the token's
// AuthorizationUsed log. Either way the payment is credited once, and the audit agrees. Real anvil
// behind a pool of the test's own (test/helpers/holding-rpc.ts), real Redis, real HTTP.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createPublicClient, type Hex, http, type PublicClient, parseGwei } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { authorizationId } from '../../src/funding/ledger.ts'
import { Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { createLogger } from '../../src/logger.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { expectFundingAuditClean, untilFundingAtRest } from '../helpers/funding-audit.ts'
import { startHoldingRpc } from '../helpers/holding-rpc.ts'
import { startStack, type TestStack, testPrefix } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { fundedOf, pay } from '../helpers/x402.ts'

let chain: TestChain

beforeAll(async () => {
  chain = await startChain()
}, 30_000)
afterAll(async () => {
  await chain.stop()
})

const AMOUNT = 2_000_000n
const HELD = 10_000_000n
const RISEN = parseGwei('50')

for (const recorded of [true, false]) {
  const by = recorded
    ? "another replica's watch loop: the claim follows the new hash"
    : 'a relayer with no claim to record it on: the reconciler finds it by its authorization'
  test(`an unmined send of a replica gone is raised by ${by}; credited once`, async () => {
    const rpc = startHoldingRpc(chain.rpcUrl)
    const prefix = testPrefix()
    const env = {
      ...chain.env(1),
      SVC_X402_RECEIPT_TIMEOUT_MS: '500',
      SVC_X402_WATCH_INTERVAL_MS: '50',
      SVC_RELAYER_MAX_FEE_GWEI: '1000.000000',
    }
    const stacks: TestStack[] = []
    try {
      // The first replica never raises a fee of its own before it dies.
      const gone = await startStack({
        prefix,
        env: { ...env, SVC_CHAIN_RPC_URL: rpc.url, SVC_RELAYER_BUMP_MS: '86400000' },
      })
      stacks.push(gone)
      const relayer = privateKeyToAccount(chain.relayerKey).address
      const payToBefore = await chain.balanceOf(chain.payTo)
      const payer = await chain.newPayer(HELD)
      rpc.riseAtNextSend(RISEN)
      const answer = await pay(`${gone.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
      expect(answer.response.status).toBe(409)
      const stuck = rpc.broadcasts[0]!
      expect(stuck.tx.maxFeePerGas! < RISEN).toBe(true)
      const nonce = JSON.parse(Buffer.from(answer.header, 'base64').toString()).payload.authorization.nonce
      const authId = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
      await gone.stop()
      stacks.pop()

      // Another replica: its own process, so its own relayer (an RPC address of its own, the
      // same pool). Raising by its watch loop, or only reconciling.
      const survivor = await startStack({
        prefix,
        env: {
          ...env,
          SVC_CHAIN_RPC_URL: `${rpc.url}/survivor`,
          SVC_RELAYER_BUMP_MS: recorded ? '300' : '86400000',
        },
      })
      stacks.push(survivor)
      if (!recorded) {
        const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [rpc.url] } } }
        const client = createPublicClient({ chain: viemChain, transport: http(rpc.url), cacheTime: 0 })
        const options = { afterMs: 0, maxFeePerGas: parseGwei('1000'), logger: createLogger('silent') }
        const bare = new Relayer(chain.relayerKey, client as PublicClient, viemChain, rpc.url, options)
        const turns = new SenderTurns(survivor.store, survivor.keys, relayer)
        expect(await bare.replaceUnmined(turns)).toBe(1)
      }

      await until(async () => (await fundedOf(survivor, payer)) === AMOUNT, 50)
      const claim = await survivor.store.hgetall(survivor.keys.authorization(authId))
      expect(claim.state).toBe('credited')
      const minedHash = claim.paymentId!.split(':')[1] as Hex
      expect(minedHash).not.toBe(stuck.hash)
      expect(claim.tx).toBe(recorded ? minedHash : stuck.hash)
      const mined = await chain.publicClient.getTransaction({ hash: minedHash })
      expect([mined.from.toLowerCase(), mined.nonce, mined.to, mined.input] as unknown[]).toEqual([
        relayer.toLowerCase(),
        stuck.tx.nonce,
        stuck.tx.to,
        stuck.tx.data,
      ])
      expect(mined.maxFeePerGas! >= RISEN).toBe(true)
      await expect(chain.publicClient.getTransactionReceipt({ hash: stuck.hash })).rejects.toThrow()

      await untilFundingAtRest(survivor)
      expect(await fundedOf(survivor, payer)).toBe(AMOUNT)
      expect(await chain.balanceOf(payer.address)).toBe(HELD - AMOUNT)
      expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + AMOUNT)
      await expectFundingAuditClean(survivor, chain, 1)
    } finally {
      for (const stack of stacks) await stack.stop()
      rpc.stop()
    }
  }, 60_000)
}
