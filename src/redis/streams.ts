// Reading a whole Stream for a check (the audit): every entry's fields in order, a page at a time,
// and whether the Stream still holds every entry it was ever given (nothing trimmed yet).
import type { Store } from './store.ts'

const PAGE = 1000

/** Calls `visit` with each entry's flat name, value list and its id, oldest first, up to `end`. */
export async function forEachEntry(
  store: Store,
  stream: string,
  visit: (flat: string[], id: string) => void | Promise<void>,
  end = '+',
): Promise<void> {
  let start = '-'
  for (;;) {
    const entries = (await store.xrange(stream, start, end, 'COUNT', PAGE)) as [string, string[]][]
    for (const [id, flat] of entries) await visit(flat, id)
    if (entries.length < PAGE) return
    start = `(${entries.at(-1)![0]}`
  }
}

/** True while the Stream holds every entry added to it (XINFO's entries-added = length), or does not exist. */
export async function holdsEveryEntry(store: Store, stream: string): Promise<boolean> {
  if ((await store.exists(stream)) === 0) return true
  const info = (await store.xinfo('STREAM', stream)) as unknown[]
  const field = (name: string) => Number(info[info.indexOf(name) + 1])
  return field('entries-added') === field('length')
}

/** A numeric field summed over a Stream's entries, and whether the Stream holds every entry it was given. */
export async function sumOfField(store: Store, stream: string, field: string) {
  let sum = 0
  await forEachEntry(store, stream, (flat) => {
    for (let i = 0; i + 1 < flat.length; i += 2) if (flat[i] === field) sum += Number(flat[i + 1])
  })
  return { sum, complete: await holdsEveryEntry(store, stream) }
}
