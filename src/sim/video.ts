// The simulated supplier's video queue, after Venice's flow: POST /video/quote prices a job (no
// charge, no job); POST /video/queue takes a job and debits exactly what its quote says; POST
// /video/retrieve answers its status while it runs, then a tiny MP4. A job may fail (the
// `job_fail` fault: its DIEM is refunded) or expire (then: not found).
import { formatMicros } from '../money/units.ts'
import { authenticate, json, preflight, veniceError } from './http.ts'
import type { SimKeyState, SimKeys } from './keys.ts'
import { findSimModel } from './models.ts'
import { quoteNumber, type SimVideoParams, simVideoPrice } from './video-prices.ts'

// The smallest ISO media file players accept as MP4: an `ftyp` box and an empty `mdat` box.
export const TINY_MP4 = new Uint8Array([
  0, 0, 0, 24, 0x66, 0x74, 0x79, 0x70, 0x69, 0x73, 0x6f, 0x6d, 0, 0, 2, 0, 0x69, 0x73, 0x6f, 0x6d, 0x6d, 0x70,
  0x34, 0x31, 0, 0, 0, 8, 0x6d, 0x64, 0x61, 0x74,
])

export interface VideoTiming {
  /** How long a job runs before its MP4 is ready. */
  videoJobMs: number
  /** How long a job's media is kept after it was queued. */
  videoExpiryMs: number
}

interface Job {
  key: SimKeyState
  model: string
  queuedAt: number
  fails: boolean
  debited: number
  refunded: boolean
}

export function videoQueue(keys: SimKeys, timing: VideoTiming) {
  const jobs = new Map<string, Job>()

  /** The caller's key and the job it describes, priced; or Venice's error. */
  async function priced(request: Request) {
    const caller = authenticate(keys, request)
    if (caller instanceof Response) return caller
    let body: SimVideoParams & { model?: unknown; prompt?: unknown }
    try {
      body = (await request.json()) as typeof body
    } catch {
      return veniceError(400, 'Invalid JSON body')
    }
    const model = typeof body?.model === 'string' ? findSimModel(body.model) : undefined
    if (model?.type !== 'video') return veniceError(404, 'Specified model not found')
    const price = simVideoPrice(model, body)
    if ('error' in price) return veniceError(400, price.error)
    return { caller, body, model, price }
  }

  /** The job's price in USD: no charge, no job, no fault (a quote is not a job). */
  async function quote(request: Request): Promise<Response> {
    const job = await priced(request)
    if (job instanceof Response) return job
    return json(200, { quote: quoteNumber(job.price.micros) })
  }

  async function queue(request: Request): Promise<Response> {
    const job = await priced(request)
    if (job instanceof Response) return job
    const { caller, body, model, price } = job
    if (typeof body.prompt !== 'string' || body.prompt === '') {
      return veniceError(400, 'prompt and duration are required')
    }
    const admitted = preflight(keys, caller, request)
    if (admitted instanceof Response) return admitted
    const debited = keys.debit(admitted.key, price.micros)
    const queueId = crypto.randomUUID()
    jobs.set(queueId, {
      key: admitted.key,
      model: model.id,
      queuedAt: Date.now(),
      fails: admitted.fault === 'job_fail',
      debited,
      refunded: false,
    })
    return json(200, { model: model.id, queue_id: queueId }, admitted.balanceHeader)
  }

  async function retrieve(request: Request): Promise<Response> {
    const caller = authenticate(keys, request)
    if (caller instanceof Response) return caller
    let body: { queue_id?: unknown }
    try {
      body = (await request.json()) as typeof body
    } catch {
      return veniceError(400, 'Invalid JSON body')
    }
    const job = typeof body?.queue_id === 'string' ? jobs.get(body.queue_id) : undefined
    if (!job || job.key !== caller) return veniceError(404, 'Job not found')
    const age = Date.now() - job.queuedAt
    if (age > timing.videoExpiryMs) return veniceError(404, 'Job not found or media expired')
    if (age < timing.videoJobMs) {
      return json(200, {
        status: 'PROCESSING',
        average_execution_time: timing.videoJobMs,
        execution_duration: age,
      })
    }
    if (job.fails) {
      // The upstream gives the DIEM of a failed job back.
      if (!job.refunded) {
        job.refunded = true
        job.key.balanceMicroDiem += job.debited
      }
      return veniceError(500, 'Video generation failed; the job was refunded')
    }
    return new Response(TINY_MP4, {
      headers: {
        'content-type': 'video/mp4',
        'x-venice-balance-diem': formatMicros(job.key.balanceMicroDiem),
      },
    })
  }

  return { quote, queue, retrieve }
}
