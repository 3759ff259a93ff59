// The simulated supplier is what every other test trusts to behave like the upstream: each shape
// and each fault is checked here over real HTTP.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { UPSTREAM_SYSTEM_PROMPT } from '../../src/sim/billing.ts'
import { type SimServer, startSim } from '../../src/sim/server.ts'
import { until } from '../helpers/wait.ts'

let sim: SimServer
beforeAll(() => {
  sim = startSim({ port: 0, outputTokens: 10 })
})
afterAll(() => sim.stop())

let keyCounter = 0
const freshKey = () => `sim-key-${++keyCounter}-${Math.random().toString(36).slice(2)}`

function chat(
  key: string,
  body: Record<string, unknown> = {},
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    signal,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello there' }],
      ...body,
    }),
  })
}

async function keyState(key: string) {
  return (await (await fetch(`${sim.url}/sim/keys/${encodeURIComponent(key)}`)).json()) as {
    balanceDiem: string
    requests: number
    cancelledStreams: number
  }
}

function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => frame.slice('data: '.length))
}

describe('models', () => {
  test('Venice shape with text, image and video rows, one text model unpriced', async () => {
    const body = (await (await fetch(`${sim.url}/models?type=all`)).json()) as {
      data: {
        id: string
        type: string
        model_spec: { pricing?: { input?: { usd: number; diem: number } } }
      }[]
    }
    const types = new Set(body.data.map((m) => m.type))
    expect([...types].sort()).toEqual(['image', 'text', 'video'])
    const llama = body.data.find((m) => m.id === 'llama-3.3-70b')!
    expect(llama.model_spec.pricing!.input!.usd).toBe(llama.model_spec.pricing!.input!.diem)
    expect(body.data.some((m) => m.type === 'text' && !m.model_spec.pricing)).toBe(true)
    const textOnly = (await (await fetch(`${sim.url}/api/v1/models`)).json()) as { data: { type: string }[] }
    expect(textOnly.data.every((m) => m.type === 'text')).toBe(true)
  })
})

// As the gateway sends every chat: the upstream's own system prompt off.
const WITHOUT_UPSTREAM_PROMPT = { include_venice_system_prompt: false }

describe("the upstream's own system prompt", () => {
  test('is read and billed before the messages unless the request turns it off', async () => {
    const key = freshKey()
    const messages = [{ role: 'user', content: 'x'.repeat(400) }]
    const usage = async (body: Record<string, unknown>) =>
      ((await (await chat(key, { messages, ...body })).json()) as { usage: { prompt_tokens: number } }).usage
        .prompt_tokens
    // 400 characters: 100 tokens, plus 3 for the message and 3 for the reply
    expect(await usage({ venice_parameters: WITHOUT_UPSTREAM_PROMPT })).toBe(106)
    const added = Math.ceil(UPSTREAM_SYSTEM_PROMPT.length / 4) + 3
    expect(await usage({})).toBe(106 + added)
    expect(await usage({ venice_parameters: { include_venice_system_prompt: true } })).toBe(106 + added)
  })
})

