// One POST of a signed event to an endpoint: the host re-resolved and checked public first (DNS
// may have moved since registration), then the connection made to an address checked (of
// several, the first to answer a connection, attempts started in turn by family a short delay
// apart: connect-race.ts; the next only when one never opened), not to a second resolution of the
// name (which DNS could point elsewhere meanwhile): the URL's host rides in the Host header and,
// for https, in TLS SNI with the certificate verified for that name. No redirect followed (a 3xx
// is a failure), a short timeout (resolution, connection and answer together), at most
// RESPONSE_READ_LIMIT bytes read.
import { isIP } from 'node:net'
import { ApiError } from '../errors.ts'
import { type AddressPolicy, resolvePublicAddresses } from './address-check.ts'
import { interleaved } from './address-order.ts'
import { firstToConnect } from './connect-race.ts'

export const RESPONSE_READ_LIMIT = 4096

export interface PostOutcome {
  ok: boolean
  httpStatus: number | null
  error: string | null
}

async function readBounded(response: Response): Promise<void> {
  const reader = response.body?.getReader()
  if (!reader) return
  let read = 0
  while (read < RESPONSE_READ_LIMIT) {
    const chunk = await reader.read()
    if (chunk.done) return
    read += chunk.value.byteLength
  }
  await reader.cancel()
}

// Bun's fetch codes for a connection that never opened: no byte of the request left.
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL'])

/** The POST to one checked address; `connectFailed` when the connection never opened. */
async function postTo(
  target: URL,
  address: string,
  headers: Record<string, string>,
  body: string,
  deadline: AbortSignal,
  timeoutMs: number,
): Promise<PostOutcome & { connectFailed?: boolean }> {
  try {
    const connect = new URL(target)
    connect.hostname = isIP(address) === 6 ? `[${address}]` : address
    // A name's certificate is checked against the name; an IP literal URL is checked as itself.
    const name = target.hostname.replace(/^\[|\]$/g, '')
    const tls = target.protocol === 'https:' && !isIP(name) ? { tls: { serverName: name } } : {}
    const response = await fetch(connect, {
      method: 'POST',
      headers: { ...headers, host: target.host },
      body,
      ...tls,
      redirect: 'manual',
      signal: deadline,
    })
    await readBounded(response).catch(() => {})
    const ok = response.status >= 200 && response.status < 300
    const error = ok
      ? null
      : response.status >= 300 && response.status < 400
        ? 'redirect not followed'
        : `answered ${response.status}`
    return { ok, httpStatus: response.status, error }
  } catch (error) {
    const { name, code } = error as Error & { code?: string }
    if (name === 'TimeoutError') return timedOut(timeoutMs)
    return { ...CONNECTION_FAILED, connectFailed: NEVER_CONNECTED.has(code ?? '') }
  }
}

const CONNECTION_FAILED: PostOutcome = { ok: false, httpStatus: null, error: 'connection failed' }
const timedOut = (timeoutMs: number): PostOutcome => ({
  ok: false,
  httpStatus: null,
  error: `no answer in ${timeoutMs} ms`,
})

export async function postEvent(
  url: string,
  headers: Record<string, string>,
  body: string,
  policy: AddressPolicy,
  timeoutMs: number,
): Promise<PostOutcome> {
  const target = new URL(url)
  // One deadline for the whole try, the name's resolution included: a consumer's claim of an
  // event waits on it (consumer.ts), and a name server that never answers must not outlast it.
  const deadline = AbortSignal.timeout(timeoutMs)
  let candidates: string[]
  try {
    candidates = interleaved(await resolvePublicAddresses(target, policy, deadline))
  } catch (error) {
    return {
      ok: false,
      httpStatus: null,
      error: error instanceof ApiError ? error.message : 'address check failed',
    }
  }
  const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80)
  let outcome: PostOutcome = CONNECTION_FAILED
  let left = candidates
  while (left.length > 0) {
    // Of several, the one that answers a connection first: a silent one costs a short delay.
    const address = left.length === 1 ? left[0] : await firstToConnect(left, port, deadline)
    if (!address) return deadline.aborted ? timedOut(timeoutMs) : outcome
    const { connectFailed, ...tried } = await postTo(target, address, headers, body, deadline, timeoutMs)
    outcome = tried
    // Only a connection that never opened moves on to the next address: a request sent is never
    // sent again.
    if (!connectFailed) return outcome
    left = left.filter((other) => other !== address)
  }
  return outcome
}
