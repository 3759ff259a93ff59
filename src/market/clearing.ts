// The clearing scripts' typed wrappers: clear charges an attempt from its burn, release ends a
// failed one with no charge (lua/clear.lua, lua/release.lua). This module shapes arguments and
// results, and sends a clear that found no attempt once more with its admission (a failover lost it).
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import { ClearCode, ReleaseCode } from '../redis/result-codes.ts'
import { replyNumber as n, type ScriptReply as Reply, runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import type { Admission } from './admission.ts'

export interface ClearRequest {
  attemptId: string
  /** The burn the reported usage comes to; the script bills at most the hold of it. */
  burn: MicroDiem
  /**
   * The burn of that usage as far as the request allows it (its prompt bound, max_tokens x n),
   * when less: the script bills at most this, and the rest of `burn` is disputed.
   */
  boundedBurn?: MicroDiem | null
  feeBps: number
  /** The supplier key's upstream balance after this request, when known. */
  upstreamBalanceAfter: MicroDiem | null
  inputTokens: number
  outputTokens: number
  estimated: boolean
  outcome: 'completed' | 'incomplete'
  /** How long the cleared attempt is kept as its request's record (the script's default: 30 days). */
  recordRetentionMs?: number
  /** The upstream's own cost when it disagrees with the burn: recorded, never billed. */
  upstreamCost?: MicroDiem | null
  /** The offer's side lives apart and is settled by the caller (market/two-phase.ts). */
  offerApart?: boolean
  /** The offer's upstream generation admit answered; without it the balance after is not recorded. */
  upstreamGen?: number
  /**
   * The attempt as admit answered it: cleared late from these when the store lost the admission
   * (a failover to a replica it never reached), since the request was served all the same.
   */
  admission?: Partial<AdmittedAs>
}

/** What a clear needs of an admission the store no longer has: what admit answered of it. */
export type AdmittedAs = Pick<
  Admission,
  'accountId' | 'apiKeyId' | 'offerId' | 'askCents' | 'holdUsdc' | 'holdDiem' | 'model' | 'requestId'
>

export interface Clearing {
  /** What the buyer paid, micro-USDC. */
  charged: MicroUsdc
  /** burn x ask, what the supplier's side of the ledger records. */
  cost: MicroUsdc
  burn: MicroDiem
  askCents: number
  confirmedAfter: MicroUsdc
  writtenOff: MicroUsdc
  /**
   * Burn reported beyond what could be billed (what the request allows, the hold, the offer's
   * capacity left): never paid.
   */
  disputed: MicroDiem
  /** True when this attempt had been cleared already: nothing changed this time. */
  replay: boolean
  /** The platform's fee out of what was charged, micro-USDC (the supplier earns the rest). */
  fee: MicroUsdc
  /** True when the store had lost the admission and this clear wrote it, cleared late. */
  admissionLost: boolean
  /**
   * The UTC day (records/days.ts dayOf) the balance after holds on, present when it is known: given,
   * and the request admitted on the day of the clear (the upstream's allocation resets at 00:00 UTC).
   */
  balanceDay?: number
  /** When it was cleared (ms, Redis's clock, the record's endedAt): what its fill counts at held apart. */
  clearedAt?: number
}

export class ClearingError extends Error {
  constructor(
    readonly attemptId: string,
    readonly reason: 'unknown_attempt' | 'released',
  ) {
    super(`cannot clear attempt ${attemptId}: ${reason}`)
  }
}

export async function clear(store: Store, keys: Keyspace, req: ClearRequest): Promise<Clearing> {
  let reply = await clearOnce(store, keys, req)
  let admissionLost = false
  // Rare: only after a failover lost the admission. The first call sends no admission, since every
  // argument costs Redis on every clear.
  const lost = n(reply[0]) === ClearCode.UnknownAttempt && req.admission && admissionArgs(req.admission)
  if (lost) {
    reply = await clearOnce(store, keys, req, lost)
    admissionLost = n(reply[0]) === ClearCode.Cleared && n(reply[7]) === 0
    if (admissionLost) metrics.lostAdmissions.inc()
  }
  const code = n(reply[0])
  if (code === ClearCode.UnknownAttempt) throw new ClearingError(req.attemptId, 'unknown_attempt')
  if (code === ClearCode.Released) throw new ClearingError(req.attemptId, 'released')
  const day = reply[10]
  const clearedAt = reply[11]
  return {
    charged: n(reply[1]) as MicroUsdc,
    cost: n(reply[2]) as MicroUsdc,
    burn: n(reply[3]) as MicroDiem,
    askCents: n(reply[4]),
    confirmedAfter: n(reply[5]) as MicroUsdc,
    writtenOff: n(reply[6]) as MicroUsdc,
    replay: n(reply[7]) === 1,
    disputed: n(reply[8]) as MicroDiem,
    fee: n(reply[9]) as MicroUsdc,
    admissionLost,
    ...(day !== undefined && day !== '' ? { balanceDay: n(day) } : {}),
    ...(clearedAt !== undefined && clearedAt !== '' ? { clearedAt: n(clearedAt) } : {}),
  }
}

/** lua/clear.lua's ARGV[14..] from the admission, or null when some of it is not known. */
function admissionArgs(a: Partial<AdmittedAs>): (string | number)[] | null {
  const args = [a.accountId, a.apiKeyId, a.offerId, a.askCents, a.holdUsdc, a.holdDiem, a.model, a.requestId]
  return args.every((arg) => arg !== undefined) ? (args as (string | number)[]) : null
}

function clearOnce(store: Store, keys: Keyspace, req: ClearRequest, admission: (string | number)[] = []) {
  return runScript(
    store,
    'clear',
    [keys.base],
    {
      attemptId: req.attemptId,
      // A supplier may report any count: past a safe integer it is only more disputed burn.
      burn: Math.min(req.burn, Number.MAX_SAFE_INTEGER),
      feeBps: req.feeBps,
      upstreamBalance: req.upstreamBalanceAfter === null ? '' : req.upstreamBalanceAfter,
      inputTokens: req.inputTokens,
      outputTokens: req.outputTokens,
      estimated: req.estimated ? '1' : '0',
      outcome: req.outcome,
      recordRetentionMs: req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
      upstreamCost: req.upstreamCost ?? '',
      offerApart: req.offerApart ? '1' : '0',
      upstreamGen: req.upstreamGen ?? '',
      boundedBurn: req.boundedBurn ?? '',
    },
    admission,
  ) as Promise<Reply>
}

export interface ReleaseRequest {
  attemptId: string
  errorCode: string
  cooldownMs: number
  upstreamBalance: MicroDiem | null
  /** No other supplier will be tried for this request (its record is complete with this attempt). */
  final?: boolean
  /** How long the released attempt is kept as its request's record. */
  recordRetentionMs?: number
  /** The offer's side lives apart and is voided by the caller (market/two-phase.ts). */
  offerApart?: boolean
  /** The offer's upstream generation admit answered; without it the balance is not recorded. */
  upstreamGen?: number
  /**
   * The request ends uncharged for good: an attempt the reaper ended is released too, so that no
   * late clear charges it after its buyer was told nothing was charged (lua/release.lua).
   */
  endReaped?: boolean
}

/** Returns true when this call released the attempt, false when it had already ended. */
export async function release(store: Store, keys: Keyspace, req: ReleaseRequest): Promise<boolean> {
  return (await releaseAttempt(store, keys, req)).released
}

/**
 * release, and the UTC day the given balance holds on (null when not known: none given, the
 * attempt unknown, or admitted on an earlier day), for a void held apart.
 */
export async function releaseAttempt(
  store: Store,
  keys: Keyspace,
  req: ReleaseRequest,
): Promise<{ released: boolean; balanceDay: number | null }> {
  const reply = (await runScript(store, 'release', [keys.base], {
    attemptId: req.attemptId,
    errorCode: req.errorCode,
    cooldownMs: req.cooldownMs,
    upstreamBalance: req.upstreamBalance === null ? '' : req.upstreamBalance,
    final: req.final ? '1' : '0',
    recordRetentionMs: req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
    offerApart: req.offerApart ? '1' : '0',
    upstreamGen: req.upstreamGen ?? '',
    endReaped: req.endReaped ? '1' : '0',
  })) as Reply
  const released = n(reply[0]) === ReleaseCode.Released
  const day = reply[released ? 2 : 1]
  return { released, balanceDay: day === undefined || day === '' ? null : n(day) }
}
