// A chat content part whose prompt tokens the hold cannot bound (a video or a file the supplier
// fetches or decodes itself) is refused, never admitted at the bytes of its JSON: Venice's chat reads
// video and audio into the prompt, billed as prompt tokens the hold never covered. An image part
// of unknown size is held at IMAGE_TOKENS_CEILING; these parts were held at ~25 tokens.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { formatMicros } from '../../src/money/units.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, type SimOffer, simKeyState, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer
beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 12 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '10.000000')
})
afterAll(() => stack.stop())

const post = (content: unknown[]) =>
  fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc/llama-3.3-70b',
      max_tokens: 5,
      messages: [{ role: 'user', content }],
    }),
  })

const unboundable: [string, Record<string, unknown>][] = [
  ['a remote video', { type: 'video_url', video_url: { url: 'https://example.com/two-hours.mp4' } }],
  ['an input_video', { type: 'input_video', input_video: { url: 'https://example.com/v.mp4' } }],
  ['a file by id', { type: 'file', file: { file_id: 'file-abc' } }],
  ['an audio URL', { type: 'audio_url', audio_url: { url: 'https://example.com/a.mp3' } }],
]

for (const [why, part] of unboundable) {
  test(`${why}: 400 unsupported_parameter naming the part, nothing held, nothing sent`, async () => {
    const before = await balances(stack, buyer.accountId)
    const requestsBefore = (await simKeyState(stack, offer.upstreamKey)).requests
    const response = await post([{ type: 'text', text: 'what happens in it?' }, part])
    expect(response.status).toBe(400)
    const body = (await response.json()) as { error: { code: string; message: string } }
    expect(body.error.code).toBe('unsupported_parameter')
    expect(body.error.message).toContain('messages[0].content[1]')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    expect((await simKeyState(stack, offer.upstreamKey)).requests).toBe(requestsBefore)
  })
}

test('text, images and inline audio are still served and held as before', async () => {
  const response = await post([
    { type: 'text', text: 'hi' },
    { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
    { type: 'input_audio', input_audio: { data: 'UklGRiQAAABXQVZF', format: 'wav' } },
  ])
  expect(response.status).toBe(200)
  expect(response.headers.get('x-svc-cost-usdc')).not.toBe(formatMicros(0))
})
