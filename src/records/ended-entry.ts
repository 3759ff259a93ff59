// An ended attempt's Stream entry (the account's activity and the market's `settled`, appended by
// lua/lib/attempts.lua end_attempt): one field, e, its values joined by ENDED_SEP in this order,
// the model last so that nothing it holds can shift another value. Entries written before the
// packing have a field per value; both read the same.
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

const ENDED_SEP = '\x1f'

/** The fields of a packed entry's value, by name. */
export function endedFields(packed: string): Record<string, string> {
  const row: Record<string, string> = {}
  let start = 0
  for (let i = 0; i < ENDED_FIELDS.length - 1; i++) {
    const end = packed.indexOf(ENDED_SEP, start)
    if (end < 0) break
    row[ENDED_FIELDS[i]!] = packed.slice(start, end)
    start = end + 1
  }
  row[ENDED_FIELDS[Object.keys(row).length]!] = packed.slice(start)
  return row
}
