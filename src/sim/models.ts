// The simulated supplier's model list, in Venice's `/models` shape: `model_spec` with pricing per
// million tokens as equal usd/diem pairs (cache read and write prices and a long-prompt tier where a
// model has them), capabilities and constraints. One text model has no price or caps (it maps to
// `coming_soon`); one is offline (it is not listed by the gateway).

/** A price as the upstream lists it: per million tokens (or per unit), equal usd and diem. */
export interface ListPrice {
  usd: number
  diem: number
}

/** A text model's long-prompt tier: past the threshold, every token of the request is at it. */
export interface ExtendedPricing {
  context_token_threshold: number
  input: ListPrice
  output: ListPrice
  cache_input?: ListPrice
  cache_write?: ListPrice
}

/**
 * `model_spec.pricing`: tokens for text; for image `generation` per image, or tiers: `resolutions`
 * per image by resolution, and `quality` by resolution then quality (the bill of every request to a
 * model that has it, at `constraints.quality.default` when a request names none); none for video
 * (its quote prices it).
 */
export type SimPricing = {
  input?: ListPrice
  output?: ListPrice
  cache_input?: ListPrice
  cache_write?: ListPrice
  extended?: ExtendedPricing
  generation?: ListPrice
  resolutions?: Record<string, ListPrice>
  quality?: Record<string, Record<string, ListPrice>>
}

export interface VeniceModel {
  id: string
  object: 'model'
  created: number
  owned_by: string
  type: 'text' | 'image' | 'video'
  model_spec: {
    name: string
    availableContextTokens?: number
    maxCompletionTokens?: number
    offline?: boolean
    capabilities?: Record<string, boolean | string | number>
    constraints?: Record<string, unknown>
    pricing?: SimPricing
    traits?: string[]
  }
}

const CREATED = 1_735_689_600

const pair = (amount: number): ListPrice => ({ usd: amount, diem: amount })

const ASPECT_RATIOS = ['1:1', '3:2', '16:9', '9:16', '2:3']

const textCapabilities = (extra: Record<string, boolean> = {}) => ({
  optimizedForCode: false,
  quantization: 'fp8',
  supportsFunctionCalling: true,
  supportsReasoning: false,
  supportsResponseSchema: true,
  supportsVision: false,
  supportsWebSearch: false,
  supportsLogProbs: false,
  ...extra,
})

export const SIM_MODELS: VeniceModel[] = [
  {
    id: 'llama-3.3-70b',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'text',
    model_spec: {
      name: 'Llama 3.3 70B',
      availableContextTokens: 65_536,
      maxCompletionTokens: 8_192,
      capabilities: textCapabilities(),
      constraints: { temperature: { default: 0.7 }, top_p: { default: 0.9 } },
      pricing: { input: { usd: 0.7, diem: 0.7 }, output: { usd: 2.8, diem: 2.8 } },
      traits: ['default'],
    },
  },
  {
    id: 'qwen3-4b',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'text',
    model_spec: {
      name: 'Qwen 3 4B',
      availableContextTokens: 32_768,
      maxCompletionTokens: 4_096,
      capabilities: textCapabilities({ supportsReasoning: true }),
      constraints: { temperature: { default: 0.6 }, top_p: { default: 0.95 } },
      pricing: { input: { usd: 0.05, diem: 0.05 }, output: { usd: 0.15, diem: 0.15 } },
      traits: ['fastest'],
    },
  },
  {
    // Prompt caching and a long-prompt tier, as the upstream's larger models publish them; the
    // threshold is low so that tests and the demo reach it with a few kilobytes of prompt.
    id: 'glm-4.6',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'text',
    model_spec: {
      name: 'GLM 4.6',
      availableContextTokens: 131_072,
      maxCompletionTokens: 8_192,
      capabilities: textCapabilities({ supportsReasoning: false }),
      constraints: { temperature: { default: 0.7 }, top_p: { default: 0.95 } },
      pricing: {
        input: { usd: 0.85, diem: 0.85 },
        output: { usd: 2.75, diem: 2.75 },
        cache_input: { usd: 0.11, diem: 0.11 },
        cache_write: { usd: 1.05, diem: 1.05 },
        extended: {
          context_token_threshold: 2_000,
          input: { usd: 1.7, diem: 1.7 },
          output: { usd: 4.125, diem: 4.125 },
          cache_input: { usd: 0.22, diem: 0.22 },
          cache_write: { usd: 2.1, diem: 2.1 },
        },
      },
    },
  },
  {
    id: 'deepseek-r2-preview',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'text',
    // Seen upstream, but no published price or caps yet: `coming_soon` in the catalog.
    model_spec: {
      name: 'DeepSeek R2 (preview)',
      capabilities: textCapabilities({ supportsReasoning: true }),
    },
  },
  {
    id: 'mistral-retired',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'text',
    model_spec: {
      name: 'Mistral (retired)',
      offline: true,
      availableContextTokens: 32_768,
      maxCompletionTokens: 4_096,
      capabilities: textCapabilities(),
      pricing: { input: { usd: 0.5, diem: 0.5 }, output: { usd: 1.5, diem: 1.5 } },
    },
  },
  {
    id: 'flux-dev',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'image',
    model_spec: {
      name: 'FLUX.1 dev',
      capabilities: { supportsNegativePrompt: true },
      constraints: { promptCharacterLimit: 2048, steps: { default: 25, max: 30 }, widthHeightDivisor: 8 },
      pricing: { generation: { usd: 0.01, diem: 0.01 } },
    },
  },
  {
    // Billed by the resolution a request names.
    id: 'nano-banana-pro',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'image',
    model_spec: {
      name: 'Nano Banana Pro',
      capabilities: {},
      constraints: {
        promptCharacterLimit: 4096,
        resolutions: ['1K', '2K', '4K'],
        aspectRatios: ASPECT_RATIOS,
      },
      pricing: { resolutions: { '1K': pair(0.18), '2K': pair(0.24), '4K': pair(0.35) } },
    },
  },
  {
    // Billed by resolution and quality (`high` when a request names none), as the upstream
    // publishes gpt-image-2: `resolutions` is its older per-image schedule, kept beside the matrix.
    id: 'gpt-image-2',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'image',
    model_spec: {
      name: 'GPT Image 2',
      capabilities: {},
      constraints: {
        promptCharacterLimit: 10_000,
        resolutions: ['1K', '2K', '4K'],
        aspectRatios: ASPECT_RATIOS,
        quality: { default: 'high', options: ['low', 'medium', 'high'] },
      },
      pricing: {
        resolutions: { '1K': pair(0.27), '2K': pair(0.51), '4K': pair(0.84) },
        quality: {
          '1K': { low: pair(0.02), medium: pair(0.07), high: pair(0.26) },
          '2K': { low: pair(0.03), medium: pair(0.13), high: pair(0.5) },
          '4K': { low: pair(0.05), medium: pair(0.21), high: pair(0.83) },
        },
      },
    },
  },
  {
    id: 'wan-2.1-video',
    object: 'model',
    created: CREATED,
    owned_by: 'venice.ai',
    type: 'video',
    model_spec: {
      name: 'Wan 2.1 video',
      capabilities: { supportsAudio: false },
      constraints: {
        durations: ['5s', '10s'],
        resolutions: ['480p', '720p'],
        aspectRatios: ['16:9', '9:16'],
      },
    },
  },
]

export function findSimModel(id: string): VeniceModel | undefined {
  return SIM_MODELS.find((m) => m.id === id)
}
