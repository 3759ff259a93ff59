// `svc-gateway audit`: checks the money invariants over the whole keyspace (REDIS_URL,
// SVC_REDIS_PREFIX); prints what is off and exits 1, or says all is well and exits 0.
import { loadStoreConfig } from '../config.ts'
import { auditMarket } from '../market/audit.ts'
import { createRedis } from '../redis/connection.ts'
import { keyspace } from '../redis/keys.ts'

export async function audit(): Promise<void> {
  const config = loadStoreConfig()
  const redis = createRedis(config.redisUrl, { name: 'svc-audit' })
  try {
    const findings = await auditMarket(redis, keyspace(config.redisPrefix))
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
