// `svc-gateway serve` with a HOST it cannot listen on: exit non-zero naming HOST/PORT, not a bare EINVAL.
import { expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { spawnCli } from '../helpers/cli.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'

test('serve with HOST=999.9.9.9 names HOST in its error', async () => {
  const r = await spawnCli(['serve'], {
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: testPrefix(),
    SVC_ADMIN_TOKEN: randomBytes(16).toString('hex'),
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
    LOG_LEVEL: 'silent',
    PORT: '0',
    HOST: '999.9.9.9',
  })
  expect(r.code).not.toBe(0)
  expect(r.stderr).toContain('HOST')
  expect(r.stderr).not.toContain('    at ')
}, 60_000)
