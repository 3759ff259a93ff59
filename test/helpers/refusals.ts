// What every refusal of bad input must look like: a 4xx in the contract's error shape, with no
// stack trace or source path in it.
import { expect } from 'bun:test'

export async function expectShapedRefusal(response: Response) {
  expect(response.status).toBeGreaterThanOrEqual(400)
  expect(response.status).toBeLessThan(500)
  const text = await response.text()
  expect(text).not.toMatch(/at .*\.ts:\d+|node_modules|Error: /)
  const body = JSON.parse(text) as { error: { message: string; code: string } }
  expect(typeof body.error.message).toBe('string')
  expect(typeof body.error.code).toBe('string')
}
