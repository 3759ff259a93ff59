// Malformed requests derived from an OpenAPI operation's schemas: each required field missing,
// each field of a wrong JSON type, huge and odd strings, numbers JSON cannot carry exactly, deep
// nesting, bytes that are not UTF-8, unknown fields, wrong or missing content types, hostile path
// and query values. Each case says whether the schema itself refuses it (`invalid`): those must
// be 4xx; the rest may be served, but never with a 5xx.
import Ajv from 'ajv'

export type Schema = Record<string, unknown>
export interface Parameter {
  name: string
  in: 'path' | 'query' | 'header'
  required?: boolean
  schema: Schema
}
export interface Operation {
  method: string
  path: string
  tags: string[]
  security: Record<string, unknown>[]
  parameters: Parameter[]
  body?: Schema
}

export interface HostileCase {
  label: string
  /** The request target: path and query, sent as written (no dot segments removed). */
  target: string
  headers: Record<string, string>
  body?: Uint8Array
  /** The schema refuses it: a 4xx, in the error shape, with nothing changed. */
  invalid: boolean
}

/** The Bearer credential an operation's security asks for, of the tokens at hand (none when public). */
export function credentialOf(
  op: Operation,
  tokens: { admin: string; buyer: string; supplier: string },
): Record<string, string> {
  const schemes = new Set(op.security.flatMap((entry) => Object.keys(entry)))
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
  if (schemes.has('adminToken')) return bearer(tokens.admin)
  if (schemes.has('apiKey')) return bearer(tokens.buyer)
  if (schemes.has('supplierKey')) return bearer(tokens.supplier)
  return {}
}

/** Every operation of an OpenAPI document, flattened. */
export function operationsOf(document: {
  paths: Record<string, Record<string, Record<string, unknown>>>
}): Operation[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => {
      const content = (op.requestBody as { content?: Record<string, { schema: Schema }> } | undefined)
        ?.content
      return {
        method: method.toUpperCase(),
        path,
        tags: (op.tags as string[]) ?? [],
        security: (op.security as Record<string, unknown>[]) ?? [],
        parameters: (op.parameters as Parameter[]) ?? [],
        body: content?.['application/json']?.schema,
      }
    }),
  )
}

const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false })
const compiled = new WeakMap<Schema, (value: unknown) => boolean>()
/** Whether `value` passes `schema`, as a JSON Schema validator reads it. */
export function passes(schema: Schema, value: unknown): boolean {
  let check = compiled.get(schema)
  if (!check) {
    const validate = ajv.compile(schema)
    check = (v) => validate(v) as boolean
    compiled.set(schema, check)
  }
  return check(value)
}

const branches = (schema: Schema): Schema[] =>
  Array.isArray(schema.anyOf) ? (schema.anyOf as Schema[]).flatMap(branches) : [schema]

/** A value the schema takes, the plainest one: the first branch, the least number. */
export function sample(schema: Schema): unknown {
  const first = branches(schema).find((b) => b.type !== 'null') ?? branches(schema)[0]!
  if ('const' in first) return first.const
  if (Array.isArray(first.enum)) return first.enum[0]
  switch (first.type) {
    case 'string':
      return 'x'.repeat(Math.max(1, Number(first.minLength ?? 1)))
    case 'number':
    case 'integer':
      return Number(first.minimum ?? 1)
    case 'boolean':
      return true
    case 'null':
      return null
    case 'array':
      return [sample((first.items as Schema) ?? {})]
    case 'object': {
      const properties = (first.properties ?? {}) as Record<string, Schema>
      const required = (first.required ?? []) as string[]
      return Object.fromEntries(required.map((name) => [name, sample(properties[name] ?? {})]))
    }
    default:
      return 'x'
  }
}

type FieldPath = (string | number)[]
interface Field {
  path: FieldPath
  schema: Schema
}

