// Event ids, as the receiver dedups and orders by them: `evt_<ms>-<seq>_<mark>`, the owner's stream
// entry id and the owner's mark. Apart from events.ts, which the pages' browser code imports too.
import { createHash } from 'node:crypto'
import type { Owner } from './events.ts'

/**
 * An owner's mark in its event ids: the first 16 hex digits of SHA-256 of the owner's name. Each
 * owner has its own stream, so two owners' entries can share a stream id; the mark keeps their
 * event ids apart (Standard Webhooks: an id names one message). Fixed length and hex, so an id
 * parses with one anchored pattern whatever an owner's name holds, and the owner's name is not
 * copied into every delivery.
 */
export const ownerMark = (owner: Owner) => createHash('sha256').update(owner).digest('hex').slice(0, 16)

/** A stream entry of the owner's as the event id the receiver dedups by: `evt_<ms>-<seq>_<mark>`. */
export const eventId = (owner: Owner, streamId: string) => `evt_${streamId}_${ownerMark(owner)}`

/** An event's fields in an endpoint's tries hash: the owner's own, so the stream id alone names it. */
export const triesField = (streamId: string) => `evt_${streamId}`

// Bounded as a Stream id Redis parses (the cursor of the lists, ACTIVITY_CURSOR): a longer one
// would reach XRANGE and fail there, a 500, where no such event is a 404.
const EVENT_ID = /^evt_(\d{1,15}-\d{1,19})(?:_([0-9a-f]{16}))?$/

/**
 * The stream id an event id names in the owner's stream, or null: malformed, or another owner's
 * mark. An id without a mark (`evt_<ms>-<seq>`, as delivery logs may still hold) names the entry
 * in the owner's own stream.
 */
export function streamIdOf(owner: Owner, id: string): string | null {
  const parts = EVENT_ID.exec(id)
  if (!parts) return null
  if (parts[2] !== undefined && parts[2] !== ownerMark(owner)) return null
  return parts[1] as string
}
