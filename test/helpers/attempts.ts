// An attempt's record as the tests read it: its hash in either shape, by field name
// (src/records/attempt-fields.ts), as the gateway's own readers see it.
import { ADMISSION_FIELDS, attemptFields, END_FIELDS } from '../../src/records/attempt-fields.ts'
import { PACK_SEP, unpack } from '../../src/records/packed.ts'
import type { Commands } from '../../src/redis/store.ts'

/** The attempt at `key` by field name ({} when there is none). */
export async function attemptRecord(store: Commands, key: string): Promise<Record<string, string>> {
  return attemptFields(await store.hgetall(key))
}

/** Sets one value of a packed attempt's record by its field name, as a tampering hand would. */
export async function setAttemptValue(store: Commands, key: string, name: string, value: string) {
  const packed = (await store.hget(key, 'e')) === null ? 'a' : 'e'
  const names: readonly string[] = packed === 'a' ? ADMISSION_FIELDS : END_FIELDS
  if (!names.includes(name)) throw new Error(`${name} is not a value of the attempt's ${packed}`)
  const row = unpack((await store.hget(key, packed)) ?? '', names)
  row[name] = value
  await store.hset(key, packed, names.map((n) => row[n] ?? '').join(PACK_SEP))
}
