// Image models the upstream bills by tier, over real HTTP against the simulated supplier:
// nano-banana-pro by resolution, gpt-image-2 by resolution and quality (`high` when a request names
// none). Each request goes to the upstream's native `/image/generate`, the endpoint that bills the tier
// it names (the simulated OpenAI-compatible `/images/generations` bills a tiered model its default
// tier, 1K high, whatever it is asked: a debit at any other tier proves the request never went
// there), and is held and burned at exactly its tier's price: the buyer pays burn x ask and the
// supplier's key is debited the burn. A request that does not name its tier, or asks more than one
// image, is a 400 naming the parameter, with nothing moved in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { CatalogStore } from '../../src/catalog/store.ts'
import { mapUpstreamModel } from '../../src/catalog/venice-mapping.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import { TINY_PNG_BASE64 } from '../../src/sim/images.ts'
import { findSimModel } from '../../src/sim/models.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, type SimOffer, simKey, simKeyState, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const ASK = 40
/** A copy of gpt-image-2 whose list publishes no default quality (written to the catalog below). */
const NO_DEFAULT = 'gpt-image-2-no-default'

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { slowFirstByteMs: 1_000 }, env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  offer = await simOffer(stack, ASK)
  buyer = await fundedBuyer(stack, '10.000000')
  const catalog = new CatalogStore(stack.store, stack.keys)
  const entries = [...(await catalog.stored()).values()]
  const listed = findSimModel('gpt-image-2')!
  const { constraints: _, ...spec } = listed.model_spec
  entries.push(mapUpstreamModel({ ...listed, id: NO_DEFAULT, model_spec: spec })!)
  await catalog.replace(entries, 'test')
  await until(async () => (await fetch(`${stack.url}/v1/models/${NO_DEFAULT}`)).status === 200)
})
afterAll(() => stack.stop())

const generate = (json: Record<string, unknown>) =>
  keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
    method: 'POST',
    json: { prompt: 'a lighthouse', ...json },
  })

const keyBalance = async () => parseMicros((await simKeyState(stack, offer.upstreamKey)).balanceDiem)!

