// The simulated supplier: a faithful Venice-style upstream (models, buffered and streamed chat with
// usage, a DIEM balance per key, Venice's error bodies) with fault injection. It is the test double
// of the upstream only; the demo, the tests and the benchmark all run against it.
import { formatMicros } from '../money/units.ts'
import { answerTokens, type ChatRequestLike, planAnswer, type SimAnswer } from './answer.ts'
import { listPriceBurn, type SimPrompt, simPrompt, withUpstreamPrompt } from './billing.ts'
import { control, rateLimits } from './control.ts'
import type { SimFault } from './faults.ts'
import { endQuietly, FirstTokenGate } from './gate.ts'
import { authenticate, intHeader, json, preflight, sleepUnlessAborted, veniceError } from './http.ts'
import { generateImages } from './images.ts'
import { type SimKeyState, SimKeys } from './keys.ts'
import { findSimModel, SIM_MODELS, type VeniceModel } from './models.ts'
import { videoQueue } from './video.ts'

export interface SimSettings {
  /** Buffered: delay before the response. */
  latencyMs: number
  /** Streamed: delay before the first content chunk. */
  ttftMs: number
  /** Streamed: every stream holds its first token (after its role chunk) until `releaseFirstTokens()`. */
  holdFirstToken: boolean
  /** Streamed pacing; 0 sends tokens as fast as the client reads them. */
  tokensPerSecond: number
  /** Completion length when neither the request nor `x-sim-output-tokens` says otherwise. */
  outputTokens: number
  /**
   * Prompt tokens reported read from and written to the cache (each capped at what the prompt has
   * left). Null: a model with cache prices reads every message but the last from the cache (the
   * conversation so far) and writes none; a model without reports neither.
   */
  cachedTokens: number | null
  cacheWriteTokens: number | null
  /** DIEM balance (micro) of a key the first time it is seen. */
  defaultBalanceMicroDiem: number
  /** Delay of the `slow_first_byte` fault. */
  slowFirstByteMs: number
  /** Video: how long a job runs before its MP4 is ready, and how long its media is kept. */
  videoJobMs: number
  videoExpiryMs: number
}

export const DEFAULT_SIM_SETTINGS: SimSettings = {
  latencyMs: 0,
  ttftMs: 0,
  holdFirstToken: false,
  tokensPerSecond: 0,
  outputTokens: 24,
  cachedTokens: null,
  cacheWriteTokens: null,
  defaultBalanceMicroDiem: 100_000_000,
  slowFirstByteMs: 3_000,
  videoJobMs: 2_000,
  videoExpiryMs: 3_600_000,
}

export interface SimServer {
  url: string
  port: number
  keys: SimKeys
  settings: SimSettings
  /** Lets every held stream go on, and the streams after it run without holding. */
  releaseFirstTokens(): void
  stop(): Promise<void>
}

const encoder = new TextEncoder()

interface ChatBody {
  model?: unknown
  messages?: unknown
  stream?: unknown
  max_tokens?: unknown
  max_completion_tokens?: unknown
  stream_options?: { include_usage?: unknown }
  tools?: unknown
  tool_choice?: unknown
  response_format?: unknown
  reasoning_effort?: unknown
}

interface ChatPlan {
  id: string
  created: number
  model: VeniceModel
  prompt: SimPrompt
  answer: SimAnswer
  fault: SimFault | null
  /** For truncate and stall: how many content tokens go out before the fault. */
  faultAfter: number
  includeUsage: boolean
  key: SimKeyState
}

