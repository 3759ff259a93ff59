// Where a supplier URL points: its origin (the key of the idle pool, the socket's address, the
// Host header) and its request target, each parsed once.

export interface Origin {
  key: string
  hostname: string
  port: number
  tls: boolean
  /** The Host header. */
  host: string
}

const origins = new Map<string, Origin>()

function originOf(url: URL): Origin {
  const key = `${url.protocol}//${url.host}`
  let origin = origins.get(key)
  if (!origin) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`not an HTTP URL: ${key}`)
    const tls = url.protocol === 'https:'
    origin = {
      key,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port || (tls ? 443 : 80)),
      tls,
      host: url.host,
    }
    origins.set(key, origin)
  }
  return origin
}

/** A URL's origin and request target, parsed once per distinct URL (suppliers use a handful). */
const targets = new Map<string, { origin: Origin; target: string }>()
const MAX_TARGETS = 1024

export function targetOf(url: string): { origin: Origin; target: string } {
  let found = targets.get(url)
  if (!found) {
    const parsed = new URL(url)
    found = { origin: originOf(parsed), target: `${parsed.pathname}${parsed.search}` }
    if (targets.size >= MAX_TARGETS) targets.clear()
    targets.set(url, found)
  }
  return found
}
