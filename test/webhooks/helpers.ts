// A webhook receiver of the test's own, on loopback (allowed only by SVC_WEBHOOK_ALLOW_LOOPBACK):
// it answers each request as the next scripted answer says (hang past the timeout, a status), then
// 200, and keeps every request it got. It may start late, on a port kept for it (freePort), so the
// tries before it listens fail to connect.

import { keyFetch } from '../helpers/accounts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

export interface Received {
  id: string
  timestamp: string
  signature: string
  body: string
}

export type Answer = 'hang' | number

export function startReceiver(script: Answer[] = [], port = 0) {
  const received: Received[] = []
  const answers = [...script]
  const hanging: (() => void)[] = []
  const server = Bun.serve({
    port,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = await request.text()
      received.push({
        id: request.headers.get('svc-webhook-id') ?? '',
        timestamp: request.headers.get('svc-webhook-timestamp') ?? '',
        signature: request.headers.get('svc-webhook-signature') ?? '',
        body,
      })
      const answer = answers.shift() ?? 200
      if (answer === 'hang') await new Promise<void>((resolve) => hanging.push(resolve))
      return new Response('ok', { status: answer === 'hang' ? 200 : answer })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    received,
    /** Each event once, by id, in the order first received. */
    unique(): Received[] {
      const seen = new Map<string, Received>()
      for (const r of received) if (!seen.has(r.id)) seen.set(r.id, r)
      return [...seen.values()]
    },
    async stop() {
      for (const resolve of hanging) resolve()
      await server.stop(true)
    },
  }
}

export function registerWebhook(
  stack: TestStack,
  apiKey: string,
  path: '/v1/agent' | '/v1/supplier',
  json: unknown,
) {
  return keyFetch(stack, apiKey, `${path}/webhooks`, { method: 'POST', json })
}

/** A stack that delivers to loopback (the test-only setting), retrying and polling fast. */
export function startWebhookStack(env: Record<string, string> = {}): Promise<TestStack> {
  return startStack({
    env: { ...env, SVC_WEBHOOK_ALLOW_LOOPBACK: '1' },
    tune: (config) => {
      config.webhooks.backoffMs = 100
      config.webhooks.pollMs = 50
    },
  })
}

/** A loopback port nothing listens on now: a receiver may start on it later. */
export function freePort(): number {
  const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const { port } = probe
  probe.stop(true)
  return port as number
}