export function startSim(
  options: Partial<SimSettings> & { port?: number; hostname?: string } = {},
): SimServer {
  const settings: SimSettings = { ...DEFAULT_SIM_SETTINGS, ...options }
  const keys = new SimKeys(settings.defaultBalanceMicroDiem)
  const video = videoQueue(keys, settings)
  const gate = new FirstTokenGate()

  function listModels(url: URL): Response {
    const type = url.searchParams.get('type') ?? 'text'
    const data = type === 'all' ? SIM_MODELS : SIM_MODELS.filter((m) => m.type === type)
    return json(200, { object: 'list', type, data })
  }

  async function chat(request: Request): Promise<Response> {
    const caller = authenticate(keys, request)
    if (caller instanceof Response) return caller
    let body: ChatBody
    try {
      body = (await request.json()) as ChatBody
    } catch {
      return veniceError(400, 'Invalid JSON body')
    }
    if (!body || typeof body !== 'object' || typeof body.model !== 'string') {
      return veniceError(400, 'model is required')
    }
    if (!Array.isArray(body.messages) || body.messages.length === 0) {
      return veniceError(400, 'messages must be a non-empty array')
    }
    const model = findSimModel(body.model)
    if (model?.type !== 'text' || model.model_spec.offline) {
      return veniceError(404, `Specified model not found: ${body.model}`)
    }
    if (!model.model_spec.pricing) return veniceError(400, `Model ${model.id} is not yet available`)

    const admitted = preflight(keys, caller, request)
    if (admitted instanceof Response) return admitted
    const { key, fault, balanceHeader } = admitted
    if (fault === 'slow_first_byte') {
      const delay = intHeader(request, 'x-sim-delay-ms') ?? settings.slowFirstByteMs
      if (!(await sleepUnlessAborted(delay, request.signal))) return veniceError(499, 'client closed')
    }

    const maxTokens = [body.max_completion_tokens, body.max_tokens].find(
      (v): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0,
    )
    const wanted = intHeader(request, 'x-sim-output-tokens') ?? settings.outputTokens
    const reasoningModel = model.model_spec.capabilities?.supportsReasoning === true
    const answer = planAnswer(body as ChatRequestLike, reasoningModel, wanted, maxTokens)
    const plan: ChatPlan = {
      id: `chatcmpl-${crypto.randomUUID().replaceAll('-', '')}`,
      created: Math.floor(Date.now() / 1000),
      model,
      prompt: simPrompt(model, withUpstreamPrompt(body), settings),
      answer,
      fault,
      faultAfter: intHeader(request, 'x-sim-fault-after') ?? Math.floor(answerTokens(answer) / 2),
      includeUsage: body.stream_options?.include_usage === true,
      key,
    }
    if (body.stream === true) return streamChat(plan, balanceHeader, request.signal)
    return bufferedChat(plan, balanceHeader, request.signal)
  }

  async function bufferedChat(plan: ChatPlan, headers: Record<string, string>, signal: AbortSignal) {
    if (settings.latencyMs > 0 && !(await sleepUnlessAborted(settings.latencyMs, signal))) {
      return veniceError(499, 'client closed')
    }
    if (plan.fault === 'stall') {
      await sleepUnlessAborted(Number.POSITIVE_INFINITY, signal)
      return veniceError(499, 'client closed')
    }
    const { answer } = plan
    const completion = answerTokens(answer)
    const burn = listPriceBurn(plan.model, plan.prompt, completion)
    const debited = keys.debit(plan.key, burn)
    const body = JSON.stringify({
      id: plan.id,
      object: 'chat.completion',
      created: plan.created,
      model: plan.model.id,
      choices: [
        {
          index: 0,
          message: bufferedMessage(answer),
          logprobs: null,
          finish_reason: answer.finishReason,
          ...stopReason(answer),
        },
      ],
      usage: usageOf(plan, completion),
      cost: { diem: Number(formatMicros(debited)), usd: Number(formatMicros(debited)) },
    })
    if (plan.fault === 'truncate') {
      // The head promises the whole body; half of it comes, then the connection ends.
      const bytes = encoder.encode(body)
      let sentHalf = false
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (!sentHalf) {
            sentHalf = true
            controller.enqueue(bytes.subarray(0, bytes.length >> 1))
            return
          }
          // Closing short of the promised length is what a dropped connection looks like to a
          // client, without an unhandled stream error in the simulator itself.
          await Bun.sleep(5)
          controller.close()
        },
      })
      return new Response(stream, {
        headers: { 'content-type': 'application/json', 'content-length': String(bytes.length), ...headers },
      })
    }
    return new Response(body, { headers: { 'content-type': 'application/json', ...headers } })
  }

  function streamChat(plan: ChatPlan, headers: Record<string, string>, signal: AbortSignal): Response {
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
      `data: ${JSON.stringify({
        id: plan.id,
        object: 'chat.completion.chunk',
        created: plan.created,
        model: plan.model.id,
        choices: [
          {
            index: 0,
            delta,
            logprobs: null,
            finish_reason: finishReason,
            ...(finishReason ? stopReason(plan.answer) : {}),
          },
        ],
      })}\n\n`
    const gap = settings.tokensPerSecond > 0 ? 1000 / settings.tokensPerSecond : 0
    const deltas = streamDeltas(plan.answer)
    let next = 0 // the next delta to send
    let sent = 0 // tokens sent
    let phase: 'role' | 'content' | 'end' | 'done' = 'role'
    let finished = false

    const settle = (cancelled = false) => {
      if (finished) return
      finished = true
      if (cancelled) plan.key.cancelledStreams += 1
      // The upstream bills what it generated, whether or not the stream completed.
      keys.debit(plan.key, listPriceBurn(plan.model, plan.prompt, sent))
    }

    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (phase === 'role') {
          if (settings.ttftMs > 0) await Bun.sleep(settings.ttftMs)
          phase = 'content'
          controller.enqueue(encoder.encode(chunk({ role: 'assistant', content: '' })))
          return
        }
        if (phase === 'content') {
          // A client that left while held ends the stream here (its abort settled it).
          if (next === 0 && settings.holdFirstToken && !(await gate.passed(signal))) {
            phase = 'done'
            return endQuietly(controller)
          }
          if ((plan.fault === 'truncate' || plan.fault === 'stall') && sent >= plan.faultAfter) {
            if (plan.fault === 'truncate') {
              settle()
              controller.close()
              return
            }
            // stall: never another byte, until the client goes away
            await sleepUnlessAborted(Number.POSITIVE_INFINITY, signal)
            return
          }
          if (next < deltas.length) {
            const { delta, token } = deltas[next++]!
            if (gap > 0 && sent > 0 && token) await Bun.sleep(gap)
            controller.enqueue(encoder.encode(chunk(delta)))
            if (token) sent += 1
            return
          }
          phase = 'end'
        }
        if (phase === 'end') {
          settle()
          let tail = chunk({}, plan.answer.finishReason)
          if (plan.includeUsage) {
            tail += `data: ${JSON.stringify({
              id: plan.id,
              object: 'chat.completion.chunk',
              created: plan.created,
              model: plan.model.id,
              choices: [],
              usage: usageOf(plan, sent),
            })}\n\n`
          }
          tail += 'data: [DONE]\n\n'
          phase = 'done'
          controller.enqueue(encoder.encode(tail))
          controller.close()
        }
      },
      cancel() {
        settle(true)
      },
    })
    signal.addEventListener('abort', () => settle(true), { once: true })
    return new Response(stream, {
      headers: {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        ...headers,
      },
    })
  }

  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: options.hostname ?? '127.0.0.1',
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url)
      // Venice serves under /api/v1; accept both that and the bare paths.
      const path = url.pathname.replace(/^\/api\/v1(?=\/)/, '')
      if (path === '/models' && request.method === 'GET') return listModels(url)
      if (path === '/chat/completions' && request.method === 'POST') return chat(request)
      if (path === '/video/quote' && request.method === 'POST') return video.quote(request)
      if (path === '/video/queue' && request.method === 'POST') return video.queue(request)
      if (path === '/video/retrieve' && request.method === 'POST') return video.retrieve(request)
      const native = path === '/image/generate'
      if ((native || path === '/images/generations') && request.method === 'POST')
        return generateImages(keys, request, settings, native)
      if (path === '/api_keys/rate_limits' && request.method === 'GET') return rateLimits(keys, request)
      if (path.startsWith('/sim/')) return control(keys, request, new URL(path, url))
      return veniceError(404, 'Not found')
    },
  })

  return {
    url: `http://${server.hostname}:${server.port}`,
    port: server.port as number,
    keys,
    settings,
    releaseFirstTokens: () => gate.release(settings),
    stop: () => server.stop(true),
  }
}

