// Webhook endpoints must be public: a URL that resolves to loopback, a private, link-local,
// unique-local, multicast or unspecified address (v4, v6, and a v4 address a v6 one
// carries: mapped, translated, 6to4; Teredo's hidden one refused whole) is refused, at registration
// and again at each delivery, after DNS, so an endpoint cannot be pointed at the gateway's own network.
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { badRequest } from '../errors.ts'

export interface AddressPolicy {
  /** Test-only (SVC_WEBHOOK_ALLOW_LOOPBACK): loopback, and nothing else non-public, is allowed. */
  allowLoopback: boolean
  /** Every address a host name resolves to: DNS unless a test injects its own. */
  resolve?: (host: string) => Promise<string[]>
  /** How long resolving a name may take (the webhook timeout): past it the name does not resolve. */
  timeoutMs?: number
}

async function resolveByDns(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)
}

export const WEBHOOK_URL_MAX = 2048

function v4Parts(ip: string): number[] {
  return ip.split('.').map(Number)
}

function v4Kind(ip: string): 'loopback' | 'private' | 'public' {
  const [a, b] = v4Parts(ip) as [number, number]
  if (a === 127) return 'loopback'
  if (a === 0 || a === 10 || a >= 224) return 'private' // unspecified, private, multicast, reserved
  if (a === 169 && b === 254) return 'private' // link-local
  if (a === 172 && b >= 16 && b <= 31) return 'private'
  if (a === 192 && b === 168) return 'private'
  if (a === 100 && b >= 64 && b <= 127) return 'private' // carrier-grade NAT
  if (a === 198 && (b === 18 || b === 19)) return 'private' // benchmarking
  if (a === 192 && b === 0 && v4Parts(ip)[2] === 0) return 'private' // protocol assignments (192.0.0.192 serves some clouds' metadata)
  return 'public'
}

// The address expanded to eight 16-bit groups (a trailing dotted v4 becomes two groups).
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase().split('%')[0] as string
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = v4Parts(dotted[1] as string) as [number, number, number, number]
    text = `${text.slice(0, -dotted[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.split('::') as [string, string | undefined]
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const fill = tail === undefined ? [] : Array(8 - left.length - right.length).fill('0')
  return [...left, ...fill, ...right].map((group) => Number.parseInt(group, 16))
}

/** The v4 address two 16-bit groups carry. */
const v4Of = (high: number, low: number) =>
  [(high >> 8) & 255, high & 255, (low >> 8) & 255, low & 255].join('.')

function v6Kind(ip: string): 'loopback' | 'private' | 'public' {
  const g = v6Groups(ip)
  const first = g[0] as number
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    // v4-mapped (::ffff:a.b.c.d) and v4-compatible (::a.b.c.d): judged as the v4 address,
    // except :: (unspecified) and ::1 (loopback).
    if (g[5] === 0 && g[6] === 0) return g[7] === 1 ? 'loopback' : 'private'
    return v4Kind(v4Of(g[6]!, g[7]!))
  }
  // v4-translated (::ffff:0:a.b.c.d) and 6to4 (2002:aabb:ccdd::/48) carry a v4 address: judged as it.
  if (g.slice(0, 4).every((x) => x === 0) && g[4] === 0xffff && g[5] === 0) return v4Kind(v4Of(g[6]!, g[7]!))
  if (first === 0x2002) return v4Kind(v4Of(g[1]!, g[2]!))
  // Teredo (2001:0::/32) hides its v4 address: refused whole.
  if (first === 0x2001 && g[1] === 0) return 'private'
  if ((first & 0xfe00) === 0xfc00) return 'private' // unique-local fc00::/7
  if ((first & 0xffc0) === 0xfe80) return 'private' // link-local fe80::/10
  if ((first & 0xffc0) === 0xfec0) return 'private' // site-local (deprecated)
  if ((first & 0xff00) === 0xff00) return 'private' // multicast
  if (first === 0x2001 && g[1] === 0xdb8) return 'private' // documentation
  if (first === 0x64 && g[1] === 0xff9b) return 'private' // NAT64 may reach v4 private space
  return 'public'
}

/** Whether a delivery may connect to this resolved address. */
export function addressAllowed(ip: string, policy: AddressPolicy): boolean {
  const family = isIP(ip)
  if (family === 0) return false
  const kind = family === 4 ? v4Kind(ip) : v6Kind(ip)
  return kind === 'public' || (kind === 'loopback' && policy.allowLoopback)
}

/** Parses an endpoint URL (http or https, no credentials): 400 otherwise. */
export function parseWebhookUrl(text: string): URL {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw badRequest('url must be an absolute http(s) URL', 'invalid_webhook_url')
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw badRequest('url must use https or http', 'invalid_webhook_url')
  if (url.username || url.password) throw badRequest('url must not carry credentials', 'invalid_webhook_url')
  return url
}

/** The resolution, or a rejection once the deadline passes: a name server that never answers holds nothing. */
function resolveBy(
  host: string,
  policy: AddressPolicy,
  deadline: AbortSignal | undefined,
): Promise<string[]> {
  const resolution = (policy.resolve ?? resolveByDns)(host)
  if (!deadline) return resolution
  return new Promise((resolve, reject) => {
    const abort = () => reject(deadline.reason)
    resolution.then(resolve, reject).finally(() => deadline.removeEventListener('abort', abort))
    if (deadline.aborted) abort()
    else deadline.addEventListener('abort', abort, { once: true })
  })
}

/**
 * Resolves the URL's host (every address DNS gives) and answers them all, in the resolver's order,
 * or throws a 400 when any address is not public: a name that resolves partly private is refused
 * whole. A delivery connects only to the addresses answered, never resolving again (no
 * DNS-rebinding window). The resolution ends by `deadline` (a delivery's, so the whole try keeps
 * to its timeout), else by the policy's timeoutMs.
 */
export async function resolvePublicAddresses(
  url: URL,
  policy: AddressPolicy,
  deadline = policy.timeoutMs === undefined ? undefined : AbortSignal.timeout(policy.timeoutMs),
): Promise<string[]> {
  const host = url.hostname.replace(/^\[|\]$/g, '')
  let addresses: string[]
  if (isIP(host)) addresses = [host]
  else {
    try {
      addresses = await resolveBy(host, policy, deadline)
    } catch {
      const why = deadline?.aborted ? 'did not resolve in time' : 'does not resolve'
      throw badRequest(`url host ${host} ${why}`, 'invalid_webhook_url')
    }
  }
  if (addresses.length === 0 || !addresses.every((ip) => addressAllowed(ip, policy)))
    throw badRequest(
      'url must resolve to public addresses only (no loopback, private, link-local, unique-local, multicast or unspecified)',
      'webhook_url_not_public',
    )
  return addresses
}

/** The first of resolvePublicAddresses' answer: a registration's check. */
export async function resolvePublicAddress(
  url: URL,
  policy: AddressPolicy,
  deadline?: AbortSignal,
): Promise<string> {
  return (await resolvePublicAddresses(url, policy, deadline)).at(0) as string
}
