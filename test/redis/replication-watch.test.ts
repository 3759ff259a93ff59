// What the replication watch says of a real master and its replica (two redis-servers of the test's
// own): a write is confirmed only once the replica acknowledged it, not while the replica lags
// (asleep); a master that never had a replica confirms at once (the clear journal's window alone
// keeps its clears); and a master cut off from its replica confirms nothing written after the cut
// until the replica is back.
import { afterAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { ReplicationWatch } from '../../src/redis/replication-watch.ts'
import { putToSleep, startReplicatedRedis } from '../helpers/replicated-redis.ts'
import { until } from '../helpers/wait.ts'

const { master, replica } = await startReplicatedRedis()
const alone: LocalRedis = await startLocalRedis()
const onMaster = new Redis(master.url)
const onReplica = new Redis(replica.url)
const onAlone = new Redis(alone.url)
afterAll(async () => {
  for (const client of [onMaster, onReplica, onAlone]) client.disconnect()
  await Promise.all([master.stop(), replica.stop(), alone.stop()])
})

const KEEP_MS = 60_000

/** How many replicas the master lists as connected. */
async function replicasListed(): Promise<number> {
  return ((await onMaster.call('ROLE')) as unknown[][])[2]!.length
}

/** Reads `times` times, each at a later millisecond than `at` and than the one before. */
async function readAfter(watch: ReplicationWatch, at: number, times = 5): Promise<void> {
  let last = at
  for (let i = 0; i < times; i++) {
    await until(() => Date.now() > last, 1)
    last = Date.now()
    await watch.read()
  }
}

/** Reads until the watch confirms writes acknowledged at `at` (the journal forgets a clear kept at `at` once `at` is below it). */
async function confirmed(watch: ReplicationWatch, at: number): Promise<void> {
  await until(async () => {
    await watch.read()
    return watch.replicatedBefore() > at
  }, 50)
}

test('a master without replicas confirms every write at its next reading', async () => {
  const watch = new ReplicationWatch(async () => [onAlone], KEEP_MS)
  expect(watch.replicatedBefore()).toBe(0)
  await onAlone.set('k', '1')
  const at = Date.now()
  await readAfter(watch, at, 1)
  expect(watch.replicatedBefore()).toBeGreaterThan(at)
})

test('a write is confirmed once the replica has it, not while it lags; cut off, nothing after the cut is, until it is back', async () => {
  await until(async () => (await replicasListed()) === 1)
  const watch = new ReplicationWatch(async () => [onMaster], KEEP_MS)
  await onMaster.set('before', '1')
  await confirmed(watch, Date.now())
  expect(await onReplica.get('before')).toBe('1')

  // Lagging: a replica asleep is still listed, at the offset it acknowledged last.
  const { awake } = await putToSleep(replica.url, 1)
  await onMaster.set('lagging', '1')
  const lagging = Date.now()
  await readAfter(watch, lagging)
  expect(watch.replicatedBefore()).toBeLessThanOrEqual(lagging)
  await awake
  await confirmed(watch, lagging)

  // Cut: the replica stops replicating (its master then lists none).
  await onReplica.call('REPLICAOF', 'NO', 'ONE')
  await until(async () => (await replicasListed()) === 0)
  await onMaster.set('during', '1')
  const during = Date.now()
  await readAfter(watch, during)
  expect(watch.replicatedBefore()).toBeLessThanOrEqual(during)
  expect(await onReplica.get('during')).toBeNull()

  // Back: it syncs, acknowledges, and the write is confirmed.
  await onReplica.call('REPLICAOF', '127.0.0.1', String(master.port))
  await confirmed(watch, during)
  await until(async () => (await onReplica.get('during')) === '1')
}, 30_000)

test('of several masters, the least caught up is what the watch confirms for all, and each its own by name', async () => {
  const watch = new ReplicationWatch(async () => [onAlone, onMaster], KEEP_MS)
  await until(async () => (await replicasListed()) === 1)
  await watch.read()
  await onReplica.call('REPLICAOF', 'NO', 'ONE')
  await until(async () => (await replicasListed()) === 0)
  await onMaster.set('cut', '1')
  const at = Date.now()
  await readAfter(watch, at)
  // The master alone confirms at each reading; the cut one holds the least back.
  expect(watch.replicatedBefore()).toBeLessThanOrEqual(at)
  // Each by its own name ("host:port", as a Cluster's slots name it): the one alone is past the write.
  expect(watch.replicatedBefore(`127.0.0.1:${master.port}`)).toBeLessThanOrEqual(at)
  expect(watch.replicatedBefore(`127.0.0.1:${alone.port}`)).toBeGreaterThan(at)
  // A name it never read stands for every master.
  expect(watch.replicatedBefore('127.0.0.1:1')).toBe(watch.replicatedBefore())
  await onReplica.call('REPLICAOF', '127.0.0.1', String(master.port))
  await confirmed(watch, at)
}, 30_000)

test('an offset behind the last read is a new history: its old readings hold nothing back', async () => {
  let role: unknown[] = ['master', 1_000, [['127.0.0.1', '7001', '500']]]
  const fake = { call: async () => role }
  const clock = { now: 1_000 }
  const watch = new ReplicationWatch(
    async () => [fake],
    KEEP_MS,
    () => clock.now,
  )
  await watch.read()
  expect(watch.replicatedBefore()).toBe(0)
  // The master restarted with no data: its offsets start again, and its replica has them.
  clock.now = 2_000
  role = ['master', 10, [['127.0.0.1', '7001', '10']]]
  await watch.read()
  expect(watch.replicatedBefore()).toBe(2_000)
})

test('a server that refuses ROLE confirms at each reading: its clears are kept for the window alone', async () => {
  const refusing = {
    call: async (): Promise<unknown> => {
      throw new Error("ERR unknown command 'ROLE', with args beginning with: ")
    },
  }
  const away = {
    call: async (): Promise<unknown> => {
      throw new Error('Connection is closed.')
    },
  }
  const clock = { now: 5_000 }
  const watch = new ReplicationWatch(
    async () => [refusing],
    KEEP_MS,
    () => clock.now,
  )
  await watch.read()
  expect(watch.replicatedBefore()).toBe(5_000)
  // A connection that failed says nothing: what was confirmed stays, nothing more.
  const cut = new ReplicationWatch(
    async () => [away],
    KEEP_MS,
    () => clock.now,
  )
  await cut.read()
  expect(cut.replicatedBefore()).toBe(0)
})
