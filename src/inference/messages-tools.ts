// The Messages API's tools and tool_choice as chat has them: custom tools only (a server tool is a
// 400 naming it), each tool's fields carried or accepted as hints, and a choice that requires a
// call only when there is a tool to call. Each tool_use of the conversation is answered in the next message.
import { badRequest } from '../errors.ts'
import { firstDuplicate } from './chat-checks.ts'
import { isRecord, shown } from './json-object.ts'
import type { ModelNeeds } from './messages-request.ts'

const invalid = (message: string) => badRequest(message, 'invalid_request')
const unsupported = (message: string) => badRequest(message, 'unsupported_parameter')

const SERVER_TOOL = /_\d{8}$/

/**
 * A custom tool's fields: those carried to the supplier, and hints that change nothing in the
 * answer (cache_control; eager_input_streaming, as a call's input streams as it comes anyway).
 */
const TOOL_FIELDS = new Set([
  'type',
  'name',
  'description',
  'input_schema',
  'strict',
  'cache_control',
  'eager_input_streaming',
])

/** A tool field beyond TOOL_FIELDS is refused, unless it asks for what happens anyway. */
function checkToolFields(tool: Record<string, unknown>, at: string): void {
  for (const [key, value] of Object.entries(tool)) {
    if (TOOL_FIELDS.has(key)) continue
    // A deferred tool is one the model sees only once a tool search finds it; none runs here, so
    // it is never seen: not sent (chatTools). Claude Code defers its MCP tools so.
    if (key === 'defer_loading' && typeof value === 'boolean') continue
    if (key === 'allowed_callers' && Array.isArray(value) && value.every((c) => c === 'direct')) continue
    throw unsupported(`${at}.${key} is not supported on /v1/messages`)
  }
}

export function chatTools(tools: unknown, needs: ModelNeeds): Record<string, unknown>[] | undefined {
  if (tools == null) return undefined
  if (!Array.isArray(tools)) throw invalid('tools must be an array')
  // As Anthropic, deferred tools among them: a call by a shared name could be either tool's.
  const twice = firstDuplicate(tools.map((tool) => (isRecord(tool) ? tool.name : undefined)))
  if (twice) {
    throw invalid(
      `tools[${twice.again}]: the name '${twice.name}' is already that of tools[${twice.first}]; tool names must be unique`,
    )
  }
  const sent: Record<string, unknown>[] = []
  tools.forEach((tool, i) => {
    if (!isRecord(tool)) throw invalid(`tools[${i}] must be an object`)
    if (tool.type != null && tool.type !== 'custom') {
      const type = shown(tool.type)
      const hint = SERVER_TOOL.test(type) ? ': server tools are not run here' : ''
      throw unsupported(`tools[${i}] of type '${type}' is not supported${hint}; custom tools are`)
    }
    checkToolFields(tool, `tools[${i}]`)
    if (typeof tool.name !== 'string' || tool.name === '') throw invalid(`tools[${i}].name is required`)
    if (!isRecord(tool.input_schema)) throw invalid(`tools[${i}].input_schema must be a JSON schema object`)
    if (tool.defer_loading === true) return
    needs.tools = true
    const fn: Record<string, unknown> = { name: tool.name, parameters: tool.input_schema }
    if (typeof tool.description === 'string') fn.description = tool.description
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict
    sent.push({ type: 'function', function: fn })
  })
  return sent
}

/**
 * tool_choice as chat has it, with parallel_tool_calls when the request turns them off. A call it
 * requires needs a tool to call: `any` needs tools, `tool` one of them by its name.
 */
export function chatToolChoice(
  choice: unknown,
  tools: Record<string, unknown>[] | undefined,
): Record<string, unknown> {
  if (choice == null) return {}
  if (!isRecord(choice)) throw invalid('tool_choice must be an object')
  const parallel = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {}
  // Without a tool sent (all deferred), auto and none ask nothing, and a chat supplier refuses a
  // tool_choice or parallel_tool_calls without tools.
  if ((choice.type === 'auto' || choice.type === 'none') && !tools?.length) return {}
  if (choice.type === 'auto') return { tool_choice: 'auto', ...parallel }
  if (choice.type === 'none') return { tool_choice: 'none' }
  // A deferred tool is not sent (chatTools): one the choice needs must be loaded up front.
  const sent = 'a tool with defer_loading true is not sent: no tool search runs here'
  if ((choice.type === 'any' || choice.type === 'tool') && !tools?.length)
    throw invalid(`tool_choice of type '${choice.type}' needs tools (${sent})`)
  if (choice.type === 'any') return { tool_choice: 'required', ...parallel }
  if (choice.type === 'tool' && typeof choice.name === 'string') {
    const named = tools!.some(
      (tool) => (tool.function as { name?: unknown } | undefined)?.name === choice.name,
    )
    if (!named)
      throw invalid(`tool_choice names the tool '${choice.name}', which no tool sent defines (${sent})`)
    return { tool_choice: { type: 'function', function: { name: choice.name } }, ...parallel }
  }
  throw unsupported("tool_choice must be {type: 'auto' | 'any' | 'none'} or {type: 'tool', name}")
}

/**
 * As Anthropic: each tool_use is answered by a tool_result in the very next message (a system
 * message between them aside), a final turn's too. A supplier would otherwise guess the answers,
 * or refuse the call only once it is held.
 */
export function checkToolUsesAnswered(messages: readonly { role: string; content: unknown }[]): void {
  let asked: { at: number; ids: unknown[] } | null = null
  const unanswered = (at: number, ids: unknown[]) =>
    invalid(
      `messages[${at}]: tool_use ids were found without tool_result blocks immediately after: ${ids.map(shown).join(', ')}; each tool_use block must have a corresponding tool_result block in the next message`,
    )
  for (const [i, message] of messages.entries()) {
    if (message.role === 'system') continue
    const blocks = Array.isArray(message.content) ? message.content.filter(isRecord) : []
    if (asked) {
      const results = message.role === 'user' ? blocks.filter((block) => block.type === 'tool_result') : []
      const answered = new Set(results.map((block) => block.tool_use_id))
      const missing = asked.ids.filter((id) => !answered.has(id))
      if (missing.length > 0) throw unanswered(asked.at, missing)
      asked = null
    }
    const ids =
      message.role === 'assistant' ? blocks.filter((b) => b.type === 'tool_use').map((b) => b.id) : []
    if (ids.length > 0) asked = { at: i, ids }
  }
  if (asked) throw unanswered(asked.at, asked.ids)
}
