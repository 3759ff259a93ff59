// The hosted MCP server at /mcp (the contract's {mcp_url}): streamable HTTP, stateless, behind the
// same Bearer key as /v1/agent, or a supplier's `sup_` key, which is offered the supplier tools
// instead (src/mcp/supplier-tools.ts). Each POST gets its own server and transport, so any replica
// can answer any request; tools call the app itself with the caller's key (src/mcp/tools.ts).
import { Elysia } from 'elysia'
import { ApiError } from '../../errors.ts'
import type { Dispatch } from '../../mcp/server.ts'
import { SUPPLIER_INSTRUCTIONS, SUPPLIER_TOOLS } from '../../mcp/supplier-tools.ts'
import { TOOLS, type Tool } from '../../mcp/tools.ts'
import { type AuthDeps, buyerAuthenticator, callerMacro } from '../auth.ts'
import { supplierAuthenticator } from '../supplier/auth.ts'

export const MCP_PATH = '/mcp'

/** What the MCP route needs of the app it is mounted in: its routes, and a way to call them. */
export interface AppHandle {
  handle(request: Request): Promise<Response>
  readonly routes: readonly { method: string; path: string }[]
}

// Prefixed plugins register '/v1/models/' for '/v1/models'; parameter names do not matter.
const routeKey = (method: string, path: string) =>
  `${method} ${path.replace(/:[^/]+/g, ':').replace(/(.)\/$/, '$1')}`

type Role = 'buyer' | 'supplier'

/** A supplier key opens the supplier tools, a buyer key the buyer's: never both. */
const isSupplierKey = (request: Request) =>
  /^Bearer[ ]+sup_/i.test(request.headers.get('authorization') ?? '')

export interface McpDeps extends AuthDeps {
  /** The gateway's own public URL (SVC_PUBLIC_URL): the one Origin a browser page may send. */
  publicUrl: string
}

/**
 * An Origin header, when sent, must be the gateway's own, as the MCP transport requires: a page on
 * another site that reaches the gateway by DNS rebinding (its name resolving to a gateway on a
 * private address) is refused 403 before its key is read. Clients that are not browsers send none.
 */
function originCheck(publicUrl: string) {
  const own = new URL(publicUrl).origin
  return (request: Request) => {
    const origin = request.headers.get('origin')
    if (origin !== null && origin !== own) {
      throw new ApiError(403, 'origin_not_allowed', `requests from a browser page are taken only from ${own}`)
    }
  }
}

/**
 * Either kind of key, each checked as its own routes check it; the role says which tools it gets.
 * The Origin is checked first.
 */
function mcpAuth(deps: McpDeps) {
  const buyer = buyerAuthenticator(deps)
  const supplier = supplierAuthenticator(deps)
  const checkOrigin = originCheck(deps.publicUrl)
  const role = async (request: Request): Promise<Role> => {
    checkOrigin(request)
    if (isSupplierKey(request)) {
      await supplier(request)
      return 'supplier'
    }
    await buyer(request)
    return 'buyer'
  }
  return new Elysia({ name: 'svc/mcp-auth', seed: deps.keys.prefix }).macro(
    'caller',
    callerMacro('role', role),
  )
}

/** The role's tools whose routes the app serves (a route still being built leaves its tool out). */
function offeredTools(app: AppHandle, role: Role): Tool[] {
  const served = new Set(app.routes.map((route) => routeKey(route.method, route.path)))
  return (role === 'supplier' ? SUPPLIER_TOOLS : TOOLS).filter((tool) => {
    const [method, path] = tool.route.split(' ') as [string, string]
    return served.has(routeKey(method, path))
  })
}

function dispatcher(app: AppHandle, request: Request): Dispatch {
  const origin = new URL(request.url).origin
  // The key the caller was let in with, as a Bearer token or Anthropic's `x-api-key` (auth checked
  // both name one key), is the one each tool's route reads.
  const apiKey = request.headers.get('x-api-key')?.trim()
  const authorization = request.headers.get('authorization') ?? (apiKey ? `Bearer ${apiKey}` : '')
  return (call, signal) =>
    app.handle(
      new Request(`${origin}${call.path}`, {
        method: call.method,
        headers: {
          ...call.headers,
          authorization,
          ...(call.body ? { 'content-type': 'application/json' } : {}),
        },
        ...(call.body ? { body: JSON.stringify(call.body) } : {}),
        // Cancelled by the MCP request, or ended with the caller's connection: a chat no one waits
        // for is released as a REST call whose client leaves is.
        signal: AbortSignal.any([signal, request.signal]),
      }),
    )
}

// The MCP SDK (with its schema libraries) is loaded by the first MCP request, not with the app:
// most processes never serve one, and loading it costs more CPU than the rest of the routes.
let sdk:
  | Promise<
      [
        typeof import('../../mcp/server.ts'),
        typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
      ]
    >
  | undefined
const loadSdk = () => {
  sdk ??= Promise.all([
    import('../../mcp/server.ts'),
    import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
  ])
  return sdk
}

const notAllowed = () => {
  throw new ApiError(405, 'method_not_allowed', 'this MCP server is stateless: send JSON-RPC with POST', {
    headers: { allow: 'POST' },
  })
}

/** JSON-RPC's Invalid Request (-32600), as the transport answers a message it cannot take: a 400. */
const invalidRequest = (problem: string) =>
  Response.json(
    { jsonrpc: '2.0', error: { code: -32600, message: `Invalid Request: ${problem}` }, id: null },
    { status: 400 },
  )

/** Mounted last, with the app itself: `.use((app) => app.use(mcpRoutes(deps, app)))`. */
export function mcpRoutes(deps: McpDeps, app: AppHandle) {
  return new Elysia({ name: 'svc/mcp', seed: deps.keys.prefix })
    .use(mcpAuth(deps))
    .post(
      MCP_PATH,
      async ({ request, body, role }) => {
        const [{ bodyProblem, mcpServer }, { WebStandardStreamableHTTPServerTransport }] = await loadSdk()
        // Refused before any server is made: nothing of it runs.
        const problem = bodyProblem(body, request.headers.get('mcp-protocol-version'))
        if (problem) return invalidRequest(problem)
        const server = mcpServer(
          offeredTools(app, role),
          dispatcher(app, request),
          role === 'supplier' ? SUPPLIER_INSTRUCTIONS : undefined,
        )
        // JSON answers, not SSE: every tool answers once, and a plain response suits any proxy.
        const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
        await server.connect(transport)
        try {
          return await transport.handleRequest(request, { parsedBody: body })
        } finally {
          await server.close()
        }
      },
      { caller: true },
    )
    .get(MCP_PATH, notAllowed, { caller: true })
    .delete(MCP_PATH, notAllowed, { caller: true })
    .put(MCP_PATH, notAllowed, { caller: true })
    .patch(MCP_PATH, notAllowed, { caller: true })
    .options(MCP_PATH, notAllowed, { caller: true })
}
