// The signature a receiver checks, in the Standard Webhooks scheme: HMAC-SHA256 keyed with the
// endpoint's secret (its bytes: the base64 after "whsec_", as that scheme's libraries decode it)
// over "<id>.<timestamp>.<raw body>", base64, sent as "v1,<signature>" in svc-webhook-signature
// next to svc-webhook-id and svc-webhook-timestamp (Unix seconds). While a rotation's overlap
// lasts, one "v1,<signature>" per signing secret, space-separated, the current secret's first. The id lets the receiver drop a
// repeat (delivery is at least once); the timestamp lets it refuse an old replay (verify).
import { createHmac, timingSafeEqual } from 'node:crypto'

/** The HMAC key a "whsec_<base64>" secret stands for (Standard Webhooks): the decoded bytes. */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64')
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`
}

export function signedHeaders(secrets: string[], id: string, timestamp: number, body: string) {
  return {
    'content-type': 'application/json',
    'svc-webhook-id': id,
    'svc-webhook-timestamp': String(timestamp),
    'svc-webhook-signature': secrets.map((secret) => sign(secret, id, timestamp, body)).join(' '),
  }
}

/** How far a delivery's timestamp may be from the receiver's clock, either way (Standard Webhooks: 5 minutes). */
export const TOLERANCE_SECONDS = 5 * 60

/**
 * What a receiver runs: whether the headers sign this raw body under this secret (any one of their
 * signatures) and were stamped within TOLERANCE_SECONDS of `now` (ms), either way, as Standard
 * Webhooks' libraries refuse one: a delivery captured and sent again later is refused once that
 * window has passed, and the id (dedup) covers a repeat inside it. Each try is signed when it is
 * sent, so a retry hours after its event still verifies. A timestamp not in plain decimal digits
 * is refused.
 */
export function verify(
  secret: string,
  id: string,
  timestamp: string,
  body: string,
  signature: string,
  now = Date.now(),
): boolean {
  if (!/^\d{1,15}$/.test(timestamp)) return false
  const stamped = Number(timestamp)
  const seconds = Math.floor(now / 1000)
  if (seconds - stamped > TOLERANCE_SECONDS || stamped - seconds > TOLERANCE_SECONDS) return false
  const expected = Buffer.from(sign(secret, id, stamped, body))
  return signature.split(' ').some((part) => {
    const given = Buffer.from(part)
    return expected.length === given.length && timingSafeEqual(expected, given)
  })
}