/** The stop sequence an answer ended at, as vLLM names it; nothing when it ended otherwise. */
const stopReason = (answer: SimAnswer) =>
  answer.matchedStop === undefined ? {} : { stop_reason: answer.matchedStop }

/** The assistant message of a buffered answer: content, reasoning and the tool call as OpenAI has them. */
function bufferedMessage(answer: SimAnswer): Record<string, unknown> {
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: answer.toolCall && answer.content.length === 0 ? null : answer.content.join(''),
    refusal: null,
  }
  if (answer.reasoning.length > 0) message.reasoning_content = answer.reasoning.join('')
  if (answer.toolCall) {
    const { id, name, pieces } = answer.toolCall
    message.tool_calls = [{ id, type: 'function', function: { name, arguments: pieces.join('') } }]
  }
  return message
}

/** The stream's deltas in order; `token` marks those that carry a generated token. */
function streamDeltas(answer: SimAnswer): { delta: Record<string, unknown>; token: boolean }[] {
  const deltas: { delta: Record<string, unknown>; token: boolean }[] = []
  for (const piece of answer.reasoning) deltas.push({ delta: { reasoning_content: piece }, token: true })
  for (const piece of answer.content) deltas.push({ delta: { content: piece }, token: true })
  if (answer.toolCall) {
    const { id, name, pieces } = answer.toolCall
    deltas.push({
      delta: { tool_calls: [{ index: 0, id, type: 'function', function: { name, arguments: '' } }] },
      token: false,
    })
    for (const piece of pieces) {
      deltas.push({ delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, token: true })
    }
  }
  return deltas
}

/**
 * Usage as the upstream reports it: cache reads and writes are part of the prompt tokens, reasoning
 * tokens part of the completion tokens.
 */
function usageOf(plan: ChatPlan, completion: number): Record<string, unknown> {
  const { prompt } = plan
  const usage: Record<string, unknown> = {
    prompt_tokens: prompt.tokens,
    completion_tokens: completion,
    total_tokens: prompt.tokens + completion,
  }
  if (prompt.cached > 0 || prompt.written > 0) {
    usage.prompt_tokens_details = {
      cached_tokens: prompt.cached,
      cache_creation_input_tokens: prompt.written,
    }
  }
  const reasoning = Math.min(plan.answer.reasoning.length, completion)
  if (reasoning > 0) usage.completion_tokens_details = { reasoning_tokens: reasoning }
  return usage
}
