// A master and its replica of a test's own, and a replica put to sleep: what asynchronous
// replication loses is shown on real servers.
import Redis from 'ioredis'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { until } from './wait.ts'

/** A master and a replica of it (DEBUG allowed on the replica, to put it to sleep). */
export async function startReplicatedRedis(): Promise<{ master: LocalRedis; replica: LocalRedis }> {
  // A replica that connects is synced at once, not after the default 5 s gathering of others.
  const master = await startLocalRedis(['--repl-diskless-sync-delay', '0'])
  const replica = await startLocalRedis([
    '--replicaof',
    '127.0.0.1',
    String(master.port),
    '--enable-debug-command',
    'yes',
  ])
  return { master, replica }
}

/**
 * A Redis server put to sleep (DEBUG SLEEP): a replica that neither reads its master's stream nor
 * acknowledges it, nor reconnects, for `seconds`. Resolves once the sleep has begun (the server
 * stops answering); `awake` resolves when it ends.
 */
export async function putToSleep(url: string, seconds: number): Promise<{ awake: Promise<void> }> {
  const sleeper = new Redis(url)
  // A server stopped while it sleeps (the test's end) is not an error of the test's.
  sleeper.on('error', () => {})
  const probe = new Redis(url, { commandTimeout: 100, maxRetriesPerRequest: 0 })
  probe.on('error', () => {})
  // Both connected and answered first: on a busy machine a connection still being made times a
  // probe out too, which would be taken for a sleep not yet begun.
  await sleeper.ping()
  await until(() =>
    probe.ping().then(
      () => true,
      () => false,
    ),
  )
  const awake = sleeper
    .call('DEBUG', 'SLEEP', String(seconds))
    .then(
      () => {},
      () => {},
    )
    .finally(() => sleeper.disconnect())
  await until(() =>
    probe.ping().then(
      () => false,
      () => true,
    ),
  )
  probe.disconnect()
  return { awake }
}
