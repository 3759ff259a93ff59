// `svc-gateway audit`: checks the money invariants over the whole keyspace (REDIS_URL,
// SVC_REDIS_PREFIX); prints what is off and exits 1, or says all is well and exits 0.
import { loadStoreConfig } from '../config.ts'
import { auditMarket, listWriteOffs } from '../market/audit.ts'
import { formatMicros } from '../money/units.ts'
import { createRedis } from '../redis/connection.ts'
import { keyspace } from '../redis/keys.ts'

export async function audit(): Promise<void> {
  const config = loadStoreConfig()
  const redis = createRedis(config.redisUrl, { name: 'svc-audit' })
  try {
    const keys = keyspace(config.redisPrefix)
    const findings = await auditMarket(redis, keys)
    for (const w of await listWriteOffs(redis, keys)) {
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
    redis.disconnect()
  }
}
