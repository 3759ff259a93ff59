// A supplier's upstream key stands in an offer only once the operator's upstream accepts it: its
// balance endpoint (Venice: GET /api_keys/rate_limits with the key as Bearer, answering
// {data: {balances: {DIEM, USD}}}) must answer 200 with balances. The read is bounded in time and
// size, and nothing the upstream says reaches the client: a refusal is upstream_key_rejected.
// The key's DIEM balance it tells is returned, as the offer's balance known for the day; one told
// oddly (not a finite non-negative amount) still vouches for the key, and is no balance (counted:
// svc_upstream_balances_unread_total).
import { ApiError } from '../errors.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import { type MicroDiem, parseDiemBalance } from '../money/units.ts'
import { UpstreamBodyTooLarge, upstreamRequest } from '../upstream/client.ts'
import { upstreamKeyRejected } from './results.ts'

export const BALANCE_PATH = '/api_keys/rate_limits'
const TIMEOUT_MS = 10_000
const MAX_BYTES = 64 * 1024

const unavailable = () =>
  new ApiError(503, 'upstream_unavailable', 'the upstream could not be reached to check the key; try again')

export async function checkUpstreamKey(
  upstreamUrl: string,
  apiKey: string,
  timeoutMs = TIMEOUT_MS,
): Promise<MicroDiem | null> {
  let body: unknown
  try {
    const response = await upstreamRequest(`${upstreamUrl}${BALANCE_PATH}`, {
      method: 'GET',
      headers: { authorization: `Bearer ${apiKey}`, accept: 'application/json' },
      deadline: { ms: timeoutMs, until: 'end' },
      maxBodyBytes: MAX_BYTES,
    })
    const status = response.status
    if (status !== 200) {
      response.cancel()
      // The upstream's own words stay here: 4xx is the key, anything else is the upstream.
      if (status >= 400 && status < 500) throw upstreamKeyRejected()
      throw unavailable()
    }
    body = await response.json()
  } catch (error) {
    if (error instanceof ApiError) throw error
    // A 200 that is not a balance answer (not JSON, or past the cap) does not vouch for the key.
    if (error instanceof SyntaxError || error instanceof UpstreamBodyTooLarge) throw upstreamKeyRejected()
    throw unavailable()
  }
  const balances = (body as { data?: { balances?: Record<string, unknown> } } | null)?.data?.balances
  if (!balances || typeof balances !== 'object') throw upstreamKeyRejected()
  if (balances.DIEM === undefined) return null
  const balance = parseDiemBalance(balances.DIEM)
  if (balance === null) metrics.unreadBalances.inc({ where: 'key_check' })
  return balance
}
