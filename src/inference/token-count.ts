// Counting tokens off the main thread: the tokenizer runs in a worker (token-worker.ts), started
// the first time a count is needed and stopped after a minute without one (its own heap with the
// tokenizer's tables is memory worth handing back; see BENCHMARKS.md, "Token counts in a worker").
// Suppliers report usage on almost every answer, so most processes never start it, or only now and
// then. Counts no charge depends on (count_tokens', a stream's message_start) are aside counts: they
// wait in a lane of their own.
import { textPieces } from './token-pieces.ts'
import type { CountReply, CountRequest } from './token-worker.ts'

// `bun build --compile` takes the worker as a second entry point (package.json's build). In the
// binary every module's URL is the binary's own, at the root of the entry points' common folder
// (src/), so the worker is found from there; run from source, it sits next to this module.
const IN_BINARY = import.meta.url.startsWith('file:///$bunfs/')
const WORKER_URL = new URL(IN_BINARY ? './inference/token-worker.ts' : './token-worker.ts', import.meta.url)
  .href

/** A count not answered by then fails, rather than hang a stream's end (countTokensBy asks again). */
let countTimeoutMs = 10_000

let idleMs = 60_000
let idleTimer: Timer | null = null

let worker: Worker | null = null
let starts = 0
/** Counts asked while the worker is held (holdTokenCounts, for the tests), posted in order when let go. */
let held: CountRequest[] | null = null
/** Counts still to fail as a dead worker's do (failNextTokenCounts, for the tests). */
let failing = 0
let nextId = 1
/** Counts asked and not answered yet, with their text: sent again to a new worker if one is started. */
const waiting = new Map<
  number,
  { text: CountRequest['text']; resolve(tokens: number): void; reject(error: Error): void }
>()

/** Ends the worker (the next count starts a new one). */
function stop(): void {
  if (idleTimer) clearTimeout(idleTimer)
  idleTimer = null
  worker?.terminate()
  worker = null
}

function fail(error: Error): void {
  for (const w of waiting.values()) w.reject(error)
  waiting.clear()
  stop()
}

/**
 * A count that overran its deadline may still hold the worker: it is ended, and the counts queued
 * behind it are sent to a new one (each within its own deadline), so one text never holds up the
 * rest.
 */
function restart(): void {
  stop()
  if (waiting.size === 0) return
  const w = started()
  for (const [id, { text }] of waiting) w.postMessage({ id, text } satisfies CountRequest)
}

/** Once nothing is waiting, the worker is let go after `idleMs` unless another count comes. */
function settleDown(): void {
  if (waiting.size > 0) return
  if (idleTimer) clearTimeout(idleTimer)
  idleTimer = setTimeout(stop, idleMs)
  idleTimer.unref()
}

function started(): Worker {
  if (worker) return worker
  starts++
  const w = new Worker(WORKER_URL)
  w.unref() // never what keeps the process alive
  w.onmessage = (event: MessageEvent<CountReply>) => {
    const { id, tokens, error } = event.data
    const entry = waiting.get(id)
    if (!entry) return
    waiting.delete(id)
    if (tokens === undefined) entry.reject(new CountRefused(`token count failed: ${error}`))
    else entry.resolve(tokens)
    settleDown()
  }
  w.onerror = (event) => fail(new Error(`token worker failed: ${event.message}`))
  worker = w
  return w
}

/** The tokenizer's own error on a text: asked again, it would give it again. */
class CountRefused extends Error {}

/** Tokens of `text` by the real tokenizer (gpt-tokenizer, o200k; special tokens counted as text). */
export function countTokens(text: string): Promise<number> {
  if (text === '') return Promise.resolve(0)
  return send(text, true)
}

/**
 * countTokens for a count a charge depends on: one not answered (past its deadline, or its worker
 * died) is asked again, of the new worker, after a short wait, until `deadline` (ms since the
 * epoch) has passed; then its error stands. A try begun before the deadline may end after it.
 */
export async function countTokensBy(text: string, deadline: number): Promise<number> {
  for (let wait = 50; ; wait = Math.min(wait * 2, 1_000)) {
    try {
      return await countTokens(text)
    } catch (error) {
      const left = deadline - Date.now()
      if (error instanceof CountRefused || left <= 0) throw error
      await Bun.sleep(Math.min(wait, left))
    }
  }
}

