// A value that fits a JSON schema, for the simulated supplier's structured output and tool-call
// arguments: every property is filled (strict schemas require them all), the first choice of an
// enum or a union is taken, and `$ref` is followed within the schema. Deterministic, so tests can
// check what a client parsed.

type Schema = Record<string, unknown>

const MAX_DEPTH = 8

function resolve(ref: string, root: Schema): Schema {
  // Only local references ('#/$defs/Name', '#/definitions/Name', '#'): a supplier sees no other.
  if (!ref.startsWith('#')) return {}
  let node: unknown = root
  for (const part of ref.slice(1).split('/').filter(Boolean)) {
    node = (node as Record<string, unknown> | undefined)?.[part.replaceAll('~1', '/').replaceAll('~0', '~')]
  }
  return node && typeof node === 'object' ? (node as Schema) : {}
}

function stringFor(schema: Schema): string {
  const format = schema.format
  if (format === 'date-time') return '2026-01-01T00:00:00Z'
  if (format === 'date') return '2026-01-01'
  if (format === 'email') return 'buyer@example.com'
  if (format === 'uri' || format === 'url') return 'https://example.com'
  if (format === 'uuid') return '00000000-0000-4000-8000-000000000000'
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0
  return 'market'.padEnd(min, 's')
}

function numberFor(schema: Schema, integer: boolean): number {
  const low = typeof schema.minimum === 'number' ? schema.minimum : null
  const exclusiveLow = typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum : null
  const high = typeof schema.maximum === 'number' ? schema.maximum : null
  let value = 1
  if (low !== null && value < low) value = low
  if (exclusiveLow !== null && value <= exclusiveLow) value = exclusiveLow + 1
  if (high !== null && value > high) value = high
  return integer ? Math.ceil(value) : value
}

export function schemaValue(schema: unknown, root: Schema = schema as Schema, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > MAX_DEPTH) return null
  const s = schema as Schema
  if (typeof s.$ref === 'string') return schemaValue(resolve(s.$ref, root), root, depth + 1)
  if ('const' in s) return s.const
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0]
  for (const union of ['anyOf', 'oneOf'] as const) {
    const options = s[union]
    if (Array.isArray(options) && options.length > 0) {
      // A nullable field is given its value, not its null.
      const chosen = options.find((o) => (o as Schema)?.type !== 'null') ?? options[0]
      return schemaValue(chosen, root, depth + 1)
    }
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0) {
    return schemaValue(Object.assign({}, ...(s.allOf as Schema[])), root, depth + 1)
  }
  let type = s.type
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? type[0]
  if (type === undefined && s.properties) type = 'object'
  switch (type) {
    case 'object': {
      const value: Record<string, unknown> = {}
      const properties = (s.properties ?? {}) as Record<string, unknown>
      for (const [name, property] of Object.entries(properties)) {
        value[name] = schemaValue(property, root, depth + 1)
      }
      return value
    }
    case 'array': {
      const count = Math.max(typeof s.minItems === 'number' ? s.minItems : 1, 1)
      const items = Array.isArray(s.prefixItems) ? s.prefixItems : null
      if (items) return items.map((item) => schemaValue(item, root, depth + 1))
      return Array.from({ length: Math.min(count, 8) }, () => schemaValue(s.items, root, depth + 1))
    }
    case 'string':
      return stringFor(s)
    case 'integer':
      return numberFor(s, true)
    case 'number':
      return numberFor(s, false)
    case 'boolean':
      return true
    case 'null':
      return null
    default:
      return 'market'
  }
}
