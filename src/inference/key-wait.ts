// Admission for a request that may wait for a busy offer (SVC_KEY_WAIT_MS): admit again and
// again until it is admitted, refused for another reason, out of time, or its client left.
import type { Admission } from '../market/admission.ts'
import type { AdmitRefusal } from '../market/refusal-errors.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import type { DispatchDeps, DispatchRequest, Requester, UpstreamJob } from './dispatch.ts'
import { InFlightCounts } from './in-flight.ts'

// A request waiting for a busy offer asks again after a short wait that doubles up to a
// ceiling, so a crowd of waiters does not poll Redis at the pace of the first.
const KEY_WAIT_FIRST_MS = 15
const KEY_WAIT_MAX_MS = 250

export async function admitWaiting(
  deps: DispatchDeps,
  req: DispatchRequest,
  job: UpstreamJob,
  requester: Requester,
  attemptId: string,
  tried: string[],
) {
  // A test's clock decides when the wait is over, instead of the test waiting it out.
  const now = deps.market.keyWaitClock ?? Date.now
  const deadline = now() + deps.market.keyWaitMs
  let wait = KEY_WAIT_FIRST_MS
  let waiting: string | null = null
  try {
    for (;;) {
      // The renewer counts the admit while Redis has it and holds what it admitted: a stop waits.
      const sending = deps.steps.admit({
        attemptId,
        ...('apiKeyDigest' in requester
          ? { accountId: '', apiKeyId: '', apiKeyDigest: requester.apiKeyDigest }
          : { accountId: requester.accountId, apiKeyId: requester.apiKeyId }),
        holdDiem: job.holdDiem,
        keyCap: deps.market.keyMaxInFlight,
        accountCap: deps.market.walletMaxInFlight,
        leaseMs: job.leaseMs ?? deps.market.leaseMs,
        tried,
        defaultMaxPriceCents: deps.defaultMaxPriceCents,
        model: job.modelId,
        requestId: req.requestId,
        capGroup: job.capGroup,
        recordRetentionMs: deps.recordRetentionMs,
      })
      const result = await deps.renewer.admit(sending, (answer) =>
        answer.code === AdmitCode.Admitted ? (answer as Admission) : null,
      )
      if (result.code !== AdmitCode.KeysBusy || now() >= deadline || req.signal.aborted) return result
      // A waiting request counts against its wallet's in-flight cap on this replica: past it, the
      // wallet's extra requests are refused like any over the cap, not queued without end.
      if (waiting === null) {
        const who = (result as { who?: { accountId: string } }).who
        waiting = who?.accountId ?? null
        if (waiting !== null && !waiters.enter(waiting, deps.market.walletMaxInFlight)) {
          waiting = null
          return { code: AdmitCode.BuyerConcurrency, who: (result as { who?: unknown }).who } as AdmitRefusal
        }
        if (waiting !== null)
          deps.logger.debug({ requestId: req.requestId }, 'waiting for a busy supplier key')
      }
      await Bun.sleep(wait / 2 + Math.random() * wait)
      wait = Math.min(wait * 2, KEY_WAIT_MAX_MS)
    }
  } finally {
    if (waiting !== null) waiters.leave(waiting)
  }
}

/** Requests of each wallet waiting for an offer in this process. */
const waiters = new InFlightCounts()
