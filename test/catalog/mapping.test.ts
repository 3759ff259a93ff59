import { describe, expect, test } from 'bun:test'
import { mapUpstreamModel, mapUpstreamModels } from '../../src/catalog/venice-mapping.ts'
import { SIM_MODELS } from '../../src/sim/models.ts'

const text = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: 'm',
  type: 'text',
  created: 1,
  model_spec: { name: 'M', ...spec },
  ...extra,
})
const priced = {
  availableContextTokens: 1000,
  maxCompletionTokens: 100,
  pricing: { input: { usd: 0.7, diem: 0.7 }, output: { usd: 2.8, diem: 2.8 } },
}

describe('catalog mapping', () => {
  test('a priced and capped text model is live with integer prices', () => {
    const entry = mapUpstreamModel(text(priced))!
    expect(entry.row.status).toBe('live')
    expect(entry.row.modality).toBe('text')
    expect(entry.prices).toEqual({ inputPerMillion: 700_000, outputPerMillion: 2_800_000 })
    expect(entry.row.pricing).toEqual({
      currency: 'USD',
      unit: 'million_tokens',
      input: '0.700000',
      output: '2.800000',
    })
    expect(entry.row.context_length).toBe(1000)
    expect(entry.row.max_completion_tokens).toBe(100)
    expect(entry.row.capabilities).toEqual({})
  })

  test('missing price or missing caps is coming_soon, with no pricing', () => {
    for (const spec of [
      { ...priced, pricing: undefined },
      { ...priced, pricing: { input: { usd: 1, diem: 1 } } },
      { ...priced, maxCompletionTokens: undefined },
      { ...priced, availableContextTokens: 0 },
      { ...priced, pricing: { input: { diem: 'free' }, output: { diem: 1 } } },
    ]) {
      const entry = mapUpstreamModel(text(spec))!
      expect(entry.row.status).toBe('coming_soon')
      expect(entry.row.pricing).toBeUndefined()
      expect(entry.prices).toBeNull()
    }
  })

  test('cache prices and the extended tier map to integer prices and the pricing row', () => {
    const entry = mapUpstreamModel(
      text({
        ...priced,
        pricing: {
          ...priced.pricing,
          cache_input: { usd: 0.07, diem: 0.07 },
          cache_write: { usd: 0.875, diem: 0.875 },
          extended: {
            context_token_threshold: 200_000,
            input: { usd: 1.4, diem: 1.4 },
            output: { usd: 5.6, diem: 5.6 },
            cache_write: { usd: 1.75, diem: 1.75 },
          },
        },
      }),
    )!
    expect(entry.row.status).toBe('live')
    expect(entry.prices).toEqual({
      inputPerMillion: 700_000,
      outputPerMillion: 2_800_000,
      cacheInputPerMillion: 70_000,
      cacheWritePerMillion: 875_000,
      extended: {
        contextTokenThreshold: 200_000,
        inputPerMillion: 1_400_000,
        outputPerMillion: 5_600_000,
        cacheWritePerMillion: 1_750_000,
      },
    })
    expect(entry.row.pricing).toEqual({
      currency: 'USD',
      unit: 'million_tokens',
      input: '0.700000',
      output: '2.800000',
      cache_input: '0.070000',
      cache_write: '0.875000',
      extended: {
        context_token_threshold: 200_000,
        input: '1.400000',
        output: '5.600000',
        cache_write: '1.750000',
      },
    })
  })

  test('a published cache or extended price that cannot be read keeps the model off live', () => {
    const extended = { context_token_threshold: 100, input: { diem: 1 }, output: { diem: 2 } }
    for (const pricing of [
      { cache_input: { diem: 'cheap' } },
      { cache_write: { diem: 0.0000001 } },
      { extended: 'yes' },
      { extended: { ...extended, context_token_threshold: 0 } },
      { extended: { ...extended, output: undefined } },
      { extended: { ...extended, cache_input: { usd: -1 } } },
    ]) {
      const entry = mapUpstreamModel(text({ ...priced, pricing: { ...priced.pricing, ...pricing } }))!
      expect(entry.row.status).toBe('coming_soon')
      expect(entry.prices).toBeNull()
    }
  })

  test('prices with more than six decimals are not guessed at', () => {
    const entry = mapUpstreamModel(
      text({ ...priced, pricing: { input: { diem: 0.0000001 }, output: { diem: 1 } } }),
    )!
    expect(entry.row.status).toBe('coming_soon')
  })

  test('offline, unknown-type and malformed models are left off', () => {
    expect(mapUpstreamModel(text({ ...priced, offline: true }))).toBeNull()
    expect(mapUpstreamModel(text(priced, { type: 'music' }))).toBeNull()
    expect(mapUpstreamModel(text(priced, { id: 42 }))).toBeNull()
    expect(mapUpstreamModel({ id: 'x', type: 'text' })).toBeNull()
  })

  test('image and video modalities come from the model type and their unit prices', () => {
    const image = mapUpstreamModel({
      id: 'i',
      type: 'image',
      model_spec: { pricing: { generation: { diem: 0.01 } } },
    })!
    expect(image.row).toMatchObject({
      status: 'live',
      modality: 'image',
      pricing: { unit: 'image', generation: '0.010000' },
    })
    expect(image.prices).toEqual({ perImage: 10_000 })
    const video = mapUpstreamModel({ id: 'v', type: 'video', model_spec: {} })!
    // No price in the list: coming_soon until the sync's quotes price it (video-prices.ts).
    expect(video.row).toMatchObject({ status: 'coming_soon', modality: 'video' })
    expect(video.prices).toEqual({ perVideo: {} })
  })

  test('an image model priced by resolution or quality tiers keeps its tier tables, not a flat price', () => {
    const tier = { usd: 0.27, diem: 0.27 }
    const byResolution = mapUpstreamModel({
      id: 'i',
      type: 'image',
      model_spec: {
        pricing: { generation: { diem: 0.01 }, resolutions: { '1K': tier, '4K': { usd: 0.84, diem: 0.84 } } },
      },
    })!
    expect(byResolution.row.status).toBe('live')
    expect(byResolution.prices).toEqual({ imageTiers: { resolutions: { '1K': 270_000, '4K': 840_000 } } })
    expect(byResolution.row.pricing).toEqual({
      currency: 'USD',
      unit: 'image',
      resolutions: { '1K': '0.270000', '4K': '0.840000' },
    })
    const byQuality = mapUpstreamModel({
      id: 'i',
      type: 'image',
      model_spec: {
        constraints: { quality: { default: 'high' } },
        pricing: {
          resolutions: { '1K': tier },
          quality: { '1K': { low: { diem: 0.02 }, high: { diem: 0.26 } } },
        },
      },
    })!
    expect(byQuality.row.status).toBe('live')
    expect(byQuality.prices).toEqual({
      imageTiers: {
        resolutions: { '1K': 270_000 },
        quality: { '1K': { low: 20_000, high: 260_000 } },
        defaultQuality: 'high',
      },
    })
    expect(byQuality.row.pricing).toMatchObject({
      quality: { '1K': { low: '0.020000', high: '0.260000' } },
      default_quality: 'high',
    })
    // No default published (or one that is no tier's name): a request must name its quality.
    for (const constraints of [undefined, { quality: 'high' }, { quality: { default: 7 } }]) {
      const none = mapUpstreamModel({
        id: 'i',
        type: 'image',
        model_spec: { constraints, pricing: { quality: { '1K': { low: { diem: 0.02 } } } } },
      })!
      expect(none.prices).toEqual({ imageTiers: { quality: { '1K': { low: 20_000 } } } })
    }
    const upscaled = mapUpstreamModel({
      id: 'i',
      type: 'image',
      model_spec: { pricing: { generation: { diem: 0.01 }, upscale: { '2x': { diem: 0.02 } } } },
    })!
    expect(upscaled.prices).toEqual({ perImage: 10_000 })
  })

  test('the simulated supplier maps to live text, image and video, one coming_soon, offline gone', () => {
    const entries = mapUpstreamModels({ data: SIM_MODELS })
    const byId = new Map(entries.map((e) => [e.row.id, e.row]))
    expect(byId.get('llama-3.3-70b')?.status).toBe('live')
    expect(byId.get('deepseek-r2-preview')?.status).toBe('coming_soon')
    expect(byId.has('mistral-retired')).toBe(false)
    expect(byId.get('flux-dev')?.modality).toBe('image')
    expect(byId.get('gpt-image-2')?.status).toBe('live')
    expect(byId.get('nano-banana-pro')?.status).toBe('live')
    expect(byId.get('wan-2.1-video')?.modality).toBe('video')
    expect(mapUpstreamModels({ data: SIM_MODELS }, ['qwen3-4b']).some((e) => e.row.id === 'qwen3-4b')).toBe(
      false,
    )
    // Named as buyers name it, prefixed: the same model kept off.
    expect(
      mapUpstreamModels({ data: SIM_MODELS }, ['svc/qwen3-4b']).some((e) => e.row.id === 'qwen3-4b'),
    ).toBe(false)
  })

  test('a body that is not a model list is an error, not an empty catalog', () => {
    expect(() => mapUpstreamModels({ error: 'nope' })).toThrow()
    expect(() => mapUpstreamModels([])).toThrow()
  })
})
