// Rotating an endpoint's signing secret, as Svix and Stripe let a receiver do without missing a
// delivery: the new secret signs at once, and the previous secrets (those it replaced) keep signing
// beside it until their overlap ends, so a receiver that still holds one verifies each delivery
// meanwhile (Standard Webhooks puts several "v1,<signature>" in one header, space-separated). An
// overlap of 0 ends every previous secret now (one that leaked). The record is replaced by webhook-state.lua, only
// over the record as read.
import { ApiError, badRequest } from '../errors.ts'

/** How long a previous secret signs beside the new one, unless the rotation says otherwise. */
export const DEFAULT_OVERLAP_SECONDS = 24 * 60 * 60
/** The longest overlap a rotation may ask for. */
export const MAX_OVERLAP_SECONDS = 7 * 24 * 60 * 60
/** The most previous secrets kept signing at once: rotations in a row drop the oldest first. */
export const MAX_PREVIOUS_SECRETS = 3
/**
 * The most Idempotency-Keys remembered whose secret a later rotation replaced: kept apart from the
 * previous secrets, which an overlap's end or a run of rotations drops, so a late retry of such a
 * key is refused rather than rotating again; the oldest go first.
 */
export const MAX_REPLACED_KEYS = 32

/** A secret the current one replaced: sealed as the current one is, signing until `until` (ms). */
export interface PreviousSecret {
  sealedSecret: string
  until: number
  /** The Idempotency-Key digest of the rotation that made this secret, when it had one. */
  key: string | null
}

/** The rotation that made the current secret. */
export interface Rotation {
  at: number
  overlapSeconds: number
  /** Its Idempotency-Key's digest, or null: a retry with the same key answers this rotation. */
  key: string | null
}

/** The rotation fields of a stored endpoint (absent on one never rotated). */
export interface RotatedFields {
  sealedSecret: string
  rotation?: Rotation | null
  previousSecrets?: PreviousSecret[]
  /** The Idempotency-Key digests of rotations whose secret was replaced since, newest first. */
  replacedKeys?: string[]
}

/** The overlap asked for, in whole seconds: absent is the default, anything else a 400. */
export function overlapOf(value: unknown): number {
  if (value === undefined) return DEFAULT_OVERLAP_SECONDS
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_OVERLAP_SECONDS)
    throw badRequest(
      `overlapSeconds must be a whole number of seconds from 0 to ${MAX_OVERLAP_SECONDS}`,
      'invalid_overlap',
    )
  return value
}

/** The previous secrets that still sign at `now`, newest first. */
export function signingPrevious(endpoint: RotatedFields, now: number): PreviousSecret[] {
  return (endpoint.previousSecrets ?? []).filter((previous) => previous.until > now)
}

/**
 * What a retried rotation answers: 'replay' when the current secret is the one this key made (with
 * the same overlap), null when the key made none that is remembered (rotate); a 409 when it asked
 * for another overlap, or when a later rotation has replaced the secret it made.
 */
export function replayOf(
  endpoint: RotatedFields,
  key: string | null,
  overlapSeconds: number,
): 'replay' | null {
  if (key === null) return null
  if (endpoint.rotation?.key === key) {
    if (endpoint.rotation.overlapSeconds === overlapSeconds) return 'replay'
    throw new ApiError(
      409,
      'idempotency_key_reused',
      'this Idempotency-Key rotated the secret with another overlapSeconds',
    )
  }
  const replaced = [
    ...(endpoint.replacedKeys ?? []),
    ...(endpoint.previousSecrets ?? []).map((previous) => previous.key),
  ]
  if (replaced.includes(key))
    throw new ApiError(
      409,
      'idempotency_key_reused',
      'this Idempotency-Key rotated the secret, and a later rotation has replaced that secret',
    )
  return null
}

/**
 * The record after a rotation at `now`: `sealedNew` signs; the secret it replaces and the previous
 * secrets still signing sign until now + the overlap at the latest (each keeps an earlier end of its own).
 */
export function rotated<T extends RotatedFields>(
  endpoint: T,
  sealedNew: string,
  rotation: Rotation,
): T & Required<RotatedFields> {
  const until = rotation.at + rotation.overlapSeconds * 1000
  const replaced: PreviousSecret = {
    sealedSecret: endpoint.sealedSecret,
    until,
    key: endpoint.rotation?.key ?? null,
  }
  const previousSecrets = [replaced, ...signingPrevious(endpoint, rotation.at)]
    .map((previous) => ({ ...previous, until: Math.min(previous.until, until) }))
    .filter((previous) => previous.until > rotation.at)
    .slice(0, MAX_PREVIOUS_SECRETS)
  const replacedKey = endpoint.rotation?.key
  const replacedKeys = [...(replacedKey ? [replacedKey] : []), ...(endpoint.replacedKeys ?? [])].slice(
    0,
    MAX_REPLACED_KEYS,
  )
  return { ...endpoint, sealedSecret: sealedNew, rotation, previousSecrets, replacedKeys }
}
