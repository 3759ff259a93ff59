// A stream is handed to the relay only once the supplier's first frame is whole: what arrives in the
// first read may be part of a frame, and a frame that never ends must fail the attempt before any
// byte reaches the client (so it falls forward) rather than be relayed as an empty answer. The
// supplier holds its rest back until the test has taken the first read, so the split is exact.
import { afterAll, expect, test } from 'bun:test'
import { firstFrame } from '../../src/inference/dispatch.ts'
import { UpstreamEvents } from '../../src/inference/upstream-events.ts'
import { type UpstreamResponse, upstreamRequest } from '../../src/upstream/client.ts'
import { type HostileAnswer, hostileSupplier, httpHead } from '../helpers/hostile-supplier.ts'

const FRAME_BOUND = 64 * 1024
const SSE_HEAD = httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' })

let plan: HostileAnswer
const supplier = hostileSupplier(() => plan)
afterAll(() => supplier.stop())

/** A gate the test opens, and the supplier's answer held behind it. */
function gated(answer: Omit<HostileAnswer, 'gate'>) {
  let open = () => {}
  const gate = new Promise<void>((resolve) => {
    open = resolve
  })
  plan = { ...answer, gate }
  return open
}

/** The call as dispatch makes it, up to its first read: what the first bytes were. */
async function firstRead(): Promise<{ response: UpstreamResponse; events: UpstreamEvents; started: number }> {
  const started = performance.now()
  const response = await upstreamRequest(`${supplier.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    deadline: { ms: 30_000, until: 'body' },
  })
  const head = await response.read()
  expect(head).not.toBeNull()
  const events = new UpstreamEvents(FRAME_BOUND, head!)
  expect(events.framed()).toBe(false)
  return { response, events, started }
}

test('a first frame that never ends is a stream broken before content, read no further than its bound', async () => {
  const open = gated({
    head: SSE_HEAD,
    body: 'data: {"choices":[{"delta":{"content":"',
    fill: 64 * 1024 * 1024,
    close: true,
  })
  const { response, events, started } = await firstRead()
  open()
  await firstFrame(response, events, started, 30_000)
  expect(events.brokeBeforeContent()).toBe(true)
  response.cancel()
})

test('a first frame completed by a later read: its content is the first event', async () => {
  const open = gated({
    head: SSE_HEAD,
    body: 'data: {"choices":[{"delta":{"con',
    tail: 'tent":"hi"}}]}\n\ndata: [DONE]\n\n',
    close: true,
  })
  const { response, events, started } = await firstRead()
  open()
  await firstFrame(response, events, started, 30_000)
  expect(events.brokeBeforeContent()).toBe(false)
  expect(events.shift()).toMatchObject({ kind: 'content', delta: 'hi' })
  response.cancel()
})

test('a keep-alive comment is a whole frame: the stream is handed on, its content still to come', async () => {
  const open = gated({ head: SSE_HEAD, body: ': keep', tail: '-alive\n\n', close: true })
  const { response, events, started } = await firstRead()
  open()
  await firstFrame(response, events, started, 30_000)
  expect(events.framed()).toBe(true)
  expect(events.shift()).toBeUndefined()
  response.cancel()
})

test('a first frame still partial when the first-byte time is out: broken, and the call is ended', async () => {
  gated({ head: SSE_HEAD, body: 'data: {"choices":' }) // the gate never opens
  const { response, events, started } = await firstRead()
  await firstFrame(response, events, started, 200)
  expect(events.brokeBeforeContent()).toBe(true)
  expect(await response.read()).toBeNull()
})
