// An attempt's hash as one row of named fields, whichever its shape: packed (lua/lib/record.lua:
// `a`, its admission, and `e`, its end once it ended, each its values in the order below), or a
// field per value (attempts admitted before the packing, read the same way until their retention
// ends). Every reader of an attempt's hash reads it through here.
import { unpack } from './packed.ts'

/** The values of `a`, in order: the model last (packed.ts). */
export const ADMISSION_FIELDS = [
  'id',
  'accountId',
  'keyId',
  'offerId',
  'askCents',
  'holdUsdc',
  'holdDiem',
  'admittedAt',
  'requestId',
  'tried',
  'capGroup',
  'period',
  'model',
] as const

/** The values of `e`, in order. */
export const END_FIELDS = [
  'state',
  'endedAt',
  'costUsdc',
  'cost',
  'burn',
  'writtenOff',
  'disputed',
  'fee',
  'inputTokens',
  'outputTokens',
  'outcome',
  'estimated',
  'upstreamCost',
  'lateClear',
  'errorCode',
  'final',
] as const

/**
 * The attempt's fields by the names of its unpacked shape: a packed value that is empty is left
 * out, as that shape leaves out a field it has no value for; state is `admitted` until it ends.
 */
export function attemptFields(hash: Record<string, string>): Record<string, string> {
  if (hash.a === undefined) return hash
  const row: Record<string, string> = { state: 'admitted' }
  for (const [name, value] of Object.entries(unpack(hash.a, ADMISSION_FIELDS)))
    if (value !== '') row[name] = value
  if (hash.e !== undefined) {
    for (const [name, value] of Object.entries(unpack(hash.e, END_FIELDS)))
      if (value !== '') row[name] = value
  }
  return row
}
