// Whether the RPC answers for the payout chain. Another chain's nonces, receipts and blocks (a load
// balancer or URL moved to another network) say nothing about this one's transfers: a nonce held
// there would fail a payout whose transfer may still be mined here, and be paid again. Read at the
// start of a pass, and again right before a step that ends a payout: a balancer can move mid-pass.
import type { Logger } from 'pino'
import type { FundingChain } from '../funding/chain.ts'

/** The RPC answered for another chain: the pass stops, taking no further step. */
export class OffPayoutChain extends Error {}

export async function onPayoutChain(chain: FundingChain, logger: Logger): Promise<boolean> {
  const answered = await chain.client.getChainId()
  if (answered === chain.chain.id) return true
  logger.error(
    { chainId: answered, expected: chain.chain.id },
    'payout RPC answers for another chain: payouts wait',
  )
  return false
}
