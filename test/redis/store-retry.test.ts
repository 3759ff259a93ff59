// whileStoreAway: an idempotent call is tried again while Redis is unreachable, and only then.
import { describe, expect, test } from 'bun:test'
import { whileStoreAway } from '../../src/redis/store-retry.ts'

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
})
