// GET /openapi.json: OpenAPI 3.1, generated from the app's own routes by @elysiajs/openapi, so
// the request bodies and path parameters are the TypeBox schemas the routes validate with. The
// operations table (operations.ts) adds summaries, security and the error responses.
import { toOpenAPISchema } from '@elysiajs/openapi'
import type { AnyElysia } from 'elysia'
import pkg from '../../../package.json' with { type: 'json' }
import { COMPONENTS } from './components.ts'
import { OPERATIONS, operationFields } from './operations.ts'

export const OPENAPI_VERSION = '3.1.1'

type Operation = Record<string, unknown> & { parameters?: Parameter[]; requestBody?: RequestBody }
type Parameter = { name: string; in: string }
type RequestBody = { content: Record<string, unknown>; required?: boolean }

/** A route's path as OpenAPI writes it: no trailing slash, `:id` and `*` as `{id}`. */
export function openApiPath(path: string, wildcardName = 'id'): string {
  const trimmed = path.length > 1 ? path.replace(/\/$/, '') : path
  return trimmed.replace(/:([^/]+)/g, '{$1}').replace(/\*$/, `{${wildcardName}}`)
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options']

// TypeBox schemas are JSON Schema; a JSON round trip drops TypeBox's symbol keys.
const plain = (schema: unknown) => JSON.parse(JSON.stringify(schema)) as Record<string, unknown>

function mergeParameters(generated: Parameter[] = [], declared: Parameter[] = []): Parameter[] {
  const key = (p: Parameter) => `${p.in} ${p.name}`
  const declaredKeys = new Set(declared.map(key))
  return [...generated.filter((p) => !declaredKeys.has(key(p))), ...declared]
}

/** The whole document but its servers, which name the address each caller reached. */
export function openApiDocument(app: AnyElysia) {
  // OPTIONS too (the generator leaves it out by default): /mcp answers it, 405.
  const generated = toOpenAPISchema(
    app,
    { staticFile: false, methods: [] },
    undefined,
    undefined,
    OPENAPI_VERSION,
  )
  const bodies = new Map<string, unknown>()
  for (const route of app.routes) {
    const body = (route.hooks as { body?: unknown } | undefined)?.body
    if (body && typeof body === 'object') bodies.set(`${route.method} ${openApiPath(route.path)}`, body)
  }
  const paths: Record<string, Record<string, Operation>> = {}
  for (const [rawPath, item] of Object.entries(generated.paths ?? {})) {
    const path = openApiPath(rawPath)
    for (const [method, value] of Object.entries(item ?? {})) {
      if (!METHODS.includes(method)) continue
      const key = `${method.toUpperCase()} ${path}`
      const generatedOp = value as Operation
      const documented = OPERATIONS[key]
      const op: Operation = { ...generatedOp, ...(documented ? operationFields(documented) : {}) }
      const parameters = mergeParameters(generatedOp.parameters, documented?.parameters as Parameter[])
      if (parameters.length > 0) op.parameters = parameters
      // Auth macros parse the body themselves, so the generator leaves the content empty.
      const body = bodies.get(key)
      if (body) op.requestBody = { required: true, content: { 'application/json': { schema: plain(body) } } }
      else delete op.requestBody
      paths[path] = { ...paths[path], [method]: op }
    }
  }
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'svc gateway',
      version: pkg.version,
      description:
        'A prepaid, OpenAI-compatible inference marketplace: fund a USDC balance by x402, call chat, responses or the Anthropic messages API with an svc_ key, and each request clears at the cheapest eligible offer at or below your max price. Errors: {"error": {"message", "type", "code"}} (under /v1/messages, the Anthropic shape {"type": "error", "error": {...}}). A guide for agents: /llms.txt.',
    },
    tags: [
      { name: 'public', description: 'No key needed' },
      { name: 'inference', description: 'Paid from the confirmed balance' },
      { name: 'agent', description: 'Self-service with a Bearer key' },
      { name: 'funding', description: 'x402 payments' },
      { name: 'mcp', description: 'The hosted MCP server' },
      { name: 'operator', description: 'The operator API (admin token)' },
      { name: 'contract', description: 'Machine-readable contract' },
      { name: 'operations', description: 'Health' },
    ],
    paths,
    components: {
      ...plain(COMPONENTS),
      schemas: { ...generated.components?.schemas, ...plain(COMPONENTS.schemas) },
    },
  }
}
