// What a client or a supplier sent is read field by field, each checked before use: a JSON value is
// an object to read fields of only when this says so (never null, never an array).
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * A client's value as a refusal names it. A template literal would call the value's own toString,
 * and JSON gives objects whose `toString` is no function (`{"toString": 1}`): a TypeError, a 500.
 */
export function shown(value: unknown): string {
  if (typeof value === 'string') return value
  return JSON.stringify(value) ?? String(value)
}
