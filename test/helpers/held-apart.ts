// A gateway whose market is held apart, on a real three-master Redis Cluster: the stack (its
// own simulated supplier), a store on the cluster for the test's own reads, the market's keyspace
// and its owners', and the audit of every slot to run after each test.
import { randomBytes } from 'node:crypto'
import OpenAI from 'openai'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { type Owners, ownerKeyspaces } from '../../src/market/two-phase.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import type { SimSettings } from '../../src/sim/server.ts'
import { type RedisCluster, startRedisCluster } from './redis-cluster.ts'
import { startStack, type TestStack } from './stack.ts'
import { until } from './wait.ts'

/**
 * The audit's words for a clear whose offer's side is not posted yet: its reservation pending, or,
 * where a failover lost the reservation, none until the post writes it.
 */
const IN_TRANSIT = [
  'cleared on its account but its reservation is not posted',
  'cleared on its account with no reservation on its offer',
]

export interface HeldApart {
  cluster: RedisCluster
  stack: TestStack
  store: Store
  keys: Keyspace
  owners: Owners
  accounts: AccountStore
  /** A buyer with 5 USDC and a max price of `maxPriceCents`, and an openai client on its key. */
  buyer(maxPriceCents?: number): Promise<{ accountId: string; apiKey: string; client: OpenAI }>
  /**
   * Resolves once no clear waits on its offer's side: the gateway answers once the account is
   * charged and posts the offer's side a moment later (src/market/post-queue.ts).
   */
  posted(): Promise<void>
  stop(): Promise<void>
}

export async function startHeldApart(
  name: string,
  options: { sim?: Partial<SimSettings>; env?: Record<string, string> } = {},
): Promise<HeldApart> {
  const cluster = await startRedisCluster()
  const stack = await startStack({
    sim: options.sim,
    env: { REDIS_URL: cluster.url, SVC_REAP_INTERVAL_MS: '50', ...options.env },
    tune: (config) => {
      config.redisLayout = 'apart'
    },
  })
  const store = createStore(cluster.url, { name })
  await store.whenReady(15_000)
  const keys = keyspace(stack.config.redisPrefix, 'apart')
  const accounts = new AccountStore(store, keys)
  return {
    cluster,
    stack,
    store,
    keys,
    owners: ownerKeyspaces(keys.prefix),
    accounts,
    async buyer(maxPriceCents = 50) {
      const { account, apiKey } = await accounts.create(`0x${randomBytes(20).toString('hex')}`, maxPriceCents)
      await accounts.credit(account.id, '5.000000', 'test funds', 'test')
      const client = new OpenAI({ apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
      return { accountId: account.id, apiKey, client }
    },
    posted() {
      return until(
        async () => !(await auditApart(store, keys.prefix)).some((f) => IN_TRANSIT.includes(f.problem)),
      )
    },
    async stop() {
      await stack.stop()
      store.close()
      cluster.stop()
    },
  }
}
