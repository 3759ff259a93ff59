// The SDK's Server, answering a caller's malformed request as the caller's fault. The SDK parses a
// request's params with its method's schema before any handler runs, and a refusal there (or a
// tool call asked to run as a task) leaves as a bare error, which it answers Internal error
// (-32603): a client would read the server as broken and retry what can never succeed.
// An error's message goes on the wire as its sentence alone: the SDK's McpError reads
// "MCP error <code>: <sentence>", and a client's McpError puts that prefix before what it got.
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  type AnyObjectSchema,
  getLiteralValue,
  getObjectShape,
  getParseErrorMessage,
  type SchemaOutput,
  safeParse,
} from '@modelcontextprotocol/sdk/server/zod-compat.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode, isJSONRPCErrorResponse, McpError } from '@modelcontextprotocol/sdk/types.js'
import * as z from 'zod/v4'

/** The base class's handler, with the request its schema gives. */
type BaseHandler = Parameters<Server['setRequestHandler']>[1]
type Handler<T extends AnyObjectSchema> = (
  request: SchemaOutput<T>,
  extra: Parameters<BaseHandler>[1],
) => ReturnType<BaseHandler>

export class StrictServer extends Server {
  /** Each error answer sent with its message bare of the code prefix an McpError gives it. */
  override connect(transport: Transport): Promise<void> {
    const send = transport.send.bind(transport)
    transport.send = (message, options) => {
      if (isJSONRPCErrorResponse(message)) {
        const prefix = `MCP error ${message.error.code}: `
        if (message.error.message.startsWith(prefix)) {
          const error = { ...message.error, message: message.error.message.slice(prefix.length) }
          return send({ ...message, error }, options)
        }
      }
      return send(message, options)
    }
    return super.connect(transport)
  }

  /**
   * Registered under a schema that checks the method only, so params the real schema refuses reach
   * this wrapper, which answers them Invalid params (-32602) naming each problem. (The SDK checks
   * tools/call itself first, with the same code.)
   */
  override setRequestHandler<T extends AnyObjectSchema>(schema: T, handler: Handler<T>): void {
    const shape = getObjectShape(schema)
    const method = shape?.method && getLiteralValue(shape.method)
    if (typeof method !== 'string') throw new Error('a request schema names its method')
    super.setRequestHandler(z.looseObject({ method: z.literal(method) }), (request, extra) => {
      const parsed = safeParse(schema, request)
      if (!parsed.success) {
        // Each problem with where it is: "... received number at params.cursor".
        const problems = getParseErrorMessage(parsed.error).replaceAll('\n', '; ')
        throw new McpError(ErrorCode.InvalidParams, `Invalid ${method} request: ${problems}`)
      }
      return handler(parsed.data, extra)
    })
  }

  /** No tool here runs as a task (none declares taskSupport): as the spec asks, Method not found. */
  protected override assertTaskHandlerCapability(method: string): void {
    throw new McpError(
      ErrorCode.MethodNotFound,
      `${method} does not run as a task here: send it without params.task`,
    )
  }
}
