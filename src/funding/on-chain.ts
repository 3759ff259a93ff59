// Whether an RPC answers for the chain it is asked about. Another chain's answers (a load balancer
// or URL moved to another network, a pool whose nodes differ) say nothing about this one's payments
// or sends: a receipt missing there, an authorization unused and expired there, would take back a
// credit or release a claim whose transfer is mined here, and another chain's nonce count would
// forget a stuck send or raise a mined one. Read at the start of a pass and again right before each
// step that acts on the chain's word: a balancer can move between any two calls.
import type { Logger } from 'pino'
import type { FundingChain } from './chain.ts'

/** True when `client` answers for chain `expected`; else logs `what` with both ids (when given a logger). */
export async function answersForChain(
  client: { getChainId(): Promise<number> },
  expected: number,
  logger: Logger | undefined,
  what: string,
  context: Record<string, unknown> = {},
): Promise<boolean> {
  const answered = await client.getChainId()
  if (answered === expected) return true
  logger?.error({ ...context, chainId: answered, expected }, what)
  return false
}

export function onFundingChain(chain: FundingChain, logger: Logger): Promise<boolean> {
  return answersForChain(
    chain.client,
    chain.chain.id,
    logger,
    'funding RPC answers for another chain: payments wait',
  )
}
