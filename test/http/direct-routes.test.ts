// The paid routes are served from Bun.serve's route table ahead of Elysia (src/http/direct-routes.ts).
// Every refusal they answer over HTTP must be the one Elysia's own route answers for the same
// request: the same status, content type, body, and both request-id headers.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createApp } from '../../src/app.ts'
import { CatalogStore } from '../../src/catalog/store.ts'
import { createLogger } from '../../src/logger.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let elysia: ReturnType<typeof createApp>
let apiKey: string
beforeAll(async () => {
  stack = await startStack({ env: { SVC_MAX_BODY_BYTES: '4096' } })
  apiKey = (await fundedBuyer(stack)).apiKey
  // The same app, asked in-process: Elysia's routes, never Bun's table.
  const catalog = new CatalogStore(stack.store, stack.keys, async () => 0)
  elysia = createApp({
    config: stack.config,
    store: stack.store,
    keys: stack.keys,
    catalog,
    logger: createLogger('silent'),
  })
})
afterAll(() => stack.stop())

interface Case {
  name: string
  path: string
  method?: string
  headers?: Record<string, string>
  body?: string
}

const json = (value: unknown) => JSON.stringify(value)
const chat = { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] }
const nested = (depth: number): unknown => (depth === 0 ? 1 : [nested(depth - 1)])

const cases = (): Case[] => {
  const key = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  return [
    {
      name: 'no key',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: json(chat),
    },
    {
      name: 'a malformed key',
      path: '/v1/chat/completions',
      headers: { authorization: 'Bearer nope' },
      body: json(chat),
    },
    { name: 'a cookie', path: '/v1/chat/completions', headers: { ...key, cookie: 'a=b' }, body: json(chat) },
    { name: 'no key and no JSON', path: '/v1/chat/completions', body: '{' },
    {
      name: 'text/plain',
      path: '/v1/chat/completions',
      headers: { ...key, 'content-type': 'text/plain' },
      body: json(chat),
    },
    { name: 'not JSON', path: '/v1/chat/completions', headers: key, body: '{"model":' },
    { name: 'no body', path: '/v1/chat/completions', headers: key },
    { name: 'an array', path: '/v1/chat/completions', headers: key, body: '[1]' },
    { name: 'too deep', path: '/v1/chat/completions', headers: key, body: json({ ...chat, x: nested(70) }) },
    {
      name: 'too long',
      path: '/v1/chat/completions',
      headers: key,
      body: json({ ...chat, pad: 'x'.repeat(5000) }),
    },
    {
      name: 'no messages',
      path: '/v1/chat/completions',
      headers: key,
      body: json({ model: 'llama-3.3-70b' }),
    },
    { name: 'no message', path: '/v1/chat/completions', headers: key, body: json({ ...chat, messages: [] }) },
    {
      name: 'a bad role',
      path: '/v1/chat/completions',
      headers: key,
      body: json({ ...chat, messages: [{ role: 'x' }] }),
    },
    {
      name: 'max_tokens 0',
      path: '/v1/chat/completions',
      headers: key,
      body: json({ ...chat, max_tokens: 0 }),
    },
    { name: 'n past the cap', path: '/v1/chat/completions', headers: key, body: json({ ...chat, n: 129 }) },
    {
      name: 'an unknown model',
      path: '/v1/chat/completions',
      headers: key,
      body: json({ ...chat, model: 'nope' }),
    },
    { name: 'GET', path: '/v1/chat/completions', method: 'GET', headers: key },
    {
      name: 'Responses, no key',
      path: '/v1/responses',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    },
    {
      name: 'Responses, no input',
      path: '/v1/responses',
      headers: key,
      body: json({ model: 'llama-3.3-70b' }),
    },
    {
      name: 'Messages, no key',
      path: '/v1/messages',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    },
    { name: 'Messages, not JSON', path: '/v1/messages', headers: key, body: '{' },
    { name: 'Messages, no max_tokens', path: '/v1/messages', headers: key, body: json(chat) },
  ]
}

async function answer(response: Response) {
  const id = response.headers.get('x-svc-request-id')
  expect(id).toMatch(/^req_[0-9a-f]{24}$/)
  expect(response.headers.get('x-request-id')).toBe(id)
  expect(response.headers.get('request-id')).toBe(id)
  const body = (await response.json()) as Record<string, unknown>
  // Anthropic's shape names the request's own id beside the error: each request has its own.
  if ('request_id' in body) {
    expect(body.request_id).toBe(id)
    body.request_id = 'the request id'
  }
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    retryAfter: response.headers.get('retry-after'),
    authenticate: response.headers.get('www-authenticate'),
    body,
  }
}

describe('the paid routes ahead of Elysia', () => {
  test('answer every refusal as Elysia does, and change nothing', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const c of cases()) {
      const init = { method: c.method ?? 'POST', headers: c.headers ?? {}, body: c.body }
      const served = await answer(await fetch(`${stack.url}${c.path}`, init))
      const inProcess = await answer(await elysia.handle(new Request(`${stack.url}${c.path}`, init)))
      expect({ name: c.name, ...served }).toEqual({ name: c.name, ...inProcess })
      expect(served.status).toBeGreaterThanOrEqual(400)
      expect(served.status).toBeLessThan(500)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})
