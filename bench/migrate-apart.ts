// How long `svc-gateway layout migrate apart` takes: a one-slot market of N accounts, each created
// and credited as the operator does (its hash and its key list: two keys to move), moved apart on a
// local Redis it starts; the time, and per key moved.
//   bun bench/migrate-apart.ts [accounts=2000,10000]
import { randomBytes } from 'node:crypto'
import { AccountStore } from '../src/accounts/accounts.ts'
import { migrateApart } from '../src/cli/migrate-apart.ts'
import { keyspace } from '../src/redis/keys.ts'
import { startLocalRedis } from '../src/redis/local-server.ts'
import { createStore } from '../src/redis/store.ts'

const counts = (process.argv[2] ?? '2000,10000').split(',').map(Number)
const server = await startLocalRedis()
const store = createStore(server.url)
try {
  for (const n of counts) {
    const prefix = `migrate:{m${randomBytes(4).toString('hex')}}`
    const accounts = new AccountStore(store, keyspace(prefix))
    for (let i = 0; i < n; i += 100)
      await Promise.all(
        Array.from({ length: Math.min(100, n - i) }, async () => {
          const { account } = await accounts.create(`0x${randomBytes(20).toString('hex')}`, 50)
          await accounts.credit(account.id, '1.000000', 'bench', 'bench')
        }),
      )
    let moved = 0
    const started = performance.now()
    await migrateApart(store, prefix, {
      seenWithinMs: 10_000,
      say: (line) => {
        moved += Number(/^accounts: (\d+)/.exec(line)?.[1] ?? 0)
      },
    })
    const ms = performance.now() - started
    console.log(
      `${n} accounts: ${moved} keys moved in ${Math.round(ms)} ms, ${Math.round((ms * 1000) / moved)} us a key`,
    )
  }
} finally {
  store.close()
  await server.stop()
}
