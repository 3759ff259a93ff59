// The signature a receiver checks, in the Standard Webhooks scheme: HMAC-SHA256 keyed with the
// endpoint's secret (its bytes: the base64 after "whsec_", as that scheme's libraries decode it)
// over "<id>.<timestamp>.<raw body>", base64, sent as "v1,<signature>" in svc-webhook-signature
// next to svc-webhook-id and svc-webhook-timestamp (Unix seconds). While a rotation's overlap
// lasts, one "v1,<signature>" per signing secret, space-separated, the current secret's first. The id lets the receiver drop a
// repeat (delivery is at least once); the timestamp lets it refuse an old replay.
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

/** What a receiver runs: whether the headers sign this raw body under this secret (any one of their signatures). */
export function verify(
  secret: string,
  id: string,
  timestamp: string,
  body: string,
  signature: string,
): boolean {
  const expected = Buffer.from(sign(secret, id, Number(timestamp), body))
  return signature.split(' ').some((part) => {
    const given = Buffer.from(part)
    return expected.length === given.length && timingSafeEqual(expected, given)
  })
}
