// What every simulated upstream endpoint shares: Venice's JSON and error bodies, the Bearer key,
// and the preflight that counts the request, picks its fault and refuses it before any byte.
import { formatMicros } from '../money/units.ts'
import { FAULT_RESPONSES, isSimFault, type SimFault } from './faults.ts'
import type { SimKeyState, SimKeys } from './keys.ts'

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  })
}

export const veniceError = (status: number, error: string, headers: Record<string, string> = {}) =>
  json(status, { error }, headers)

function bearer(request: Request): string | null {
  const header = request.headers.get('authorization') ?? ''
  const match = /^Bearer\s+(\S+)$/i.exec(header)
  return match ? match[1]! : null
}

export function intHeader(request: Request, name: string): number | null {
  const raw = request.headers.get(name)
  if (raw === null || !/^\d+$/.test(raw)) return null
  return Number(raw)
}

export interface Admitted {
  key: SimKeyState
  fault: SimFault | null
  /** `x-venice-balance-diem`: the key's balance before this request. */
  balanceHeader: Record<string, string>
}

/** The key's state, or Venice's 401. Auth comes before the body is even read. */
export function authenticate(keys: SimKeys, request: Request): SimKeyState | Response {
  const apiKey = bearer(request)
  const state = apiKey ? keys.get(apiKey) : null
  return state && !state.revoked ? state : veniceError(401, 'Authentication failed')
}

/** For a valid request: count it, pick its fault, and refuse it before any byte if it must be. */
export function preflight(keys: SimKeys, key: SimKeyState, request: Request): Admitted | Response {
  key.requests += 1
  const balanceHeader = { 'x-venice-balance-diem': formatMicros(key.balanceMicroDiem) }
  const headerFault = request.headers.get('x-sim-fault')
  if (headerFault !== null && !isSimFault(headerFault)) return veniceError(400, 'unknown x-sim-fault')
  const fault = (headerFault as SimFault | null) ?? keys.takeFault(key)
  const beforeBytes = fault ? FAULT_RESPONSES[fault] : undefined
  if (beforeBytes) return veniceError(beforeBytes.status, beforeBytes.error, balanceHeader)
  if (key.balanceMicroDiem <= 0) return veniceError(402, FAULT_RESPONSES.out_of_balance!.error, balanceHeader)
  return { key, fault, balanceHeader }
}

/** Resolves true after `ms`, or false as soon as the client goes away. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const timer = Number.isFinite(ms) ? setTimeout(() => done(true), ms) : undefined
    const onAbort = () => done(false)
    function done(value: boolean) {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      resolve(value)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
