// What a client or a supplier sent is read field by field, each checked before use: a JSON value is
// an object to read fields of only when this says so (never null, never an array).
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
