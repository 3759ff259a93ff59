// The hosted MCP server at /mcp (the contract's {mcp_url}): streamable HTTP, stateless, behind the
// same Bearer key as /v1/agent. Each POST gets its own server and transport, so any replica can
// answer any request; tools call the app itself with the caller's key (src/mcp/tools.ts).
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { Elysia } from 'elysia'
import { ApiError } from '../../errors.ts'
import { type Dispatch, mcpServer } from '../../mcp/server.ts'
import { TOOLS, type Tool } from '../../mcp/tools.ts'
import { type AuthDeps, buyerAuth } from '../auth.ts'

export const MCP_PATH = '/mcp'

/** What the MCP route needs of the app it is mounted in: its routes, and a way to call them. */
export interface AppHandle {
  handle(request: Request): Promise<Response>
  readonly routes: readonly { method: string; path: string }[]
}

// Prefixed plugins register '/v1/models/' for '/v1/models'; parameter names do not matter.
const routeKey = (method: string, path: string) =>
  `${method} ${path.replace(/:[^/]+/g, ':').replace(/(.)\/$/, '$1')}`

/** The tools whose routes the app serves (a route still being built leaves its tool out). */
function offeredTools(app: AppHandle): Tool[] {
  const served = new Set(app.routes.map((route) => routeKey(route.method, route.path)))
  return TOOLS.filter((tool) => {
    const [method, path] = tool.route.split(' ') as [string, string]
    return served.has(routeKey(method, path))
  })
}

function dispatcher(app: AppHandle, request: Request): Dispatch {
  const origin = new URL(request.url).origin
  const authorization = request.headers.get('authorization') ?? ''
  return (call, signal) =>
    app.handle(
      new Request(`${origin}${call.path}`, {
        method: call.method,
        headers: {
          authorization,
          ...(call.body ? { 'content-type': 'application/json' } : {}),
        },
        ...(call.body ? { body: JSON.stringify(call.body) } : {}),
        signal,
      }),
    )
}

const notAllowed = () => {
  throw new ApiError(405, 'method_not_allowed', 'this MCP server is stateless: send JSON-RPC with POST', {
    headers: { allow: 'POST' },
  })
}

/** Mounted last, with the app itself: `.use((app) => app.use(mcpRoutes(deps, app)))`. */
export function mcpRoutes(deps: AuthDeps, app: AppHandle) {
  return new Elysia({ name: 'svc/mcp', seed: deps.keys.prefix })
    .use(buyerAuth(deps))
    .post(
      MCP_PATH,
      async ({ request, body }) => {
        const server = mcpServer(offeredTools(app), dispatcher(app, request))
        // JSON answers, not SSE: every tool answers once, and a plain response suits any proxy.
        const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
        await server.connect(transport)
        try {
          return await transport.handleRequest(request, { parsedBody: body })
        } finally {
          await server.close()
        }
      },
      { buyer: true },
    )
    .get(MCP_PATH, notAllowed, { buyer: true })
    .delete(MCP_PATH, notAllowed, { buyer: true })
}
