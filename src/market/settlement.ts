// Typed wrappers of the money scripts: admit, clear, release, renew, reap. Every path that moves
// money is one of these Lua scripts; this module only shapes arguments and results.
import type Redis from 'ioredis'
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import { AdmitCode, type AdmitRefusal } from './result-codes.ts'

export interface AdmitRequest {
  attemptId: string
  /** Who asks: the account and key ids, or, on the hot path, the key's digest resolved by admit. */
  accountId: string
  apiKeyId: string
  apiKeyDigest?: string
  burnEstimate: MicroDiem
  keyCap: number
  walletCap: number
  leaseMs: number
  tried: string[]
  defaultMaxPriceCents: number
  model: string
  requestId: string
  /** An extra per-wallet in-flight count with its own cap (images: one at a time). */
  lane?: { name: string; cap: number }
  /** How long an attempt this call reaps on the way is kept as its request's record. */
  recordRetentionMs?: number
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
}

type Reply = (string | number)[]
const n = (value: string | number | undefined) => Number(value ?? 0)

export async function admit(
  redis: Redis,
  keys: Keyspace,
  req: AdmitRequest,
): Promise<Admission | AdmitRefusal> {
  const reply = (await runScript(
    redis,
    'admit',
    [keys.base],
    [
      req.attemptId,
      req.accountId,
      req.apiKeyId,
      req.burnEstimate,
      req.keyCap,
      req.walletCap,
      req.leaseMs,
      req.tried.join(','),
      req.defaultMaxPriceCents,
      req.model,
      req.requestId,
      req.lane?.name ?? '',
      req.lane?.cap ?? 0,
      req.apiKeyDigest ?? '',
      req.recordRetentionMs ?? '',
    ],
  )) as Reply
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
  }
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
      return { code, needed: n(reply[1]), confirmed: n(reply[2]) }
    default:
      return { code } as AdmitRefusal
  }
}

export interface ClearRequest {
  attemptId: string
  burn: MicroDiem
  feeBps: number
  /** The supplier key's upstream balance after this request, when known. */
  upstreamBalanceAfter: MicroDiem | null
  inputTokens: number
  outputTokens: number
  estimated: boolean
  outcome: 'completed' | 'incomplete'
  /** How long the cleared attempt is kept as its request's record (the script's default: 30 days). */
  recordRetentionMs?: number
}

export interface Clearing {
  /** What the buyer paid, micro-USDC. */
  charged: MicroUsdc
  /** burn x ask, what the supplier's side of the ledger records. */
  cost: MicroUsdc
  burn: MicroDiem
  askCents: number
  confirmedAfter: MicroUsdc
  writtenOff: MicroUsdc
  /** True when this attempt had been cleared already: nothing changed this time. */
  replay: boolean
}

export class SettlementError extends Error {
  constructor(
    readonly attemptId: string,
    readonly reason: 'unknown_attempt' | 'released',
  ) {
    super(`cannot clear attempt ${attemptId}: ${reason}`)
  }
}

export async function clear(redis: Redis, keys: Keyspace, req: ClearRequest): Promise<Clearing> {
  const reply = (await runScript(
    redis,
    'clear',
    [keys.base],
    [
      req.attemptId,
      req.burn,
      req.feeBps,
      req.upstreamBalanceAfter === null ? '' : req.upstreamBalanceAfter,
      req.inputTokens,
      req.outputTokens,
      req.estimated ? '1' : '0',
      req.outcome,
      req.recordRetentionMs ?? '',
    ],
  )) as Reply
  const code = n(reply[0])
  if (code === -1) throw new SettlementError(req.attemptId, 'unknown_attempt')
  if (code === -2) throw new SettlementError(req.attemptId, 'released')
  return {
    charged: n(reply[1]) as MicroUsdc,
    cost: n(reply[2]) as MicroUsdc,
    burn: n(reply[3]) as MicroDiem,
    askCents: n(reply[4]),
    confirmedAfter: n(reply[5]) as MicroUsdc,
    writtenOff: n(reply[6]) as MicroUsdc,
    replay: n(reply[7]) === 1,
  }
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
}

/** Returns true when this call released the attempt, false when it had already ended. */
export async function release(redis: Redis, keys: Keyspace, req: ReleaseRequest): Promise<boolean> {
  const reply = (await runScript(
    redis,
    'release',
    [keys.base],
    [
      req.attemptId,
      req.errorCode,
      req.cooldownMs,
      req.upstreamBalance === null ? '' : req.upstreamBalance,
      req.final ? '1' : '0',
      req.recordRetentionMs ?? '',
    ],
  )) as Reply
  return n(reply[0]) === 1
}

export async function renewLease(
  redis: Redis,
  keys: Keyspace,
  attemptId: string,
  leaseMs: number,
): Promise<boolean> {
  return Number(await runScript(redis, 'renew', [keys.base], [attemptId, leaseMs])) === 1
}

export async function reapExpired(
  redis: Redis,
  keys: Keyspace,
  limit = 100,
  recordRetentionMs?: number,
): Promise<number> {
  return Number(await runScript(redis, 'reap', [keys.base], [limit, recordRetentionMs ?? '']))
}
