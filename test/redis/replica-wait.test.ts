// A three-master Cluster with a replica each, master by master. Waiting for replicas (the store's
// waitReplicas, under SVC_CLEAR_REPLICAS): one marker and one WAIT per master, each answered by
// its own replica; and the barrier that shares rounds between the clears that arrive while one is
// under way. What the clear journal keeps per master: the masters a clear writes on, the
// replication watch's reading of each, and a lost connection, all named alike.
import { afterAll, expect, test } from 'bun:test'
import { marketSteps } from '../../src/market/steps.ts'
import { masterName } from '../../src/redis/cluster-lane.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { startLocalCluster } from '../../src/redis/local-cluster.ts'
import { ReplicaBarrier } from '../../src/redis/replica-barrier.ts'
import { ReplicationWatch } from '../../src/redis/replication-watch.ts'
import { createStore, mastersOf } from '../../src/redis/store.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { putToSleep } from '../helpers/replicated-redis.ts'
import { testPrefix } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const cluster = await startLocalCluster(3, ['--enable-debug-command', 'yes'], { replicas: true })
// Fail fast, as a gateway's store is: the waits' own client must still queue its first commands.
const store = createStore(cluster.url, { name: 'svc-test-replica-wait', failFast: true })
afterAll(() => {
  store.close()
  cluster.stop()
})

test('on a Cluster, every master waits on its own replica', async () => {
  await store.whenReady(15_000)
  // A replica links to its master a moment after the Cluster serves.
  let counts: number[] = []
  for (let i = 0; i < 100 && !(counts.length === 3 && counts.every((n) => n === 1)); i++)
    counts = await store.waitReplicas(1, 100)
  expect(counts).toEqual([1, 1, 1])
  // Two replicas are more than any master has: each waits out its time and says how many had it.
  expect(await store.waitReplicas(2, 20)).toEqual([1, 1, 1])
}, 30_000)

test('clears that arrive while a round is under way share the next one', async () => {
  let rounds = 0
  let release: (() => void) | null = null
  const waits = {
    waitReplicas: async () => {
      rounds++
      await new Promise<void>((resolve) => {
        release = resolve
      })
      return [1]
    },
  }
  const barrier = new ReplicaBarrier(waits, 1, 100)
  const first = barrier.passed()
  const later = Array.from({ length: 10 }, () => barrier.passed())
  expect(rounds).toBe(1)
  release!()
  expect(await first).toBe('replicated')
  // The ten waited for a round begun after them: one more, not ten.
  await until(() => rounds === 2, 1)
  release!()
  expect(await Promise.all(later)).toEqual(Array(10).fill('replicated'))
  expect(rounds).toBe(2)
})

test('each master has rounds of its own: one whose replicas do not answer holds back only the clears it wrote', async () => {
  const asked: (readonly string[] | undefined)[] = []
  let releaseA: (() => void) | null = null
  const waits = {
    waitReplicas: async (_replicas: number, _ms: number, masters?: readonly string[]) => {
      asked.push(masters)
      if (masters?.[0] !== 'a') return [1]
      await new Promise<void>((resolve) => {
        releaseA = resolve
      })
      return [0]
    },
  }
  const barrier = new ReplicaBarrier(waits, 1, 100)
  const onA = barrier.passed(['a'])
  // a's round still waits: b's does not wait for it.
  expect(await barrier.passed(['b'])).toBe('replicated')
  const onBoth = barrier.passed(['a', 'b'])
  releaseA!()
  expect(await onA).toBe('timed_out')
  // The clear on both joined a's next round: told short, as a's replicas fell short.
  await until(() => asked.filter((m) => m?.[0] === 'a').length === 2, 1)
  releaseA!()
  expect(await onBoth).toBe('timed_out')
  // Masters unknown: one round on every master.
  expect(await barrier.passed()).toBe('replicated')
  expect(asked.at(-1)).toBeUndefined()
})

