// An ended attempt's Stream entry (the account's activity and the market's `settled`, appended by
// lua/lib/attempts.lua end_attempt): one field, e, its values packed (packed.ts) in this order,
// the model last so that nothing it holds can shift another value. Entries written before the
// packing have a field per value; both read the same.
import { unpack } from './packed.ts'

export const ENDED_FIELDS = [
  'attempt',
  'account',
  'key',
  'status',
  'costUsdc',
  'askCents',
  'inputTokens',
  'outputTokens',
  'offer',
  'errorCode',
  'model',
] as const

/** The fields of a packed entry's value, by name. */
export const endedFields = (packed: string): Record<string, string> => unpack(packed, ENDED_FIELDS)
