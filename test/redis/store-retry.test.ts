// whileStoreAway: an idempotent call is tried again while Redis is unreachable, and only then.
import { describe, expect, test } from 'bun:test'
import { isRedisUnavailable, storeClosed } from '../../src/redis/connection.ts'
import { waitsFor, whileStoreAway } from '../../src/redis/store-retry.ts'

const storeAway = () => Object.assign(new Error('Connection closed'), { code: 'ERR_REDIS_CONNECTION_CLOSED' })

describe('whileStoreAway', () => {
  test('tries again after each wait while the store is away, and returns what the call gives', async () => {
    let calls = 0
    const result = await whileStoreAway(async () => {
      calls++
      if (calls < 3) throw storeAway()
      return 'cleared'
    }, [1, 1, 1])
    expect(result).toBe('cleared')
    expect(calls).toBe(3)
  })

  test("any other error stands at once: a script's own refusal is not retried", async () => {
    let calls = 0
    const error = await whileStoreAway(async () => {
      calls++
      throw new Error('ERR user_script: boom')
    }, [1, 1, 1]).catch((e: unknown) => e)
    expect((error as Error).message).toContain('boom')
    expect(calls).toBe(1)
  })

  test('past the last wait the store error stands', async () => {
    let calls = 0
    const error = await whileStoreAway(async () => {
      calls++
      throw storeAway()
    }, [1, 1]).catch((e: unknown) => e)
    expect((error as { code?: string }).code).toBe('ERR_REDIS_CONNECTION_CLOSED')
    expect(calls).toBe(3)
  })

  test('once told to stop, the store error stands at once: a shutdown does not wait the store out', async () => {
    let calls = 0
    let stopped = false
    const error = await whileStoreAway(
      async () => {
        calls++
        if (calls === 2) stopped = true
        throw storeAway()
      },
      [1, 1, 1, 1],
      () => stopped,
    ).catch((e: unknown) => e)
    expect((error as { code?: string }).code).toBe('ERR_REDIS_CONNECTION_CLOSED')
    expect(calls).toBe(2)
  })

  test('a closed store is Redis away, and stands at once: no wait brings a store closed for good back', async () => {
    let calls = 0
    const error = await whileStoreAway(async () => {
      calls++
      throw calls === 1 ? storeAway() : storeClosed()
    }, [1, 1, 1, 1]).catch((e: unknown) => e)
    expect(isRedisUnavailable(error)).toBe(true)
    expect(calls).toBe(2)
  })
})

describe('isRedisUnavailable and waitsFor', () => {
  test('told by codes and messages, whatever the class is called (a minified binary renames them)', () => {
    class X extends Error {}
    const outOfRetries = new X(
      'Reached the max retries per request limit (which is 0). Refer to "maxRetriesPerRequest" option for details.',
    )
    expect(isRedisUnavailable(outOfRetries)).toBe(true)
    expect(isRedisUnavailable(new X('LOADING Redis is loading the dataset in memory'))).toBe(true)
    expect(isRedisUnavailable(new X("Stream isn't writeable and enableOfflineQueue options is false"))).toBe(
      true,
    )
    // A Cluster failing over or moving a slot: refused before it ran, or redirected past the client's limit.
    for (const message of [
      'TRYAGAIN the slot of this script is being moved between Cluster nodes',
      'Too many Cluster redirections. Last error: ReplyError: ASK 2987 127.0.0.1:33687',
      "READONLY You can't write against a read only replica.",
      'NOREPLICAS Not enough good replicas to write.',
    ])
      expect(isRedisUnavailable(new X(message))).toBe(true)
    expect(isRedisUnavailable(new X('ERR user_script:1: LOADING is not a store error here'))).toBe(false)
    expect(isRedisUnavailable(null)).toBe(false)
  })

  test('waitsFor adds up to the time asked, short waits first', () => {
    const waits = waitsFor(3_000)
    expect(waits.slice(0, 3)).toEqual([50, 100, 200])
    expect(waits.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3_000)
    expect(Math.max(...waits)).toBe(1_000)
    expect(waitsFor(0)).toEqual([])
  })
})
