// The upstream key check against upstreams that misbehave, on a real socket: whatever they answer,
// the gateway says only upstream_key_rejected (the key) or upstream_unavailable (the upstream),
// never their words, and never waits or reads without bound.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/errors.ts'
import { checkUpstreamKey } from '../../src/suppliers/upstream-key-check.ts'

const SECRET_WORDS = 'internal-upstream-detail-42'
let server: ReturnType<typeof Bun.serve>
let base: string

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const key = (request.headers.get('authorization') ?? '').replace(/^Bearer /, '')
      const url = new URL(request.url)
      if (url.pathname !== '/api/v1/api_keys/rate_limits') return new Response('no', { status: 404 })
      switch (key) {
        case 'good':
          return Response.json({ data: { balances: { DIEM: 12.5, USD: 0 } } })
        case 'unauthorized':
          return Response.json({ error: SECRET_WORDS }, { status: 401 })
        case 'server-error':
          return Response.json({ error: SECRET_WORDS }, { status: 500 })
        case 'not-json':
          return new Response(`<html>${SECRET_WORDS}</html>`, { status: 200 })
        case 'no-balances':
          return Response.json({ data: { note: SECRET_WORDS } })
        case 'huge':
          return new Response(`{"data":{"balances":{"DIEM":1},"pad":"${'x'.repeat(200_000)}"}}`)
        case 'stall':
          await Bun.sleep(5_000)
          return Response.json({ data: { balances: {} } })
        default:
          return new Response('?', { status: 400 })
      }
    },
  })
  base = `http://127.0.0.1:${server.port}/api/v1`
})
afterAll(() => server.stop(true))

async function outcome(key: string, timeoutMs?: number) {
  try {
    await checkUpstreamKey(base, key, timeoutMs)
    return 'accepted'
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError)
    const api = error as ApiError
    expect(JSON.stringify(api.body())).not.toContain(SECRET_WORDS)
    return `${api.status} ${api.code}`
  }
}

describe('checkUpstreamKey', () => {
  test('a key whose balances the upstream reports is accepted, with its DIEM balance in micro-DIEM', async () => {
    expect(await outcome('good')).toBe('accepted')
    expect(Number(await checkUpstreamKey(base, 'good'))).toBe(12_500_000)
  })

  test('a 4xx, a body that is not JSON or has no balances, or one past the size cap is rejected', async () => {
    for (const key of ['unauthorized', 'not-json', 'no-balances', 'huge']) {
      expect({ key, outcome: await outcome(key) }).toEqual({ key, outcome: '400 upstream_key_rejected' })
    }
  })

  test('a 5xx, an upstream too slow, or none at all is the upstream, not the key', async () => {
    expect(await outcome('server-error')).toBe('503 upstream_unavailable')
    expect(await outcome('stall', 200)).toBe('503 upstream_unavailable')
    await expect(checkUpstreamKey('http://127.0.0.1:1', 'good')).rejects.toMatchObject({
      status: 503,
      code: 'upstream_unavailable',
    })
  })
})