describe('cache usage and the long-prompt tier', () => {
  test('glm-4.6 reports cache reads and writes inside prompt_tokens and bills them at their prices', async () => {
    sim.settings.cachedTokens = 7
    sim.settings.cacheWriteTokens = 2
    try {
      const key = freshKey()
      // 400 characters: 100 tokens, plus 3 for the message and 3 for the reply
      const response = await chat(key, {
        model: 'glm-4.6',
        messages: [{ role: 'user', content: 'x'.repeat(400) }],
        venice_parameters: WITHOUT_UPSTREAM_PROMPT,
      })
      const body = (await response.json()) as {
        usage: Record<string, unknown>
        cost: { diem: number; usd: number }
      }
      expect(body.usage).toEqual({
        prompt_tokens: 106,
        completion_tokens: 10,
        total_tokens: 116,
        prompt_tokens_details: { cached_tokens: 7, cache_creation_input_tokens: 2 },
      })
      // 97 x 0.85 = 82.45; 7 x 0.11 = 0.77; 2 x 1.05 = 2.1; 10 x 2.75 = 27.5: 112.82 -> 113
      expect(body.cost).toEqual({ diem: 0.000113, usd: 0.000113 })
      expect((await keyState(key)).balanceDiem).toBe('99.999887')
    } finally {
      sim.settings.cachedTokens = null
      sim.settings.cacheWriteTokens = null
    }
  })

  test('past 2,000 prompt tokens every term is at the extended prices; the conversation so far is a cache read', async () => {
    const key = freshKey()
    const messages = [
      { role: 'system', content: 'x'.repeat(8_000) },
      { role: 'user', content: 'y'.repeat(400) },
    ]
    const response = await chat(key, {
      model: 'glm-4.6',
      messages,
      venice_parameters: WITHOUT_UPSTREAM_PROMPT,
    })
    const body = (await response.json()) as { usage: Record<string, unknown>; cost: { diem: number } }
    // 2,100 + 6 + 3 prompt tokens, of which the system message's 2,000 + 3 + 3 are cached
    expect(body.usage.prompt_tokens).toBe(2_109)
    expect(body.usage.prompt_tokens_details).toEqual({ cached_tokens: 2_006, cache_creation_input_tokens: 0 })
    // 103 x 1.7 = 175.1; 2,006 x 0.22 = 441.32; 10 x 4.125 = 41.25: 657.67 -> 658
    expect(body.cost.diem).toBe(0.000658)
    // llama publishes no cache prices: no cache counts, the prompt all at input
    const plain = (await (await chat(key, { messages })).json()) as { usage: Record<string, unknown> }
    expect(plain.usage.prompt_tokens_details).toBeUndefined()
  })
})

describe('buffered chat', () => {
  test('answers with usage, cost and the balance before the request; debits list price', async () => {
    const key = freshKey()
    const response = await chat(key)
    expect(response.status).toBe(200)
    expect(response.headers.get('x-venice-balance-diem')).toBe('100.000000')
    const body = (await response.json()) as {
      object: string
      choices: { message: { content: string }; finish_reason: string }[]
      usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
      cost: { diem: number; usd: number }
    }
    expect(body.object).toBe('chat.completion')
    expect(body.choices[0]!.finish_reason).toBe('stop')
    expect(body.usage.completion_tokens).toBe(10)
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 10)
    // burn = ceil(p * 0.7 + 10 * 2.8) micro-DIEM at 0.70 / 2.80 per million
    const burn = Math.ceil((body.usage.prompt_tokens * 700_000 + 10 * 2_800_000) / 1e6)
    expect(body.cost.diem).toBeCloseTo(burn / 1e6, 9)
    expect(body.cost.usd).toBe(body.cost.diem)
    const next = await chat(key)
    await next.arrayBuffer()
    expect(next.headers.get('x-venice-balance-diem')).toBe(((100_000_000 - burn) / 1e6).toFixed(6))
  })

  test('max_tokens caps the completion and says length', async () => {
    const body = (await (await chat(freshKey(), { max_tokens: 3 })).json()) as {
      choices: { message: { content: string }; finish_reason: string }[]
      usage: { completion_tokens: number }
    }
    expect(body.usage.completion_tokens).toBe(3)
    expect(body.choices[0]!.finish_reason).toBe('length')
    expect(body.choices[0]!.message.content.split(' ')).toHaveLength(3)
  })

  test('unknown, offline and unpriced models are refused', async () => {
    expect((await chat(freshKey(), { model: 'nope' })).status).toBe(404)
    expect((await chat(freshKey(), { model: 'mistral-retired' })).status).toBe(404)
    expect((await chat(freshKey(), { model: 'deepseek-r2-preview' })).status).toBe(400)
    const missingAuth = await fetch(`${sim.url}/chat/completions`, { method: 'POST', body: '{}' })
    expect(missingAuth.status).toBe(401)
    expect(await missingAuth.json()).toEqual({ error: 'Authentication failed' })
  })
})

describe('streamed chat', () => {
  test('role chunk, deltas, finish chunk, then [DONE]; no usage chunk unless asked', async () => {
    const text = await (await chat(freshKey(), { stream: true })).text()
    const frames = sseData(text)
    expect(frames.at(-1)).toBe('[DONE]')
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f))
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    expect(chunks.filter((c) => c.choices[0]?.delta?.content).length).toBe(10)
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop')
    expect(chunks.some((c) => c.usage)).toBe(false)
  })

  test('with include_usage, a usage chunk with choices: [] comes before [DONE]', async () => {
    const response = await chat(freshKey(), { stream: true, stream_options: { include_usage: true } })
    expect(response.headers.get('content-type')).toStartWith('text/event-stream')
    expect(response.headers.get('x-venice-balance-diem')).toBe('100.000000')
    const frames = sseData(await response.text())
    const usage = JSON.parse(frames.at(-2)!)
    expect(usage.choices).toEqual([])
    expect(usage.usage.completion_tokens).toBe(10)
    expect(frames.at(-1)).toBe('[DONE]')
  })
})

