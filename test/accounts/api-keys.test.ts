// Key material and the lastUsedAt throttle, without Redis.
import { describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import {
  digestApiKey,
  generateApiKey,
  KEY_PREFIX_LENGTH,
  keyPrefix,
  looksLikeApiKey,
} from '../../src/accounts/api-keys.ts'
import { LastUsedThrottle, TOUCH_INTERVAL_MS } from '../../src/accounts/last-used.ts'

describe('API keys', () => {
  test('svc_ then 32 random bytes in base64url; a UUID id; prefix and digest derived from it', () => {
    const key = generateApiKey()
    expect(key.plaintext).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)
    expect(Buffer.from(key.plaintext.slice(4), 'base64url')).toHaveLength(32)
    expect(key.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(key.prefix).toBe(key.plaintext.slice(0, 12))
    expect(KEY_PREFIX_LENGTH).toBe(12)
    expect(key.digest).toBe(createHash('sha256').update(key.plaintext).digest('hex'))
    expect(digestApiKey(key.plaintext)).toBe(key.digest)
    expect(keyPrefix(key.plaintext)).toBe(key.prefix)
  })

  test('every key is new', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => generateApiKey().plaintext))
    expect(keys.size).toBe(1000)
  })

  test('only key-shaped strings are looked up', () => {
    expect(looksLikeApiKey(generateApiKey().plaintext)).toBe(true)
    for (const bad of [
      '',
      'svc_',
      'svc_short',
      `sk_${'a'.repeat(43)}`,
      `svc_${'a'.repeat(42)}`,
      `svc_${'a'.repeat(129)}`,
      `svc_${'a'.repeat(42)}=`,
      `svc_${'a'.repeat(42)} `,
    ]) {
      expect(looksLikeApiKey(bad)).toBe(false)
    }
  })
})

describe('lastUsedAt throttle', () => {
  const clock = (start: number) => {
    const time = { now: start }
    return { time, throttle: new LastUsedThrottle(() => time.now) }
  }

  test('at most one write a minute per key in this process', () => {
    const { time, throttle } = clock(1_000_000)
    expect(throttle.shouldTouch('k1', null)).toBe(true)
    expect(throttle.shouldTouch('k1', null)).toBe(false)
    time.now += TOUCH_INTERVAL_MS - 1
    expect(throttle.shouldTouch('k1', null)).toBe(false)
    expect(throttle.shouldTouch('k2', null)).toBe(true)
    time.now += 1
    expect(throttle.shouldTouch('k1', null)).toBe(true)
  })

  test("a write made elsewhere (admit's, by digest) counts as this process's for the minute", () => {
    const { time, throttle } = clock(2_000_000)
    throttle.touched('k')
    expect(throttle.shouldTouch('k', null)).toBe(false)
    time.now += TOUCH_INTERVAL_MS
    expect(throttle.shouldTouch('k', null)).toBe(true)
  })

  test('no write while the stored value is fresh (another replica wrote it)', () => {
    const { time, throttle } = clock(5_000_000)
    expect(throttle.shouldTouch('k', time.now - 10_000)).toBe(false)
    expect(throttle.shouldTouch('k', time.now - TOUCH_INTERVAL_MS)).toBe(true)
  })

  test('keeps deciding correctly across a prune of old entries', () => {
    const { time, throttle } = clock(0)
    for (let i = 0; i < 10_000; i++) throttle.shouldTouch(`old-${i}`, null)
    time.now += TOUCH_INTERVAL_MS
    expect(throttle.shouldTouch('fresh', null)).toBe(true)
    expect(throttle.shouldTouch('fresh', null)).toBe(false)
    expect(throttle.shouldTouch('old-1', null)).toBe(true)
  })
})
