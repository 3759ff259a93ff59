// Video jobs in tests: retrieved as a client does, and a supplier whose polls of one job race.
import { TINY_MP4 } from '../../src/sim/video.ts'

/** Retrieves job `id` until it stops answering processing: its MP4, or an error. */
export async function retrieveWhenDone(
  post: (path: string, json: unknown) => Promise<Response>,
  id: string,
): Promise<Response> {
  // No deadline of its own: the test's time limit is the hang guard.
  for (;;) {
    const media = await post('/v1/video/retrieve', { id })
    if (media.status !== 200 || !media.headers.get('content-type')?.startsWith('application/json'))
      return media
    await media.json()
    await Bun.sleep(20)
  }
}

/** A video supplier whose first retrieve waits for the test's gate: two polls of one job race. */
export interface GatedVideoSupplier {
  url: string
  /** Retrieve calls received so far. */
  retrieves(): number
  /** Lets the first retrieve answer. */
  openGate(): void
  stop(): void
}

/** Quotes every job at $0.25 and queues it as `q-1`; retrieve number `n` (from 1) gets `answer(n)`, the first once the gate opens. */
export function gatedVideoSupplier(answer: (n: number) => Response): GatedVideoSupplier {
  let retrieves = 0
  let openGate: () => void = () => {}
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (request) => {
      const path = new URL(request.url).pathname
      // The simulated supplier's price of the tests' 5 s job.
      if (path === '/video/quote') return videoQuote()
      if (path === '/video/queue') return Response.json({ model: 'wan-2.1-video', queue_id: 'q-1' })
      const n = ++retrieves
      if (n === 1)
        await new Promise<void>((resolve) => {
          openGate = resolve
        })
      return answer(n)
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    retrieves: () => retrieves,
    openGate: () => openGate(),
    stop: () => server.stop(true),
  }
}

/** The upstream's quote of the tests' 5 s job at the simulated supplier's price ($0.25). */
export const videoQuote = () => Response.json({ quote: 0.25 })

/** A supplier's finished job. */
export const videoMp4 = () => new Response(TINY_MP4, { headers: { 'content-type': 'video/mp4' } })
/** A supplier's failed job. */
export const videoFailed = () => Response.json({ error: 'failed' }, { status: 500 })