/** Posts a count to the worker; on its deadline it fails, and, when `restarts`, the worker is replaced. */
function send(text: CountRequest['text'], restarts: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const id = nextId++
    const timer = setTimeout(() => {
      waiting.delete(id)
      reject(new Error(`token count not answered in ${countTimeoutMs} ms`))
      if (restarts) restart()
    }, countTimeoutMs)
    timer.unref()
    waiting.set(id, {
      text,
      resolve(tokens) {
        clearTimeout(timer)
        resolve(tokens)
      },
      reject(error) {
        clearTimeout(timer)
        reject(error)
      },
    })
    if (idleTimer) clearTimeout(idleTimer)
    idleTimer = null
    if (held) held.push({ id, text })
    else started().postMessage({ id, text } satisfies CountRequest)
    if (failing > 0) {
      failing--
      fail(new Error('token worker failed: ended by failNextTokenCounts'))
    }
  })
}

/** Pieces of an aside count sent to the worker at once: a count asked meanwhile waits for no more. */
const ASIDE_PIECES = 64

interface AsideCount {
  pieces: string[]
  next: number
  tokens: number
  resolve(tokens: number): void
  reject(error: Error): void
}

/** Aside counts with pieces not sent yet, taken in turn; at most one batch is with the worker. */
const aside: AsideCount[] = []
let asideSent = false
/** Aside counts not answered yet. */
let asideOpen = 0

/**
 * Tokens of `text` as countTokens counts them, for a count no charge depends on: sent a
 * batch of pieces at a time, one batch with the worker at most, so a count the gateway bills by,
 * asked meanwhile, waits for one batch, not for every aside count before it.
 */
export function countTokensAside(text: string): Promise<number> {
  if (text === '') return Promise.resolve(0)
  return new Promise((resolve, reject) => {
    let open = true
    const close = () => {
      const was = open
      if (open) asideOpen--
      open = false
      const at = aside.indexOf(count)
      if (at >= 0) aside.splice(at, 1)
      clearTimeout(timer)
      return was
    }
    const count: AsideCount = {
      pieces: textPieces(text),
      next: 0,
      tokens: 0,
      resolve(tokens) {
        if (close()) resolve(tokens)
      },
      reject(error) {
        if (close()) reject(error)
      },
    }
    const timer = setTimeout(
      () => count.reject(new Error(`token count not answered in ${countTimeoutMs} ms`)),
      countTimeoutMs,
    )
    timer.unref()
    asideOpen++
    aside.push(count)
    sendAside()
  })
}

/** Sends the next batch of the first aside count, which then goes to the back of the line. */
function sendAside(): void {
  if (asideSent || aside.length === 0) return
  const count = aside.shift()!
  const batch = count.pieces.slice(count.next, count.next + ASIDE_PIECES)
  count.next += batch.length
  if (count.next < count.pieces.length) aside.push(count)
  asideSent = true
  send(batch, false)
    .then(
      (tokens) => {
        count.tokens += tokens
        if (count.next >= count.pieces.length) count.resolve(count.tokens)
      },
      (error: Error) => count.reject(error),
    )
    .finally(() => {
      asideSent = false
      sendAside()
    })
}

/** Counts asked and not answered, aside ones included (for the tests). */
export function tokenCountsPending(): number {
  return waiting.size - (asideSent ? 1 : 0) + asideOpen
}

/** How many workers this process has started (for the tests). */
export function tokenizerStarts(): number {
  return starts
}

/** Whether this process has started the tokenizer (for the tests and the memory figures). */
export function tokenizerStarted(): boolean {
  return worker !== null
}

/**
 * How long a count may take, the worker's cold start included (the test preload lengthens it: on a
 * loaded machine a cold start alone can pass the production deadline).
 */
export function setTokenCountTimeoutMs(ms: number): void {
  countTimeoutMs = ms
}

/** The next `n` counts end their worker as it dies, failing every count it holds (for the tests). */
export function failNextTokenCounts(n: number): void {
  failing = n
}

/**
 * Counts asked from now on wait here, in order, until the function returned is called: then they go
 * to the worker as they would have (for the tests: the order the worker gets them in, made certain).
 */
export function holdTokenCounts(): () => void {
  held = []
  return () => {
    const requests = held ?? []
    held = null
    for (const request of requests) if (waiting.has(request.id)) started().postMessage(request)
  }
}

/** How long an idle worker is kept (the tests shorten it). */
export function setTokenizerIdleMs(ms: number): void {
  idleMs = ms
}
