// The simulated supplier's key endpoints: Venice's balance endpoint (`GET /api_keys/rate_limits`,
// what the gateway checks a supplier's key against) and the control API that sets a key's
// balance, fault or revocation (`PUT /sim/keys/{key}`), which tests drive.
import { formatMicros, parseMicros } from '../money/units.ts'
import { isSimFault } from './faults.ts'
import { authenticate, json, veniceError } from './http.ts'
import type { SimKeyState, SimKeys } from './keys.ts'

/** Venice's answer for a key: its balances and rate limits; 401 for a key it does not accept. */
export function rateLimits(keys: SimKeys, request: Request): Response {
  const key = authenticate(keys, request)
  if (key instanceof Response) return key
  const balance = Number(formatMicros(key.balanceMicroDiem))
  return json(200, {
    data: {
      accessPermitted: true,
      apiTier: { id: 'paid', isCharged: true },
      balances: { DIEM: balance, USD: 0 },
      keyExpiration: null,
      nextEpochBegins: new Date(Date.now() + 86_400_000).toISOString(),
      rateLimits: [],
    },
  })
}

export async function control(keys: SimKeys, request: Request, url: URL): Promise<Response> {
  const match = /^\/sim\/keys\/([^/]+)$/.exec(url.pathname)
  if (!match) return veniceError(404, 'not found')
  const state = keys.get(decodeURIComponent(match[1]!))
  if (request.method === 'GET') return json(200, describeKey(state))
  if (request.method !== 'PUT') return veniceError(405, 'method not allowed')
  let body: { balanceDiem?: unknown; fault?: unknown; times?: unknown; revoked?: unknown }
  try {
    body = (await request.json()) as typeof body
  } catch {
    return veniceError(400, 'Invalid JSON body')
  }
  if (body.balanceDiem !== undefined) {
    const micros = typeof body.balanceDiem === 'string' ? parseMicros(body.balanceDiem) : null
    if (micros === null) return veniceError(400, 'balanceDiem must be a decimal string')
    state.balanceMicroDiem = micros
  }
  if (body.revoked !== undefined) {
    if (typeof body.revoked !== 'boolean') return veniceError(400, 'revoked must be a boolean')
    state.revoked = body.revoked
  }
  if (body.fault !== undefined) {
    if (body.fault !== null && !isSimFault(body.fault)) return veniceError(400, 'unknown fault')
    const times = body.times
    if (times !== undefined && !(typeof times === 'number' && Number.isInteger(times) && times > 0)) {
      return veniceError(400, 'times must be a positive integer')
    }
    state.fault = body.fault
    state.faultTimes = body.fault === null ? null : ((times as number | undefined) ?? null)
  }
  return json(200, describeKey(state))
}

function describeKey(state: SimKeyState) {
  return {
    balanceDiem: formatMicros(state.balanceMicroDiem),
    fault: state.fault,
    faultTimes: state.faultTimes,
    requests: state.requests,
    cancelledStreams: state.cancelledStreams,
    revoked: state.revoked,
  }
}
