// Waiting for replicas (the store's waitReplicas, under SVC_CLEAR_REPLICAS): on a three-master
// Cluster with a replica each, one marker and one WAIT per master, each answered by its own
// replica; and the barrier that shares rounds between the clears that arrive while one is under way.
import { afterAll, expect, test } from 'bun:test'
import { startLocalCluster } from '../../src/redis/local-cluster.ts'
import { ReplicaBarrier } from '../../src/redis/replica-barrier.ts'
import { createStore } from '../../src/redis/store.ts'
import { until } from '../helpers/wait.ts'

const cluster = await startLocalCluster(3, [], { replicas: true })
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

test('a round with too few replicas, or none answering, says so', async () => {
  expect(await new ReplicaBarrier({ waitReplicas: async () => [1, 0] }, 1, 100).passed()).toBe('timed_out')
  const failing = {
    waitReplicas: async (): Promise<number[]> => {
      throw new Error('connection closed')
    },
  }
  expect(await new ReplicaBarrier(failing, 1, 100).passed()).toBe('failed')
})
