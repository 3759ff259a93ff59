// One soak request, as its client sees it: chat or Responses, buffered or streamed, sometimes
// abandoned mid-way; and what it was told about money: a cost, "nothing charged", or nothing it
// can rely on (the outcome is not known to it).
import { parseMicros } from '../src/money/units.ts'
import { errorCode, MODEL } from './cluster.ts'

export type Kind = 'chat' | 'chat-stream' | 'responses' | 'responses-stream'
export const KINDS: Kind[] = ['chat', 'chat-stream', 'responses', 'responses-stream']

/** What a client was told about its money. */
export type Told = 'cost' | 'nothing' | 'unknown'

export interface SoakOutcome {
  kind: Kind
  status: number
  /** The error code of a refusal or a stream's error event; null when there was none. */
  code: string | null
  told: Told
  /** micro-USDC, when told a cost. */
  cost: number | null
  supportReference: string | null
  /** The client gave up mid-way (on purpose), or the connection broke (a replica killed). */
  aborted: boolean
  transport: string | null
}

/**
 * The contract's 5xx codes; a refusal there says nothing was charged, but store_unavailable, whose
 * record says whether it was.
 */
export const CONTRACT_5XX: Record<number, string[]> = {
  500: ['settle_failed'],
  502: ['provider_error'],
  503: [
    'store_unavailable',
    'pool_empty',
    'no_eligible_supply',
    'insufficient_routable_at_price',
    'key_wait_timeout',
  ],
}

function body(kind: Kind) {
  const stream = kind.endsWith('-stream')
  return kind.startsWith('chat')
    ? { model: MODEL, stream, max_tokens: 48, messages: [{ role: 'user', content: 'soak' }] }
    : { model: MODEL, stream, max_output_tokens: 48, input: 'soak' }
}

/** Reads an SSE body into what it told: a cost, nothing charged, an error code. */
function readStream(text: string, outcome: SoakOutcome): void {
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').find((line) => line.startsWith('data: '))
    if (!data || data === 'data: [DONE]') continue
    const event = JSON.parse(data.slice(6)) as {
      object?: string
      type?: string
      costUsdc?: string
      code?: string
      error?: { code?: string }
    }
    if (
      event.object === 'svc.cost' ||
      event.type === 'response.completed' ||
      event.type === 'response.incomplete'
    ) {
      outcome.told = 'cost'
      outcome.cost = parseMicros(event.costUsdc!)
    } else if (event.error) {
      outcome.code = event.error.code ?? 'not-error-shape'
    } else if (event.type === 'response.failed') {
      outcome.code = 'settle_failed'
    } else if (event.type === 'error') {
      outcome.code = event.code ?? 'not-error-shape'
    }
  }
  // settle_failed and provider_error (a stream with no content) both say nothing was charged.
  if (outcome.told !== 'cost')
    outcome.told =
      outcome.code === 'settle_failed' || outcome.code === 'provider_error' ? 'nothing' : 'unknown'
}

export async function soakRequest(
  url: string,
  apiKey: string,
  kind: Kind,
  abortAfterMs: number | null,
): Promise<SoakOutcome> {
  const outcome: SoakOutcome = {
    kind,
    status: 0,
    code: null,
    told: 'unknown',
    cost: null,
    supportReference: null,
    aborted: false,
    transport: null,
  }
  const controller = new AbortController()
  const timer = abortAfterMs === null ? null : setTimeout(() => controller.abort(), abortAfterMs)
  try {
    const path = kind.startsWith('chat') ? '/v1/chat/completions' : '/v1/responses'
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body(kind)),
      signal: AbortSignal.any([controller.signal, AbortSignal.timeout(120_000)]),
    })
    outcome.status = response.status
    outcome.supportReference = response.headers.get('x-svc-support-reference')
    const text = await response.text()
    if (response.status !== 200) {
      outcome.code = errorCode(text)
      outcome.told = outcome.code === 'store_unavailable' ? 'unknown' : 'nothing'
    } else if (kind.endsWith('-stream')) {
      readStream(text, outcome)
    } else {
      const cost = response.headers.get('x-svc-cost-usdc')
      outcome.told = cost === null ? 'unknown' : 'cost'
      outcome.cost = cost === null ? null : parseMicros(cost)
    }
  } catch (error) {
    outcome.aborted = true
    outcome.transport = controller.signal.aborted ? 'client_abort' : (error as Error).name
    outcome.told = 'unknown'
  } finally {
    if (timer) clearTimeout(timer)
  }
  return outcome
}
