// The funding routes read their bodies as every other route does (json-body.ts): JSON only,
// sent as application/json, bounded while it is read.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'

let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_MAX_BODY_BYTES: '65536' } })
  ;({ stack } = chainStack)
}, 60_000)
afterAll(() => chainStack.stop())

for (const path of ['/v1/x402/signup', '/v1/x402/topup']) {
  test(`${path}: a form body is a 400 invalid_content_type, not a payment challenge`, async () => {
    const response = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'amountUsdc=5.000000',
    })
    expect(response.status).toBe(400)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_content_type')
  })

  test(`${path}: a chunked body past the bound is the contract's 413`, async () => {
    const body = new TextEncoder().encode(
      JSON.stringify({ amountUsdc: '5.000000', pad: 'x'.repeat(100_000) }),
    )
    const response = await fetch(`${stack.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([body]).stream(),
    })
    expect(response.status).toBe(413)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('body_too_large')
  })
}