/** Top-level properties, and the properties of a top-level array's object items. */
function fieldsOf(body: Schema): Field[] {
  const top = branches(body).find((b) => b.type === 'object')
  const fields: Field[] = []
  for (const [name, schema] of Object.entries((top?.properties ?? {}) as Record<string, Schema>)) {
    fields.push({ path: [name], schema })
    for (const branch of branches(schema)) {
      const items = branch.items as Schema | undefined
      if (branch.type !== 'array' || items?.type !== 'object') continue
      for (const [inner, innerSchema] of Object.entries((items.properties ?? {}) as Record<string, Schema>))
        fields.push({ path: [name, 0, inner], schema: innerSchema })
    }
  }
  return fields
}

const typesOf = (schema: Schema): Set<string> | null => {
  const types = new Set<string>()
  for (const branch of branches(schema)) {
    if (typeof branch.type !== 'string') return null // anything goes
    types.add(branch.type)
  }
  return types
}

function withField(base: unknown, path: FieldPath, value: unknown): unknown {
  const copy = structuredClone(base) as Record<string | number, unknown>
  let at = copy
  for (const key of path.slice(0, -1)) {
    if (at[key] === null || typeof at[key] !== 'object') at[key] = typeof key === 'number' ? [] : {}
    at = at[key] as Record<string | number, unknown>
  }
  const last = path.at(-1)!
  if (value === MISSING) delete at[last]
  else at[last] = value
  return copy
}
const MISSING = Symbol('missing')

const encoder = new TextEncoder()
const RAW = JSON.stringify('\u0000raw\u0000')
const joinBytes = (...parts: (string | Uint8Array)[]) => {
  const chunks = parts.map((p) => (typeof p === 'string' ? encoder.encode(p) : p))
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.length
  }
  return out
}

