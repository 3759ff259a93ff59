// A remote x402 facilitator for the funding tests: x402's own reference implementation
// (x402Facilitator with @x402/evm's exact schemes, v1 and v2), settling on the test chain with its
// own key, served over real HTTP (POST /verify, POST /settle). The gateway, configured with
// SVC_FACILITATOR_URL, talks to it as it would to any facilitator; nothing of the gateway's own
// settlement code runs on this side.
import { x402Facilitator } from '@x402/core/facilitator'
import type { PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme } from '@x402/evm/exact/facilitator'
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator'
import { createWalletClient, type Hex, http, publicActions } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import type { TestChain } from './chain.ts'

// anvil's third development key: not the gateway relayer's, not the token deployer's.
const FACILITATOR_KEY: Hex = '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a'

export interface TestFacilitator {
  url: string
  /** How many /verify and /settle calls it answered. */
  calls: { verify: number; settle: number }
  /**
   * Set to misbehave on /settle: settle for real (the transfer is sent and mined), then answer 500
   * as if it had failed, so the gateway never hears the transaction.
   */
  failAfterSettle: boolean
  /**
   * Set to lie on /settle: `send` false sends nothing; `answer` is what it says instead, given the
   * answer it would have given (undefined when nothing was sent).
   */
  lie: { send: boolean; answer: (settled: SettleResponse | undefined) => unknown } | undefined
  stop(): void
}

export function startFacilitator(chain: TestChain): TestFacilitator {
  const account = privateKeyToAccount(FACILITATOR_KEY)
  const client = createWalletClient({
    account,
    chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } },
    transport: http(chain.rpcUrl),
    pollingInterval: 50,
  }).extend(publicActions)
  // biome-ignore lint/suspicious/noExplicitAny: viem's generic signatures against the signer's loose ones
  const signer = toFacilitatorEvmSigner(Object.assign(client, { address: account.address }) as any)
  const facilitator = new x402Facilitator()
    .register('eip155:84532', new ExactEvmScheme(signer))
    .registerV1('base-sepolia' as never, new ExactEvmSchemeV1(signer))

  const calls = { verify: 0, settle: 0 }
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const path = new URL(request.url).pathname
      if (request.method !== 'POST' || (path !== '/verify' && path !== '/settle')) {
        return new Response('not found', { status: 404 })
      }
      const { paymentPayload, paymentRequirements } = (await request.json()) as {
        paymentPayload: PaymentPayload
        paymentRequirements: PaymentRequirements
      }
      if (path === '/verify') {
        calls.verify++
        return Response.json(await facilitator.verify(paymentPayload, paymentRequirements))
      }
      calls.settle++
      const lie = handle.lie
      if (lie && !lie.send) return Response.json(lie.answer(undefined))
      const settled = await facilitator.settle(paymentPayload, paymentRequirements)
      if (lie) return Response.json(lie.answer(settled))
      if (handle.failAfterSettle) return new Response('upstream connect error', { status: 500 })
      return Response.json(settled)
    },
  })
  const handle: TestFacilitator = {
    url: `http://127.0.0.1:${server.port}`,
    calls,
    failAfterSettle: false,
    lie: undefined,
    stop: () => server.stop(true),
  }
  return handle
}
