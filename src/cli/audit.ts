// `svc-gateway audit [--chain]`: checks the money invariants over the whole keyspace (REDIS_URL,
// SVC_REDIS_PREFIX), each finding read again before it is named (audit-live.ts); prints what is
// off and exits 1, or says all is well and exits 0. With --chain it also reads every confirmed
// payout's receipt from the funding network (the same SVC_X402_NETWORK, SVC_CHAIN_RPC_URL,
// SVC_USDC_ADDRESS ... as serve), and every credited payment's transfer to SVC_PAY_TO.

import { loadFundingConfig, loadStoreConfig } from '../config.ts'
import { auditFundingOnChain } from '../funding/audit.ts'
import { fundingChain } from '../funding/chain.ts'
import { CHAIN_IDS } from '../funding/network.ts'
import { listWriteOffs } from '../market/audit.ts'
import { formatMicros } from '../money/units.ts'
import { auditPayoutsOnChain } from '../payouts/audit.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'
import { auditLive } from './audit-live.ts'

export { auditAll } from './audit-all.ts'

export async function audit(args: string[] = []): Promise<void> {
  const unknown = args.filter((a) => a !== '--chain')
  if (unknown.length) {
    console.error(`usage: svc-gateway audit [--chain] (unknown: ${unknown.join(' ')})`)
    process.exitCode = 2
    return
  }
  const config = loadStoreConfig()
  const funding = args.includes('--chain') ? loadFundingConfig() : undefined
  if (args.includes('--chain') && !funding) {
    console.error('audit --chain needs the funding network: SVC_X402_NETWORK, SVC_CHAIN_RPC_URL ...')
    process.exitCode = 2
    return
  }
  const store = createStore(config.redisUrl, { name: 'svc-audit' })
  try {
    const keys = await recordedKeyspace(store, config.redisPrefix)
    const findings = await auditLive(store, keys)
    if (funding) {
      const chain = fundingChain(funding)
      const onChain = await auditPayoutsOnChain(store, keys, chain, funding.usdcAddress)
      console.log(`audit: ${onChain.checked} confirmed payout(s) read on chain`)
      const paid = await auditFundingOnChain(
        store,
        keys,
        chain,
        CHAIN_IDS[funding.network],
        funding.usdcAddress,
        funding.payTo,
      )
      const elsewhere = paid.elsewhere ? ` (${paid.elsewhere} of another chain not read)` : ''
      console.log(`audit: ${paid.checked} credited payment(s) read on chain${elsewhere}`)
      findings.push(...onChain.findings, ...paid.findings)
    }
    for (const w of await listWriteOffs(store, keys)) {
      const whose = w.accountId ? ` account ${w.accountId}, offer ${w.offerId}` : ''
      console.log(
        `audit: write-off ${formatMicros(w.amount)} USDC, attempt ${w.attemptId}${whose}: ${w.reason}`,
      )
    }
    if (findings.length === 0) {
      console.log('audit: every invariant holds')
      return
    }
    for (const { subject, problem } of findings) console.log(`audit: ${subject}: ${problem}`)
    console.log(`audit: ${findings.length} finding(s)`)
    process.exitCode = 1
  } finally {
    store.close()
  }
}