/** Nested arrays `depth` deep around a 1. */
export const nested = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`

const WRONG_TYPES: [string, unknown][] = [
  ['string', 'x'],
  ['number', 12.5],
  ['boolean', true],
  ['null', null],
  ['array', []],
  ['object', {}],
]
const ODD_STRINGS: [string, string][] = [
  ['a 1 MB string', 'a'.repeat(1024 * 1024)],
  ['a lone surrogate', '\ud800'],
  ['a NUL', 'a\u0000b'],
  ['"NaN"', 'NaN'],
  ['"1e400"', '1e400'],
  ['"-0"', '-0'],
  ['"2^63"', '9223372036854775808'],
  ['empty', ''],
]
// As JSON text: what each parses to is what the schema is asked about.
const ODD_NUMBERS = ['1e400', '-0', '9223372036854775808', '-9223372036854775809', '0.5']
// Bytes a UTF-8 decoder replaces, inside a string: bad bytes, and a surrogate as CESU-8 writes it.
const BAD_BYTES: [string, Uint8Array, string][] = [
  ['invalid UTF-8', new Uint8Array([0xff, 0xfe, 0xc3]), '\ufffd\ufffd\ufffd'],
  ['a CESU-8 lone surrogate', new Uint8Array([0xed, 0xa0, 0x80]), '\ufffd\ufffd\ufffd'],
]

/** Body cases of an operation with a JSON body; `base` is a body the route would take. */
export function bodyCases(body: Schema, base: unknown): Omit<HostileCase, 'target' | 'headers'>[] {
  const json = (label: string, value: unknown) => ({
    label,
    body: encoder.encode(JSON.stringify(value)),
    invalid: !passes(body, value),
  })
  const cases: (Omit<HostileCase, 'target' | 'headers'> & { contentType?: string })[] = []
  const top = branches(body).find((b) => b.type === 'object')
  for (const name of (top?.required ?? []) as string[])
    cases.push(json(`without ${name}`, withField(base, [name], MISSING)))
  for (const { path, schema } of fieldsOf(body)) {
    const at = path.join('.')
    const types = typesOf(schema)
    for (const [type, value] of WRONG_TYPES) {
      if (types && !types.has(type)) cases.push(json(`${at} as ${type}`, withField(base, path, value)))
    }
    if (!types || types.has('string')) {
      for (const [what, value] of ODD_STRINGS) cases.push(json(`${at} ${what}`, withField(base, path, value)))
      const [before, after] = JSON.stringify(withField(base, path, '\u0000raw\u0000')).split(RAW) as [
        string,
        string,
      ]
      for (const [what, bytes, decoded] of BAD_BYTES) {
        cases.push({
          label: `${at} with ${what}`,
          body: joinBytes(before, '"', bytes, '"', after),
          invalid: !passes(body, withField(base, path, decoded)),
        })
      }
    }
    if (!types || types.has('number') || types.has('integer')) {
      const [before, after] = JSON.stringify(withField(base, path, '\u0000raw\u0000')).split(RAW) as [
        string,
        string,
      ]
      for (const raw of ODD_NUMBERS) {
        const text = `${before}${raw}${after}`
        cases.push({
          label: `${at} = ${raw}`,
          body: encoder.encode(text),
          invalid: !passes(body, JSON.parse(text)),
        })
      }
      cases.push(json(`${at} "NaN"`, withField(base, path, 'NaN')))
    }
    const [before, after] = JSON.stringify(withField(base, path, '\u0000raw\u0000')).split(RAW) as [
      string,
      string,
    ]
    cases.push({
      label: `${at} 1000 arrays deep`,
      body: encoder.encode(`${before}${nested(1000)}${after}`),
      invalid: true,
    })
  }
  const baseText = JSON.stringify(base)
  const extra = withField(base, ['unknownField'], 1)
  cases.push(json('an unknown field', extra))
  cases.push({
    label: 'a 1000-deep unknown field',
    body: encoder.encode(`${baseText.slice(0, -1)}${baseText.length > 2 ? ',' : ''}"deep":${nested(1000)}}`),
    invalid: true,
  })
  for (const text of ['null', '[]', '"x"', '1', 'true', '[{}]'])
    cases.push({
      label: `the body ${text}`,
      body: encoder.encode(text),
      invalid: !passes(body, JSON.parse(text)),
    })
  for (const text of ['{', '{"a":}', '{"a":1,}', "{'a':1}", 'NaN', '\u0000'])
    cases.push({ label: `not JSON: ${JSON.stringify(text)}`, body: encoder.encode(text), invalid: true })
  cases.push({
    label: 'not UTF-8 outside a string',
    body: joinBytes('{', new Uint8Array([0xff]), '}'),
    invalid: true,
  })
  return cases
}

/** The same base body under content types a JSON route must refuse, and no body at all. */
export function contentTypeCases(body: Schema, base: unknown) {
  const text = encoder.encode(JSON.stringify(base))
  return [
    ...[
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      '',
    ].map((type) => ({
      label: `content-type ${JSON.stringify(type)}`,
      body: text,
      contentType: type,
      invalid: true,
    })),
    {
      label: 'an empty JSON body',
      body: new Uint8Array(),
      contentType: 'application/json',
      invalid: !passes(body, null),
    },
    { label: 'no body, no content-type', body: undefined, contentType: '', invalid: !passes(body, null) },
  ]
}

// Values for a path parameter, written as they go on the wire (percent-encoded where they must be).
export const HOSTILE_IDS: string[] = [
  '..',
  '%2e%2e',
  '..%2f..%2f..%2fetc%2fpasswd',
  '%00',
  'a%00b',
  '%ff%fe',
  '%ED%A0%80',
  '%',
  '%zz',
  '%2F',
  'x'.repeat(4096),
  '9'.repeat(400),
]

// Values for a query parameter, as written in the query string.
export const HOSTILE_QUERY_VALUES: string[] = [
  'abc',
  '',
  '-1',
  '0',
  '1e400',
  '1.5',
  '99999999999999999999',
  '%00',
  '%ff',
  '%zz',
  'x'.repeat(8192),
]

/** Whether a query value (decoded) fails its parameter's schema, read as strictly as a client reads it. */
export function queryValueInvalid(schema: Schema, value: string): boolean {
  if (schema.type === 'integer' || schema.type === 'number') {
    if (!/^-?\d+$/.test(value)) return true
    const n = Number(value)
    return (
      (schema.minimum !== undefined && n < Number(schema.minimum)) ||
      (schema.maximum !== undefined && n > Number(schema.maximum))
    )
  }
  if (Array.isArray(schema.enum)) return !schema.enum.includes(value)
  return !passes(schema, value)
}