describe('faults', () => {
  const beforeBytes: [string, number][] = [
    ['error_5xx', 503],
    ['rate_limit', 429],
    ['out_of_balance', 402],
  ]
  for (const [fault, status] of beforeBytes) {
    test(`${fault} by header answers ${status} with a Venice error body and charges nothing`, async () => {
      const key = freshKey()
      const response = await chat(key, { stream: true }, { 'x-sim-fault': fault })
      expect(response.status).toBe(status)
      const body = (await response.json()) as { error: unknown }
      expect(typeof body.error).toBe('string')
      expect((await keyState(key)).balanceDiem).toBe('100.000000')
    })
  }

  test('a per-key fault with times applies that many requests, then clears', async () => {
    const key = freshKey()
    const set = await fetch(`${sim.url}/sim/keys/${key}`, {
      method: 'PUT',
      body: JSON.stringify({ fault: 'error_5xx', times: 2 }),
    })
    expect(set.status).toBe(200)
    expect((await chat(key)).status).toBe(503)
    expect((await chat(key)).status).toBe(503)
    expect((await chat(key)).status).toBe(200)
  })

  test('a fault set on the key * applies to keys without one of their own, counted down once for all', async () => {
    const own = freshKey()
    await fetch(`${sim.url}/sim/keys/${own}`, {
      method: 'PUT',
      body: JSON.stringify({ fault: 'rate_limit', times: 1 }),
    })
    const set = await fetch(`${sim.url}/sim/keys/*`, {
      method: 'PUT',
      body: JSON.stringify({ fault: 'error_5xx', times: 2 }),
    })
    expect(set.status).toBe(200)
    expect((await chat(own)).status).toBe(429) // its own fault first
    expect((await chat(freshKey())).status).toBe(503)
    expect((await chat(own)).status).toBe(503)
    expect((await chat(freshKey())).status).toBe(200) // both times taken, across keys
    expect((await chat(own)).status).toBe(200)
  })

  test('a key with no balance left gets 402', async () => {
    const key = freshKey()
    await fetch(`${sim.url}/sim/keys/${key}`, { method: 'PUT', body: JSON.stringify({ balanceDiem: '0' }) })
    const response = await chat(key)
    expect(response.status).toBe(402)
    expect(response.headers.get('x-venice-balance-diem')).toBe('0.000000')
  })

  test('a balance smaller than the burn is debited to zero, never below', async () => {
    const key = freshKey()
    await fetch(`${sim.url}/sim/keys/${key}`, {
      method: 'PUT',
      body: JSON.stringify({ balanceDiem: '0.000010' }),
    })
    expect((await chat(key)).status).toBe(200)
    expect((await keyState(key)).balanceDiem).toBe('0.000000')
  })

  test('truncate in a stream: content, then the end with no usage chunk and no [DONE]', async () => {
    const response = await chat(
      freshKey(),
      { stream: true, stream_options: { include_usage: true } },
      { 'x-sim-fault': 'truncate', 'x-sim-fault-after': '4' },
    )
    expect(response.status).toBe(200)
    const frames = sseData(await response.text())
    expect(frames).not.toContain('[DONE]')
    const chunks = frames.map((f) => JSON.parse(f))
    expect(chunks.some((c) => c.usage)).toBe(false)
    expect(chunks.filter((c) => c.choices[0]?.delta?.content).length).toBe(4)
  })

  test('truncate in a buffered answer: the body breaks off mid-JSON', async () => {
    const response = await chat(freshKey(), {}, { 'x-sim-fault': 'truncate' })
    expect(response.status).toBe(200)
    const outcome = await response.text().then(
      (text) => {
        try {
          JSON.parse(text)
          return 'complete JSON'
        } catch {
          return 'broken JSON'
        }
      },
      () => 'connection broke',
    )
    expect(outcome).not.toBe('complete JSON')
  })

  test('stall: some chunks, then silence until the client aborts; the upstream bills what it sent', async () => {
    const key = freshKey()
    const controller = new AbortController()
    const response = await chat(
      key,
      { stream: true },
      { 'x-sim-fault': 'stall', 'x-sim-fault-after': '2' },
      controller.signal,
    )
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let seen = ''
    while (sseData(seen).length < 3) {
      const { value, done } = await reader.read()
      if (done) break
      seen += decoder.decode(value)
    }
    expect(sseData(seen)).toHaveLength(3) // role + 2 content chunks
    const next = await Promise.race([reader.read().then(() => 'byte'), Bun.sleep(300).then(() => 'silence')])
    expect(next).toBe('silence')
    controller.abort()
    // The sim sees the cancel once the closed connection reaches it.
    await until(async () => (await keyState(key)).cancelledStreams > 0)
    const state = await keyState(key)
    expect(state.cancelledStreams).toBe(1)
    expect(state.balanceDiem).not.toBe('100.000000')
  })

  test('stall on a buffered call: no answer at all until the client gives up', async () => {
    const outcome = await fetch(`${sim.url}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${freshKey()}`, 'x-sim-fault': 'stall' },
      body: JSON.stringify({ model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'x' }] }),
      signal: AbortSignal.timeout(300),
    }).then(
      () => 'answered',
      (error: Error) => error.name,
    )
    expect(outcome).toBe('TimeoutError')
  })

  test('slow_first_byte delays the answer by the given time', async () => {
    const started = performance.now()
    const response = await chat(freshKey(), {}, { 'x-sim-fault': 'slow_first_byte', 'x-sim-delay-ms': '250' })
    expect(response.status).toBe(200)
    // A lower bound only: the delay is the fault itself, not a performance figure.
    expect(performance.now() - started).toBeGreaterThanOrEqual(240)
  })

  test('an unknown fault name is a 400, not a silent success', async () => {
    expect((await chat(freshKey(), {}, { 'x-sim-fault': 'meteor' })).status).toBe(400)
    const bad = await fetch(`${sim.url}/sim/keys/x`, {
      method: 'PUT',
      body: JSON.stringify({ fault: 'meteor' }),
    })
    expect(bad.status).toBe(400)
  })
})

