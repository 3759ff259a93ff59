// The tools of a Responses request as the supplier's chat tools, and its tool_choice, refused
// where it asks for a call the tools sent cannot make (as OpenAI refuses it).
import { badRequest } from '../errors.ts'
import { isRecord, shown } from './json-object.ts'

const invalid = (message: string) => badRequest(message, 'invalid_request')
const unsupported = (message: string) => badRequest(message, 'unsupported_parameter')

export function chatTools(tools: unknown): Record<string, unknown>[] | undefined {
  if (tools == null) return undefined
  if (!Array.isArray(tools)) throw invalid('tools must be an array')
  return tools.map((tool, i) => {
    if (!isRecord(tool) || tool.type !== 'function') {
      const type = isRecord(tool) ? tool.type : typeof tool
      throw unsupported(`tools[${i}] of type '${shown(type)}' is not supported: only function tools are`)
    }
    if (typeof tool.name !== 'string' || tool.name === '') throw invalid(`tools[${i}].name is required`)
    const fn: Record<string, unknown> = { name: tool.name }
    for (const field of ['description', 'parameters', 'strict'] as const) {
      if (tool[field] != null) fn[field] = tool[field]
    }
    return { type: 'function', function: fn }
  })
}

/** The chat tool_choice; one that asks for a call no tool sent can make is refused. */
export function chatToolChoice(choice: unknown, tools: Record<string, unknown>[]): unknown {
  if (choice == null) return undefined
  if (choice === 'auto' || choice === 'none') return choice
  if (choice === 'required') {
    if (tools.length === 0) throw invalid("tool_choice 'required' needs at least one tool in tools")
    return choice
  }
  if (isRecord(choice) && choice.type === 'function' && typeof choice.name === 'string') {
    const names = tools.map((tool) => (tool.function as { name: string }).name)
    if (!names.includes(choice.name)) {
      throw invalid(`tool_choice names function ${shown(choice.name)}, which is not among tools`)
    }
    return { type: 'function', function: { name: choice.name } }
  }
  throw unsupported("tool_choice must be 'auto', 'none', 'required' or {type: 'function', name}")
}
