// One POST of a signed event to an endpoint: the host re-resolved and checked public first (DNS
// may have moved since registration), no redirect followed (a 3xx is a failure), a short timeout,
// and at most RESPONSE_READ_LIMIT bytes of the answer read.
import { ApiError } from '../errors.ts'
import { type AddressPolicy, resolvePublicAddress } from './address-check.ts'

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

export async function postEvent(
  url: string,
  headers: Record<string, string>,
  body: string,
  policy: AddressPolicy,
  timeoutMs: number,
): Promise<PostOutcome> {
  try {
    await resolvePublicAddress(new URL(url), policy)
  } catch (error) {
    return {
      ok: false,
      httpStatus: null,
      error: error instanceof ApiError ? error.message : 'address check failed',
    }
  }
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
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
    const name = (error as Error).name
    return {
      ok: false,
      httpStatus: null,
      error: name === 'TimeoutError' ? `no answer in ${timeoutMs} ms` : 'connection failed',
    }
  }
}
