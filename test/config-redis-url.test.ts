// A REDIS_URL that names no server is a bad value: the start stops with one line naming it (exit
// 2), never a gateway that dials a guessed host for ever while it logs "redis unreachable".
import { expect, test } from 'bun:test'
import { ConfigError, loadGatewayConfig, loadStoreConfig } from '../src/config.ts'
import { spawnCli } from './helpers/cli.ts'

const valid = {
  REDIS_URL: 'redis://127.0.0.1:6379',
  SVC_ADMIN_TOKEN: 'a-very-long-admin-token-123456',
  SVC_MASTER_KEY: 'ab'.repeat(32),
  SVC_UPSTREAM_URL: 'http://127.0.0.1:9/api/v1',
}

const hostless = [
  'redis://',
  'rediss://',
  'redis+unix://',
  'redis+unix:///',
  'redis+cluster://',
  'rediss+sentinel://',
]

test.each(hostless)('REDIS_URL=%s is refused by name', (redisUrl) => {
  for (const load of [loadGatewayConfig, loadStoreConfig]) {
    let error: unknown
    try {
      load({ ...valid, REDIS_URL: redisUrl })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ConfigError)
    expect((error as ConfigError).variable).toBe('REDIS_URL')
  }
})

test('the forms the README documents still load', () => {
  for (const redisUrl of [
    'redis://127.0.0.1:6379',
    'rediss://:secret@redis.example:6380/2',
    'redis+unix:///run/redis.sock',
    'redis+cluster://10.0.0.1:7000,10.0.0.2:7000',
    'redis+sentinel://:pw@10.0.0.1:26379/main',
  ]) {
    expect(loadGatewayConfig({ ...valid, REDIS_URL: redisUrl }).redisUrl).toBe(redisUrl)
  }
})

test('serve with a hostless REDIS_URL exits 2 with one line', async () => {
  const r = await spawnCli(['serve'], { ...valid, REDIS_URL: 'redis+cluster://', MIMALLOC_PURGE_HOLES: '0' })
  expect(r.code).toBe(2)
  const lines = r.stderr.trim().split('\n')
  expect(lines).toHaveLength(1)
  expect(lines[0]).toStartWith('config: REDIS_URL must be')
})
