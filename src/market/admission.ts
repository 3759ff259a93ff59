// The admission script's typed wrapper: admit picks the cheapest eligible offer and holds the
// request's worst case (lua/admit.lua). This module only shapes arguments and results.
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import { replyNumber as n, type ScriptReply as Reply, runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import type { KeyOwner } from './key-owners.ts'
import type { AdmitRefusal } from './refusal-errors.ts'

export interface AdmitRequest {
  attemptId: string
  /** Who asks: the account and key ids, or, on the hot path, the key's digest resolved by admit. */
  accountId: string
  apiKeyId: string
  apiKeyDigest?: string
  holdDiem: MicroDiem
  keyCap: number
  accountCap: number
  leaseMs: number
  tried: string[]
  defaultMaxPriceCents: number
  model: string
  requestId: string
  /** An extra per-wallet in-flight count with its own cap (images: one at a time). */
  capGroup?: { name: string; cap: number }
  /** How long an attempt this call reaps on the way is kept as its request's record. */
  recordRetentionMs?: number
  /** The time now, ms, in place of Redis TIME: only a test sets it, to cross a budget period. */
  now?: number
}

export interface Admission {
  code: AdmitCode.Admitted
  attemptId: string
  accountId: string
  apiKeyId: string
  offerId: string
  askCents: number
  holdUsdc: MicroUsdc
  holdDiem: MicroDiem
  leaseDeadline: number
  confirmedAfter: MicroUsdc
  upstreamBaseUrl: string
  /** The offer's upstream key, sealed (see upstream-key-crypto.ts). */
  upstreamKeyEnc: string
  /** The supplier key's last known upstream balance, micro-DIEM, before this request. */
  upstreamBalance: MicroDiem | null
  /**
   * The offer's upstream generation (lua/offer-put.lua moves it on with its URL or key): the clear
   * or release sends it back, and a balance learned through an upstream changed since is not recorded.
   */
  upstreamGen: number
  /** The model asked for (kept on the attempt, and on the supplier's fill once cleared). */
  model: string
  requestId: string
}

export async function admit(
  store: Store,
  keys: Keyspace,
  req: AdmitRequest,
): Promise<Admission | AdmitRefusal> {
  const reply = (await runScript(store, 'admit', [keys.base], {
    attemptId: req.attemptId,
    accountId: req.accountId,
    apiKeyId: req.apiKeyId,
    holdDiem: req.holdDiem,
    keyCap: req.keyCap,
    accountCap: req.accountCap,
    leaseMs: req.leaseMs,
    tried: req.tried.join(','),
    defaultMaxPriceCents: req.defaultMaxPriceCents,
    model: req.model,
    requestId: req.requestId,
    capGroup: req.capGroup?.name ?? '',
    capGroupCap: req.capGroup?.cap ?? 0,
    apiKeyDigest: req.apiKeyDigest ?? '',
    recordRetentionMs: req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
    now: req.now ?? '',
  })) as Reply
  const code = n(reply[0]) as AdmitCode
  if (code === AdmitCode.UnknownKey) return { code }
  // Every other reply ends with whose request it was (admit resolves a digest to them).
  const who = { accountId: String(reply[reply.length - 2]), apiKeyId: String(reply[reply.length - 1]) }
  if (code !== AdmitCode.Admitted) return Object.assign(refusalOf(reply.slice(0, -2)), { who })
  return {
    code,
    attemptId: req.attemptId,
    ...who,
    offerId: String(reply[1]),
    askCents: n(reply[2]),
    holdUsdc: n(reply[3]) as MicroUsdc,
    holdDiem: n(reply[4]) as MicroDiem,
    leaseDeadline: n(reply[5]),
    confirmedAfter: n(reply[6]) as MicroUsdc,
    upstreamBaseUrl: String(reply[7]),
    upstreamKeyEnc: String(reply[8]),
    upstreamBalance: reply[9] === '' || reply[9] === undefined ? null : (n(reply[9]) as MicroDiem),
    upstreamGen: n(reply[10]),
    model: req.model,
    requestId: req.requestId,
  }
}

/** Whose request an admission or a refusal was, as admit named them (a refused unknown key names no one). */
export function whoseRequest(result: Admission | AdmitRefusal): KeyOwner | undefined {
  return result.code === AdmitCode.Admitted ? result : (result as { who?: KeyOwner }).who
}

/** A refusal as admit and quote return it: its code, then the hint values some codes carry. */
export function refusalOf(reply: (string | number)[]): AdmitRefusal {
  const code = n(reply[0]) as AdmitCode
  switch (code) {
    case AdmitCode.NoEligibleSupply:
      return {
        code,
        buyerMaxCents: n(reply[1]),
        cheapestPostedCents: n(reply[2]),
        routableAboveMax: n(reply[3]),
      }
    case AdmitCode.InsufficientRoutable:
      return { code, eligibleRoutable: n(reply[1]), maxEligibleOffer: n(reply[2]) }
    case AdmitCode.InsufficientBalance:
      return { code, needed: n(reply[1]), confirmed: n(reply[2]), askCents: n(reply[3]) }
    case AdmitCode.KeyLimit:
      return {
        code,
        limit: n(reply[1]),
        used: n(reply[2]),
        needed: n(reply[3]),
        askCents: n(reply[4]),
        confirmed: n(reply[5]),
        resetsAt: reply[6] === '' || reply[6] === undefined ? null : n(reply[6]),
      }
    default:
      return { code } as AdmitRefusal
  }
}

/**
 * The no-wait select of a video quote (lua/quote.lua): the ask a job of `burn` would clear at now,
 * or the refusal (KeysBusy when every eligible key is in flight).
 */
export async function quote(
  store: Store,
  keys: Keyspace,
  accountId: string,
  burn: MicroDiem,
  defaultMaxPriceCents: number,
): Promise<{ code: AdmitCode.Admitted; askCents: number } | AdmitRefusal> {
  const reply = (await runScript(store, 'quote', [keys.base], {
    accountId,
    holdDiem: burn,
    defaultMaxPriceCents,
  })) as Reply
  if (n(reply[0]) === AdmitCode.Admitted) return { code: AdmitCode.Admitted, askCents: n(reply[1]) }
  return refusalOf(reply)
}
