import { describe, expect, test } from 'bun:test'
import { ConfigError, loadGatewayConfig } from '../src/config.ts'

const valid = {
  REDIS_URL: 'redis://127.0.0.1:6379',
  SVC_ADMIN_TOKEN: 'a-very-long-admin-token-123456',
  SVC_MASTER_KEY: 'ab'.repeat(32),
  SVC_UPSTREAM_URL: 'http://127.0.0.1:9999/api/v1/',
}

function failure(env: Record<string, string | undefined>): ConfigError {
  try {
    loadGatewayConfig(env)
  } catch (error) {
    if (error instanceof ConfigError) return error
    throw error
  }
  throw new Error('config loaded but should have failed')
}

describe('gateway config', () => {
  test('a valid environment gives typed values and defaults', () => {
    const config = loadGatewayConfig(valid)
    expect(config.port).toBe(8080)
    expect(config.defaultMaxPriceCents).toBe(50)
    expect(config.redisPrefix).toBe('svc:{m}')
    expect(config.upstreamUrl).toBe('http://127.0.0.1:9999/api/v1')
    expect(config.publicUrl).toBe('http://localhost:8080')
    expect(loadGatewayConfig({ ...valid, PORT: '9000' }).publicUrl).toBe('http://localhost:9000')
    expect(loadGatewayConfig({ ...valid, SVC_PUBLIC_URL: 'https://svc.example/' }).publicUrl).toBe(
      'https://svc.example',
    )
    expect(config.masterKey.length).toBe(32)
    expect(config.records).toEqual({ recordRetentionDays: 30, statsMinRequests: 50 })
    expect(config.payouts).toEqual({
      privateKey: undefined,
      minMicros: 1_000_000,
      lowUsdcMicros: 100_000_000,
      lowGasWei: 10n ** 15n,
      intervalMs: 2_000,
      lockTtlMs: 30_000,
      bumpAfterMs: 180_000,
    })
    // What a supplier may send: a buffered answer, one stream frame, a video's media
    expect(config.inference.maxUpstreamBodyBytes).toBe(32 * 1024 * 1024)
    expect(config.inference.maxUpstreamFrameBytes).toBe(1024 * 1024)
    expect(config.inference.maxUpstreamVideoBytes).toBe(128 * 1024 * 1024)
    // A Redis on the same machine can be reached over its Unix socket
    expect(loadGatewayConfig({ ...valid, REDIS_URL: 'redis+unix:///run/redis.sock' }).redisUrl).toBe(
      'redis+unix:///run/redis.sock',
    )
    expect(
      loadGatewayConfig({ ...valid, SVC_MASTER_KEY: Buffer.alloc(32, 7).toString('base64') }).masterKey[0],
    ).toBe(7)
  })

  const cases: [string, Record<string, string | undefined>, string][] = [
    ['REDIS_URL', { REDIS_URL: undefined }, 'a URL'],
    ['REDIS_URL', { REDIS_URL: 'http://x' }, 'redis:'],
    ['REDIS_URL', { REDIS_URL: 'unix:///run/redis.sock' }, 'redis+unix:'],
    ['SVC_ADMIN_TOKEN', { SVC_ADMIN_TOKEN: undefined }, 'at least 24'],
    ['SVC_ADMIN_TOKEN', { SVC_ADMIN_TOKEN: 'short' }, 'at least 24'],
    // sent as a Bearer token, which is one run of visible characters: a phrase could never be sent
    ['SVC_ADMIN_TOKEN', { SVC_ADMIN_TOKEN: 'correct horse battery staple again' }, 'no spaces'],
    ['SVC_ADMIN_TOKEN', { SVC_ADMIN_TOKEN: 'jeton-administrateur-sécurisé-1' }, 'ASCII'],
    ['SVC_MASTER_KEY', { SVC_MASTER_KEY: 'abc' }, '32 bytes'],
    ['SVC_MASTER_KEY', { SVC_MASTER_KEY: undefined }, '32 bytes'],
    ['SVC_UPSTREAM_URL', { SVC_UPSTREAM_URL: 'not a url' }, 'a URL'],
    ['SVC_PUBLIC_URL', { SVC_PUBLIC_URL: 'ftp://svc.example' }, 'a URL'],
    ['PORT', { PORT: 'eighty' }, 'integer'],
    ['PORT', { PORT: '70000' }, 'integer'],
    ['SVC_DEFAULT_MAX_PRICE_CENTS', { SVC_DEFAULT_MAX_PRICE_CENTS: '29' }, '30 to 80'],
    ['SVC_DEFAULT_MAX_PRICE_CENTS', { SVC_DEFAULT_MAX_PRICE_CENTS: '50.5' }, '30 to 80'],
    ['SVC_REDIS_PREFIX', { SVC_REDIS_PREFIX: 'svc:nohashtag' }, 'hash-tag'],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }, 'one of'],
    ['SVC_STATS_MIN_REQUESTS', { SVC_STATS_MIN_REQUESTS: '0' }, 'integer'],
    ['SVC_RECORD_RETENTION_DAYS', { SVC_RECORD_RETENTION_DAYS: '1.5' }, 'integer'],
    ['SVC_MAX_UPSTREAM_BODY_BYTES', { SVC_MAX_UPSTREAM_BODY_BYTES: '1023' }, 'integer'],
    ['SVC_MAX_UPSTREAM_FRAME_BYTES', { SVC_MAX_UPSTREAM_FRAME_BYTES: '1MB' }, 'integer'],
    ['SVC_MAX_UPSTREAM_STREAM_BYTES', { SVC_MAX_UPSTREAM_STREAM_BYTES: '4294967297' }, 'integer'],
    ['SVC_MAX_UPSTREAM_VIDEO_BYTES', { SVC_MAX_UPSTREAM_VIDEO_BYTES: '2147483648' }, 'integer'],
    ['SVC_PAYOUT_PRIVATE_KEY', { SVC_PAYOUT_PRIVATE_KEY: '0x1234' }, '32-byte hex'],
    // a payout wallet needs the funding network (its RPC and USDC)
    ['SVC_PAYOUT_PRIVATE_KEY', { SVC_PAYOUT_PRIVATE_KEY: `0x${'22'.repeat(32)}` }, 'SVC_X402_NETWORK'],
    ['SVC_PAYOUT_MIN_USDC', { SVC_PAYOUT_MIN_USDC: '0' }, 'above zero'],
    ['SVC_PAYOUT_MIN_USDC', { SVC_PAYOUT_MIN_USDC: '1.0000001' }, '6 decimals'],
    ['SVC_PAYOUT_LOW_GAS_ETH', { SVC_PAYOUT_LOW_GAS_ETH: 'lots' }, 'above zero'],
    ['SVC_PAYOUT_LOCK_MS', { SVC_PAYOUT_LOCK_MS: '10' }, 'integer'],
  ]
  for (const [variable, override, expected] of cases) {
    test(`${variable}=${String(Object.values(override)[0])} is refused by name`, () => {
      const error = failure({ ...valid, ...override })
      expect(error.variable).toBe(variable)
      expect(error.message).toContain(variable)
      expect(error.message).toContain(expected)
      expect(error.message.split('\n')).toHaveLength(1)
    })
  }

  test('one key for the relayer and the payout wallet is refused, naming both', () => {
    const key = `0x${'3c'.repeat(32)}`
    const funding = {
      SVC_X402_NETWORK: 'base-sepolia',
      SVC_CHAIN_RPC_URL: 'http://127.0.0.1:8545',
      SVC_PAY_TO: `0x${'11'.repeat(20)}`,
      SVC_RELAYER_PRIVATE_KEY: key,
    }
    // the same key however its hex is cased: each sender would sign at the other's nonce
    const error = failure({
      ...valid,
      ...funding,
      SVC_PAYOUT_PRIVATE_KEY: key.toUpperCase().replace('0X', '0x'),
    })
    expect(error.variable).toBe('SVC_PAYOUT_PRIVATE_KEY')
    expect(error.message).toContain('SVC_RELAYER_PRIVATE_KEY')
    const other = loadGatewayConfig({ ...valid, ...funding, SVC_PAYOUT_PRIVATE_KEY: `0x${'4d'.repeat(32)}` })
    expect(other.payouts.privateKey).toBe(`0x${'4d'.repeat(32)}`)
  })

  test('serve exits non-zero with one line naming the variable', async () => {
    const child = Bun.spawn([process.execPath, 'src/main.ts', 'serve'], {
      env: { PATH: process.env.PATH ?? '', ...valid, SVC_MASTER_KEY: 'nope' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()])
    expect(code).toBe(2)
    const lines = stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toStartWith('config: SVC_MASTER_KEY must be')
  })

  test('an unset required variable is named as unset, and a first start names every one unset', () => {
    const one = failure({ ...valid, SVC_MASTER_KEY: undefined })
    expect(one.variable).toBe('SVC_MASTER_KEY')
    expect(one.message).toStartWith('config: SVC_MASTER_KEY must be set to 32 bytes')
    expect(failure({ ...valid, REDIS_URL: '' }).message).toStartWith('config: REDIS_URL must be set to a URL')
    // Nothing set: one line naming all four, and the command that runs without them.
    const none = failure({})
    expect(none.variable).toBe('REDIS_URL')
    expect(none.message.split('\n')).toHaveLength(1)
    for (const name of ['REDIS_URL', 'SVC_ADMIN_TOKEN', 'SVC_MASTER_KEY', 'SVC_UPSTREAM_URL'])
      expect(none.message).toContain(name)
    expect(none.message).toContain('svc-gateway demo')
    // A value that is set but wrong is judged as before, not called unset.
    expect(failure({ ...valid, SVC_ADMIN_TOKEN: 'short' }).message).not.toContain('must be set')
  })

  test('--version prints the package version', async () => {
    const child = Bun.spawn([process.execPath, 'src/main.ts', '--version'], { stdout: 'pipe' })
    const out = await new Response(child.stdout).text()
    expect(await child.exited).toBe(0)
    expect(out.trim()).toMatch(/^\d+\.\d+\.\d+$/)
  })
})
