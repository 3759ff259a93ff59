// Whether the RPC answers for the funding chain. Another chain's answers (a load balancer or URL
// moved to another network, a pool whose nodes differ) say nothing about this one's payments: a
// receipt missing there, an authorization unused and expired there, would take back a credit or
// release a claim whose transfer is mined here. Read at the start of a pass and again right before
// each step that moves money on the chain's word: a balancer can move between any two calls.
import type { Logger } from 'pino'
import type { FundingChain } from './chain.ts'

export async function onFundingChain(chain: FundingChain, logger: Logger): Promise<boolean> {
  const answered = await chain.client.getChainId()
  if (answered === chain.chain.id) return true
  logger.error(
    { chainId: answered, expected: chain.chain.id },
    'funding RPC answers for another chain: payments wait',
  )
  return false
}
