// The stream client, a process of its own: no load tool measures SSE, so this one does. It sends
// streamed chat requests, times the first body bytes and the whole stream, and counts the content
// frames and the closing [DONE] of every stream.
//   loop: `concurrency` clients, each sending streams back to back for `durationMs` (with `pauseMs`,
//         each waits uniformly 0..2 × pauseMs after every stream: paced, as wrk's delay() does)
//   open: `streams` streams opened at once (spread over `rampMs`), held open by a slow supplier;
//         prints `OPEN <n>` once every stream has its first bytes, then the result at the end.
import { percentile } from './stats.ts'

export interface StreamRequest {
  url: string
  headers: Record<string, string>
  body: string
  /** Content frames a complete stream carries. */
  expectTokens: number
}

export type StreamClientJob =
  | (StreamRequest & { mode: 'loop'; concurrency: number; durationMs: number; pauseMs?: number })
  | (StreamRequest & { mode: 'open'; streams: number; rampMs: number })

export interface StreamOutcome {
  ok: boolean
  ttfbMs: number
  totalMs: number
  /** Content frames expected but not received. */
  lost: number
  done: boolean
}

export interface StreamClientResult {
  streams: number
  errors: number
  lost: number
  unfinished: number
  rps: number
  ttfbP50: number
  ttfbP99: number
  totalP50: number
  totalP99: number
}

const decoder = new TextDecoder()

function contentFrames(events: string[], state: { done: boolean }): number {
  let count = 0
  for (const event of events) {
    const data = event.split('\n').find((line) => line.startsWith('data: '))
    if (!data) continue
    const payload = data.slice(6)
    if (payload === '[DONE]') {
      state.done = true
      continue
    }
    const chunk = JSON.parse(payload) as { choices?: { delta?: { content?: unknown } }[] }
    const content = chunk.choices?.[0]?.delta?.content
    if (typeof content === 'string' && content.length > 0) count += 1
  }
  return count
}

export async function oneStream(req: StreamRequest, onFirstBytes?: () => void): Promise<StreamOutcome> {
  const start = performance.now()
  let ttfbMs = Number.NaN
  try {
    const response = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body })
    if (response.status !== 200 || !response.body) {
      await response.text()
      return { ok: false, ttfbMs, totalMs: performance.now() - start, lost: 0, done: false }
    }
    const state = { done: false }
    let received = 0
    let buffer = ''
    for await (const bytes of response.body) {
      if (Number.isNaN(ttfbMs)) {
        ttfbMs = performance.now() - start
        onFirstBytes?.()
      }
      buffer += decoder.decode(bytes as Uint8Array, { stream: true })
      const events = buffer.split('\n\n')
      buffer = events.pop()!
      received += contentFrames(events, state)
    }
    const lost = Math.max(0, req.expectTokens - received)
    return { ok: true, ttfbMs, totalMs: performance.now() - start, lost, done: state.done }
  } catch {
    return { ok: false, ttfbMs, totalMs: performance.now() - start, lost: 0, done: false }
  }
}

export function summarize(outcomes: StreamOutcome[], seconds: number): StreamClientResult {
  const good = outcomes.filter((o) => o.ok)
  return {
    streams: outcomes.length,
    errors: outcomes.length - good.length,
    lost: good.reduce((n, o) => n + o.lost, 0),
    unfinished: good.filter((o) => !o.done).length,
    rps: good.length / seconds,
    ttfbP50: percentile(
      good.map((o) => o.ttfbMs),
      50,
    ),
    ttfbP99: percentile(
      good.map((o) => o.ttfbMs),
      99,
    ),
    totalP50: percentile(
      good.map((o) => o.totalMs),
      50,
    ),
    totalP99: percentile(
      good.map((o) => o.totalMs),
      99,
    ),
  }
}

async function loop(job: StreamClientJob & { mode: 'loop' }): Promise<StreamClientResult> {
  const outcomes: StreamOutcome[] = []
  const start = performance.now()
  const deadline = start + job.durationMs
  const pause = job.pauseMs ?? 0
  const client = async () => {
    while (performance.now() < deadline) {
      outcomes.push(await oneStream(job))
      if (pause > 0) await Bun.sleep(Math.random() * 2 * pause)
    }
  }
  await Promise.all(Array.from({ length: job.concurrency }, client))
  return summarize(outcomes, (performance.now() - start) / 1000)
}

async function open(job: StreamClientJob & { mode: 'open' }): Promise<StreamClientResult> {
  const start = performance.now()
  let firsts = 0
  const onFirstBytes = () => {
    firsts += 1
    if (firsts === job.streams) console.log(`OPEN ${firsts} ${Math.round(performance.now() - start)}`)
  }
  // Opened in small batches, one batch a millisecond, so the ramp takes about `rampMs`.
  const perMs = Math.max(1, Math.ceil(job.streams / Math.max(1, job.rampMs)))
  const pending: Promise<StreamOutcome>[] = []
  for (let i = 0; i < job.streams; i++) {
    pending.push(oneStream(job, onFirstBytes))
    if ((i + 1) % perMs === 0) await Bun.sleep(1)
  }
  const outcomes = await Promise.all(pending)
  // Streams that failed never count as open: say so, so the parent does not wait for ever.
  if (firsts < job.streams) console.log(`OPEN ${firsts} ${Math.round(performance.now() - start)}`)
  return summarize(outcomes, (performance.now() - start) / 1000)
}

if (import.meta.main) {
  const job = JSON.parse(process.argv[2]!) as StreamClientJob
  const result = job.mode === 'loop' ? await loop(job) : await open(job)
  console.log(`RESULT ${JSON.stringify(result)}`)
}