describe('image models priced by tier', () => {
  test('the public rows show the tiers, and the default quality where it is published', async () => {
    const row = async (id: string) => (await (await fetch(`${stack.url}/v1/models/${id}`)).json()) as never
    expect(await row('nano-banana-pro')).toMatchObject({
      status: 'live',
      pricing: { unit: 'image', resolutions: { '1K': '0.180000', '2K': '0.240000', '4K': '0.350000' } },
    })
    expect(await row('gpt-image-2')).toMatchObject({
      status: 'live',
      pricing: {
        resolutions: { '1K': '0.270000', '2K': '0.510000', '4K': '0.840000' },
        quality: { '2K': { low: '0.030000', medium: '0.130000', high: '0.500000' } },
        default_quality: 'high',
      },
    })
    expect(((await row(NO_DEFAULT)) as { pricing: object }).pricing).not.toHaveProperty('default_quality')
  })

  for (const [why, body, burn] of [
    ['a resolution tier, n = 1', { model: 'nano-banana-pro', resolution: '2K', n: 1 }, 240_000],
    [
      'a resolution tier and an aspect ratio',
      { model: 'svc/nano-banana-pro', resolution: '4K', aspect_ratio: '16:9' },
      350_000,
    ],
    ['a resolution and a quality', { model: 'gpt-image-2', resolution: '4K', quality: 'low' }, 50_000],
    [
      'a resolution, a quality and a format',
      { model: 'gpt-image-2', resolution: '2K', quality: 'medium', output_format: 'webp' },
      130_000,
    ],
    // The matrix bills every request to the model: 0.26 at 1K high, not the older 0.27 per image.
    ['no quality: the published default', { model: 'gpt-image-2', resolution: '1K' }, 260_000],
  ] as [string, Record<string, unknown>, number][]) {
    test(`${why}: buyer charge = burn x ask, the supplier key's debit = burn`, async () => {
      const buyerBefore = await balances(stack, buyer.accountId)
      const keyBefore = await keyBalance()
      const response = await generate(body)
      expect(response.status).toBe(200)
      // The native answer ({id, images}) as OpenAI's: {created, data: [{b64_json}]}, nothing else.
      const answer = (await response.json()) as { created: number; data: unknown[] }
      expect(Object.keys(answer).sort()).toEqual(['created', 'data'])
      expect(answer.created).toBeGreaterThan(0)
      expect(answer.data).toEqual([{ b64_json: TINY_PNG_BASE64 }])
      const cost = Math.ceil((burn * ASK) / 100)
      expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
      expect(response.headers.get('x-svc-clearing-price-cents')).toBe(String(ASK))
      const buyerAfter = await balances(stack, buyer.accountId)
      expect(buyerBefore.confirmed - buyerAfter.confirmed).toBe(cost)
      expect(buyerAfter.held).toBe(0)
      expect(keyBefore - (await keyBalance())).toBe(burn)
    })
  }

  test('the hold is the tier price, with the openai SDK passing the tier through', async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'slow_first_byte', times: 1 })
    const client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    const keyBefore = await keyBalance()
    const pending = client.images
      .generate({ model: 'svc/gpt-image-2', prompt: 'x', quality: 'high', resolution: '2K' } as never)
      .withResponse()
    let held = 0
    await until(async () => {
      held = (await balances(stack, buyer.accountId)).held
      return held > 0
    })
    expect(held).toBe(Math.ceil((500_000 * ASK) / 100))
    const { data, response } = await pending
    expect(data.data).toEqual([{ b64_json: TINY_PNG_BASE64 }])
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(Math.ceil((500_000 * ASK) / 100)))
    expect(keyBefore - (await keyBalance())).toBe(500_000)
  })

  for (const [why, body, code, param] of [
    [
      'no resolution on a resolution-tiered model',
      { model: 'nano-banana-pro' },
      'invalid_resolution',
      'resolution',
    ],
    [
      'no resolution on a quality-tiered model',
      { model: 'gpt-image-2', quality: 'low' },
      'invalid_resolution',
      'resolution',
    ],
    [
      'an unknown resolution',
      { model: 'nano-banana-pro', resolution: '8K' },
      'invalid_resolution',
      'resolution',
    ],
    [
      'a resolution in another case',
      { model: 'nano-banana-pro', resolution: '1k' },
      'invalid_resolution',
      'resolution',
    ],
    [
      'a resolution that is not a string',
      { model: 'nano-banana-pro', resolution: 1 },
      'invalid_resolution',
      'resolution',
    ],
    [
      'a prototype field as resolution',
      { model: 'gpt-image-2', resolution: '__proto__' },
      'invalid_resolution',
      'resolution',
    ],
    [
      'an unknown quality',
      { model: 'gpt-image-2', resolution: '1K', quality: 'ultra' },
      'invalid_quality',
      'quality',
    ],
    [
      'a quality that is not a string',
      { model: 'gpt-image-2', resolution: '1K', quality: 2 },
      'invalid_quality',
      'quality',
    ],
    [
      'no quality where no default is published',
      { model: NO_DEFAULT, resolution: '1K' },
      'invalid_quality',
      'quality',
    ],
    [
      'a pixel size on a tiered model',
      { model: 'gpt-image-2', resolution: '1K', size: '4096x4096' },
      'unsupported_parameter',
      'size',
    ],
    [
      'more than one image on a resolution-tiered model',
      { model: 'nano-banana-pro', resolution: '1K', n: 2 },
      'unsupported_parameter',
      'n',
    ],
    [
      'more than one image on a quality-tiered model',
      { model: 'gpt-image-2', resolution: '1K', quality: 'low', n: 4 },
      'unsupported_parameter',
      'n',
    ],
    [
      'an output format the upstream does not make',
      { model: 'gpt-image-2', resolution: '1K', output_format: 'gif' },
      'invalid_output_format',
      'output_format',
    ],
    [
      'an aspect ratio that is not a string',
      { model: 'nano-banana-pro', resolution: '1K', aspect_ratio: 16 },
      'invalid_aspect_ratio',
      'aspect_ratio',
    ],
    [
      'a width on a tiered model',
      { model: 'nano-banana-pro', resolution: '1K', width: 4096 },
      'unsupported_parameter',
      'width',
    ],
  ] as [string, Record<string, unknown>, string, string][]) {
    test(`${why}: 400 ${code} naming ${param}, nothing changes in Redis`, async () => {
      const keyBefore = await keyBalance()
      const before = moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))
      const response = await generate(body)
      expect(response.status).toBe(400)
      const { error } = (await response.json()) as {
        error: { code: string; param: string; message: string; type: string }
      }
      expect(error).toMatchObject({ code, param, type: 'invalid_request_error' })
      expect(error.message).toContain(param)
      expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(before)
      expect(await keyBalance()).toBe(keyBefore)
    })
  }

  test('a refusal for a missing tier lists the tiers there are', async () => {
    const response = await generate({ model: NO_DEFAULT, resolution: '2K' })
    const { error } = (await response.json()) as { error: { message: string } }
    expect(error.message).toContain('low, medium, high')
    expect(error.message).toContain('default')
  })

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
