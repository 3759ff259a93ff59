// One MCP server per HTTP request (stateless streamable HTTP): tools/list and tools/call over the
// tool table, each call dispatched to the app as the caller. The low-level Server, not McpServer:
// our input schemas are JSON Schema already (TypeBox), and McpServer takes only zod.
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  CallToolRequestSchema,
  type CallToolResult,
  CancelledNotificationSchema,
  ErrorCode,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js'
import { TypeCompiler } from 'elysia/type-system'
import pkg from '../../package.json' with { type: 'json' }
import { StrictServer } from './strict-server.ts'
import { type ApiCall, InvalidArgument, type Tool, type ToolAnswer } from './tools.ts'

/** Sends one call to the app with the caller's key; `signal` ends it if the MCP request is cancelled. */
export type Dispatch = (call: ApiCall, signal: AbortSignal) => Promise<Response>

const INSTRUCTIONS =
  'Prepaid, OpenAI-compatible inference. agent_me confirms the connection and shows the confirmed ' +
  'balance and max price; chat runs a completion and returns its cost. Errors come back as tool ' +
  'errors carrying the HTTP status and the error.code of the API (see /llms.txt). Agents that speak ' +
  "Anthropic's Messages API call POST /v1/messages with the same key (as x-api-key)."

/** The most of an unknown tool's name a refusal echoes: enough to spot a typo, never the whole body. */
const ECHOED_NAME_CHARS = 100

/** The name's first ECHOED_NAME_CHARS characters (code points: no pair cut in half), and an ellipsis when longer. */
function echoedName(name: string): string {
  let end = 0
  for (let n = 0; n < ECHOED_NAME_CHARS && end < name.length; n++)
    end += name.codePointAt(end)! > 0xffff ? 2 : 1
  return end >= name.length ? name : `${name.slice(0, end)}…`
}

const checkers = new WeakMap<Tool, ReturnType<typeof TypeCompiler.Compile>>()
function checker(tool: Tool) {
  let compiled = checkers.get(tool)
  if (!compiled) {
    compiled = TypeCompiler.Compile(tool.input)
    checkers.set(tool, compiled)
  }
  return compiled
}

/** The first thing wrong with a tool's arguments, in words, or null. */
function argumentProblem(tool: Tool, args: Record<string, unknown>): string | null {
  const first = checker(tool).Errors(args).First()
  if (first) {
    const field = first.path.replace(/^\//, '').replaceAll('/', '.')
    if (!field) return first.message
    return first.value === undefined ? `missing required argument: ${field}` : `${field}: ${first.message}`
  }
  return tool.refine?.(args) ?? null
}

const result = (answer: ToolAnswer, isError = false): CallToolResult => ({
  content: answer.content.map((text) => ({ type: 'text' as const, text })),
  structuredContent: answer.data,
  ...(isError ? { isError: true } : {}),
})

async function bodyOf(response: Response): Promise<Record<string, unknown>> {
  const text = await response.text()
  try {
    const json = JSON.parse(text) as unknown
    if (json && typeof json === 'object' && !Array.isArray(json)) return json as Record<string, unknown>
    return { value: json }
  } catch {
    return { text }
  }
}

/** A 4xx or 5xx of the API as a tool error: its status, error.code and message, hints included. */
function failure(response: Response, body: Record<string, unknown>): CallToolResult {
  const error = (body.error ?? {}) as { code?: string; message?: string }
  const retryAfter = response.headers.get('retry-after')
  const data = {
    status: response.status,
    ...body,
    requestId: response.headers.get('x-svc-request-id'),
    ...(retryAfter ? { retryAfterSeconds: Number(retryAfter) } : {}),
  }
  const line = `HTTP ${response.status} ${error.code ?? ''}: ${error.message ?? 'request failed'}`
  return result({ content: [line, JSON.stringify(body)], data }, true)
}

async function callTool(tool: Tool, args: Record<string, unknown>, dispatch: Dispatch, signal: AbortSignal) {
  const invalid = (problem: string) => {
    const message = `invalid arguments for ${tool.name}: ${problem}`
    return result({ content: [message], data: { error: { code: 'invalid_arguments', message } } }, true)
  }
  const problem = argumentProblem(tool, args)
  if (problem) return invalid(problem)
  let call: ApiCall
  try {
    call = tool.call(args)
  } catch (error) {
    if (error instanceof InvalidArgument) return invalid(error.message)
    throw error
  }
  const response = await dispatch(call, signal)
  const body = await bodyOf(response)
  if (!response.ok) return failure(response, body)
  return result(tool.present?.(body, response.headers) ?? { content: [JSON.stringify(body)], data: body })
}

export function mcpServer(tools: Tool[], dispatch: Dispatch, instructions = INSTRUCTIONS): Server {
  const byName = new Map(tools.map((tool) => [tool.name, tool]))
  const server = new StrictServer(
    { name: 'svc-gateway', version: pkg.version },
    { capabilities: { tools: {} }, instructions },
  )
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.input,
    })),
  }))
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const tool = byName.get(request.params.name)
    if (!tool) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool '${echoedName(request.params.name)}'; tools/list names them`,
      )
    }
    return callTool(tool, request.params.arguments ?? {}, dispatch, extra.signal)
  })
  // A cancellation is ignored, as the spec lets a receiver do. Stateless, it can only name a request
  // of its own POST, and a cancelled request gets no answer: the POST would wait for it for ever.
  server.setNotificationHandler(CancelledNotificationSchema, () => {})
  return server
}

/** The first protocol version without JSON-RPC batches: a client that speaks it sends one message a POST. */
export const NO_BATCHES_FROM = '2025-06-18'

/**
 * Why a POST body is not a message this server takes (JSON-RPC's Invalid Request), or null: a
 * value that is not a JSON-RPC 2.0 message (alone or in a batch), a batch under a protocol version
 * (MCP-Protocol-Version, dated) that has none, an empty batch, or two requests of one batch with
 * one id (their answers could not be told apart, and the POST would answer only one of them).
 * Without the header a client is taken to speak 2025-03-26, which has batches.
 */
export function bodyProblem(body: unknown, protocolVersion: string | null = null): string | null {
  const messages: unknown[] = Array.isArray(body) ? body : [body]
  if (!messages.every((message) => JSONRPCMessageSchema.safeParse(message).success))
    return 'not a JSON-RPC 2.0 message'
  if (!Array.isArray(body)) return null
  if (protocolVersion !== null && protocolVersion >= NO_BATCHES_FROM)
    return `protocol version ${protocolVersion} has no batches: send one message a POST`
  if (body.length === 0) return 'an empty batch'
  const ids = new Set<unknown>()
  for (const message of body as unknown[]) {
    if (message === null || typeof message !== 'object' || !('method' in message) || !('id' in message))
      continue
    if (ids.has(message.id)) return `two requests of the batch have the id ${JSON.stringify(message.id)}`
    ids.add(message.id)
  }
  return null
}