describe('pacing settings', () => {
  test('time to first token and tokens per second shape a stream', async () => {
    const paced = startSim({ port: 0, ttftMs: 120, tokensPerSecond: 50, outputTokens: 6 })
    try {
      const started = performance.now()
      const response = await fetch(`${paced.url}/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer k' },
        body: JSON.stringify({ model: 'qwen3-4b', messages: [{ role: 'user', content: 'x' }], stream: true }),
      })
      await response.text()
      // 120 ms to the first token, then 5 gaps of 20 ms: a lower bound, never an upper one.
      expect(performance.now() - started).toBeGreaterThanOrEqual(200)
    } finally {
      await paced.stop()
    }
  })
})

describe('held first token', () => {
  test('every stream holds its first token until the release; then streams run freely', async () => {
    const gated = startSim({ port: 0, holdFirstToken: true, outputTokens: 3 })
    try {
      const stream = () =>
        fetch(`${gated.url}/chat/completions`, {
          method: 'POST',
          headers: { authorization: 'Bearer k' },
          body: JSON.stringify({
            model: 'qwen3-4b',
            messages: [{ role: 'user', content: 'x' }],
            stream: true,
          }),
        })
      const held = await stream()
      expect(held.status).toBe(200)
      const reader = held.body!.getReader()
      // The head and the role chunk come at once; the first token waits.
      expect(new TextDecoder().decode((await reader.read()).value)).toContain('"role":"assistant"')
      let arrived = false
      const first = reader.read().then((chunk) => {
        arrived = true
        return chunk
      })
      // A round trip to the same server later, still nothing of the stream has come.
      await fetch(`${gated.url}/sim/keys/k`)
      expect(arrived).toBe(false)
      gated.releaseFirstTokens()
      let rest = new TextDecoder().decode((await first).value)
      expect(rest).toContain('"content":')
      for (let part = await reader.read(); !part.done; part = await reader.read()) {
        rest += new TextDecoder().decode(part.value)
      }
      expect(rest.endsWith('data: [DONE]\n\n')).toBe(true)
      // Released, later streams do not hold.
      expect((await (await stream()).text()).endsWith('data: [DONE]\n\n')).toBe(true)
    } finally {
      await gated.stop()
    }
  })

  test('a client leaving while its stream is held ends it, counted as cancelled', async () => {
    const gated = startSim({ port: 0, holdFirstToken: true })
    try {
      const leave = new AbortController()
      const response = await fetch(`${gated.url}/chat/completions`, {
        method: 'POST',
        signal: leave.signal,
        headers: { authorization: 'Bearer gone' },
        body: JSON.stringify({ model: 'qwen3-4b', messages: [{ role: 'user', content: 'x' }], stream: true }),
      })
      expect(response.status).toBe(200)
      leave.abort()
      await response.text().catch(() => {})
      const cancelled = async () =>
        ((await (await fetch(`${gated.url}/sim/keys/gone`)).json()) as { cancelledStreams: number })
          .cancelledStreams
      await until(async () => (await cancelled()) === 1)
    } finally {
      await gated.stop()
    }
  })
})

describe('images', () => {
  const generate = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(`${sim.url}/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, ...headers },
      body: JSON.stringify({ model: 'flux-dev', prompt: 'a lighthouse', ...body }),
    })

  test('n valid PNGs, debited at the per-image list price, balance reported before', async () => {
    const key = freshKey()
    const response = await generate(key, { n: 3 })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-venice-balance-diem')).toBe('100.000000')
    const body = (await response.json()) as { data: { b64_json: string }[] }
    expect(body.data).toHaveLength(3)
    const png = Buffer.from(body.data[0]!.b64_json, 'base64')
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
    expect((await keyState(key)).balanceDiem).toBe('99.970000') // 3 x 0.01
  })

  test('text models, bad n and missing prompts are refused; faults apply before any byte', async () => {
    expect((await generate(freshKey(), { model: 'llama-3.3-70b' })).status).toBe(404)
    expect((await generate(freshKey(), { n: 9 })).status).toBe(400)
    expect((await generate(freshKey(), { prompt: '' })).status).toBe(400)
    const key = freshKey()
    expect((await generate(key, {}, { 'x-sim-fault': 'error_5xx' })).status).toBe(503)
    expect((await keyState(key)).balanceDiem).toBe('100.000000')
  })
  const native = (key: string, body: Record<string, unknown>) =>
    fetch(`${sim.url}/image/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ prompt: 'a lighthouse', return_binary: false, ...body }),
    })

  test('the native endpoint debits the tier a request names, answering {id, images}', async () => {
    for (const [body, balance] of [
      [{ model: 'nano-banana-pro', resolution: '2K' }, '99.760000'],
      [{ model: 'gpt-image-2', resolution: '4K', quality: 'low' }, '99.950000'],
      [{ model: 'gpt-image-2', resolution: '2K' }, '99.500000'], // the default quality, high
      [{ model: 'flux-dev', variants: 2 }, '99.980000'],
    ] as [Record<string, unknown>, string][]) {
      const key = freshKey()
      const response = await native(key, body)
      expect(response.status).toBe(200)
      const answer = (await response.json()) as { id: string; images: string[] }
      expect(answer.id).toStartWith('generate-image-')
      expect(answer.images).toHaveLength((body.variants as number | undefined) ?? 1)
      expect((await keyState(key)).balanceDiem).toBe(balance)
    }
    const key = freshKey()
    expect((await native(key, { model: 'nano-banana-pro', resolution: '8K' })).status).toBe(400)
    expect((await native(key, { model: 'gpt-image-2', resolution: '1K', quality: 'ultra' })).status).toBe(400)
    expect((await native(key, { model: 'flux-dev', return_binary: true })).status).toBe(400)
    expect((await keyState(key)).balanceDiem).toBe('100.000000')
  })

  test('the OpenAI-compatible endpoint debits a tiered model its default tier, whatever it is asked', async () => {
    for (const [body, balance] of [
      [{ model: 'nano-banana-pro', resolution: '4K' }, '99.820000'], // 1K: 0.18
      [{ model: 'gpt-image-2', resolution: '4K', quality: 'low' }, '99.740000'], // 1K high: 0.26
    ] as [Record<string, unknown>, string][]) {
      const key = freshKey()
      expect((await generate(key, body)).status).toBe(200)
      expect((await keyState(key)).balanceDiem).toBe(balance)
    }
  })
})
