// Values the scripts pack into one Redis field (an ended attempt's Stream entry, an attempt's
// record): joined by one separator that no value the gateway makes holds, the one value that may
// hold anything (a model) last.
export const PACK_SEP = '\x1f'

/**
 * The values of `packed` by `names`, in their order; the last takes the rest, separators and all.
 * A value a shorter pack lacks is left out.
 */
export function unpack(packed: string, names: readonly string[]): Record<string, string> {
  const row: Record<string, string> = {}
  let start = 0
  let i = 0
  for (; i < names.length - 1; i++) {
    const end = packed.indexOf(PACK_SEP, start)
    if (end < 0) break
    row[names[i]!] = packed.slice(start, end)
    start = end + 1
  }
  row[names[i]!] = packed.slice(start)
  return row
}