test('a round with too few replicas, or none answering, says so', async () => {
  expect(await new ReplicaBarrier({ waitReplicas: async () => [1, 0] }, 1, 100).passed()).toBe('timed_out')
  const failing = {
    waitReplicas: async (): Promise<number[]> => {
      throw new Error('connection closed')
    },
  }
  expect(await new ReplicaBarrier(failing, 1, 100).passed()).toBe('failed')
})

test("a clear's masters, the watch's and a lost connection's are named alike, and each master's replicas are read apart", async () => {
  const lost: (string | undefined)[] = []
  const watched = createStore(cluster.url, {
    name: 'svc-test-masters',
    failFast: true,
    onLost: (master) => lost.push(master),
  })
  try {
    await watched.whenReady(15_000)
    const names = (await watched.masters()).map(masterName)
    const byPort = (port: number) => `127.0.0.1:${port}`
    expect(names.toSorted()).toEqual(cluster.nodes.map((n) => byPort(n.port)).toSorted())

    // Held apart, a clear writes on its account's slot and its offer's: named as the Cluster says.
    const steps = marketSteps(watched, keyspace(testPrefix(), 'apart'))
    const slots = steps.clearSlots({ attemptId: 'a.1', accountId: 'acct-1', offerId: 'offer-1', model: 'm' })
    expect(slots).toHaveLength(2)
    const served = await Promise.all(slots.map((key) => serverOf(cluster.url, key)))
    expect(mastersOf(watched, slots)).toEqual([...new Set(served.map((url) => url.replace('redis://', '')))])

    // One master's replica asleep: a write on that master is not confirmed for it; the others'
    // readings go on past it.
    const watch = new ReplicationWatch(() => watched.masters(), 60_000)
    await watch.read()
    const [first, ...others] = cluster.nodes.map((n) => byPort(n.port))
    const { awake } = await putToSleep(`redis://${byPort(cluster.replicas[0]!.port)}`, 6)
    // A replica wait on the other masters alone does not wait for it.
    expect(await watched.waitReplicas(1, 100, [first!])).toEqual([0])
    expect(await watched.waitReplicas(1, 3_000, others)).toEqual([1, 1])
    const onFirst = slots.find((_, i) => served[i] === `redis://${first}`) ?? (await keyOn(first!))
    await watched.set(`${onFirst}:written`, '1', 'PX', 60_000)
    const at = Date.now()
    await until(async () => {
      await watch.read()
      return others.every((name) => watch.replicatedBefore(name) > at)
    })
    expect(watch.replicatedBefore(first)).toBeLessThanOrEqual(at)
    expect(watch.replicatedBefore()).toBeLessThanOrEqual(at)
    await awake
    await until(async () => {
      await watch.read()
      return watch.replicatedBefore(first) > at
    })

    // Its connection to one master cut: the loss names that master alone.
    const [victim] = others
    const list = await redisOn(victim!, 'CLIENT', 'LIST')
    const ids = [...String(list).matchAll(/id=(\d+) .*name=svc-test-masters /g)].map((m) => m[1]!)
    expect(ids.length).toBeGreaterThan(0)
    for (const id of ids) await redisOn(victim!, 'CLIENT', 'KILL', 'ID', id)
    await until(() => lost.length > 0)
    await watched.whenReady(15_000)
    await watched.set(`${await keyOn(victim!)}:after`, '1', 'PX', 60_000)
    expect(lost).toEqual([victim])
  } finally {
    watched.close()
  }
}, 60_000)

/** A key whose slot `master` ("host:port") serves. */
async function keyOn(master: string): Promise<string> {
  for (let i = 0; ; i++) {
    const key = `test:{on-${i}}`
    if ((await serverOf(cluster.url, key)) === `redis://${master}`) return key
  }
}

/** One command straight to one server ("host:port"). */
async function redisOn(server: string, ...args: string[]): Promise<unknown> {
  const [host, port] = server.split(':')
  const direct = createStore(`redis://${host}:${port}`, { name: 'svc-test-direct' })
  try {
    return await direct.call(args[0]!, ...args.slice(1))
  } finally {
    direct.close()
  }
}
