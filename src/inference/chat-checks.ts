// What OpenAI's chat completions API refuses in a request, refused here by name before anything is
// held: a supplier may take it silently and answer a question the client did not ask, or refuse it
// once the request is held and dispatched.
import { badRequest } from '../errors.ts'
import { isRecord, shown } from './json-object.ts'
import { chatToolChoice } from './responses-tools.ts'

const invalid = (message: string) => badRequest(message, 'invalid_request')

/** OpenAI's ranges for its sampling fields, the same on chat completions and Responses. */
const RANGES = {
  temperature: [0, 2],
  top_p: [0, 1],
  presence_penalty: [-2, 2],
  frequency_penalty: [-2, 2],
} as const

export function refuseOutOfRange(
  body: Record<string, unknown>,
  fields: readonly (keyof typeof RANGES)[],
): void {
  for (const field of fields) {
    const value = body[field]
    const [min, max] = RANGES[field]
    if (value != null && (typeof value !== 'number' || value < min || value > max)) {
      throw invalid(`${field} must be a number between ${min} and ${max}`)
    }
  }
}

/** The first name that is already among those before it, with both places; null when none is. */
export function firstDuplicate(names: unknown[]): { name: string; first: number; again: number } | null {
  const seen = new Map<string, number>()
  for (const [again, name] of names.entries()) {
    if (typeof name !== 'string') continue
    const first = seen.get(name)
    if (first !== undefined) return { name, first, again }
    seen.set(name, again)
  }
  return null
}

/** OpenAI's most stop sequences in one request. */
const MAX_STOP = 4

function checkTools(body: Record<string, unknown>): void {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isRecord) : []
  const named = (tool: Record<string, unknown>) => {
    const spec = tool.type === 'custom' ? tool.custom : tool.function
    return isRecord(spec) ? spec.name : undefined
  }
  const twice = firstDuplicate(tools.map(named))
  if (twice) {
    throw invalid(
      `tools[${twice.again}]: the name ${shown(twice.name)} is already that of tools[${twice.first}]; tool names must be unique`,
    )
  }
  // A choice that needs a call no tool sent can make, as on Responses; other forms pass to the supplier.
  const choice = body.tool_choice
  if (choice === 'required') chatToolChoice(choice, tools)
  else if (isRecord(choice) && isRecord(choice.function) && typeof choice.function.name === 'string') {
    chatToolChoice(
      { type: 'function', name: choice.function.name },
      tools.filter((tool) => tool.type === 'function' && isRecord(tool.function)),
    )
  }
}

function checkLogitBias(bias: unknown): void {
  if (bias == null) return
  if (!isRecord(bias)) throw invalid('logit_bias must be an object of token ids to numbers')
  for (const [token, value] of Object.entries(bias)) {
    if (typeof value !== 'number' || value < -100 || value > 100) {
      throw invalid(`logit_bias[${shown(token)}] must be a number between -100 and 100`)
    }
  }
}

function checkStop(stop: unknown): void {
  if (Array.isArray(stop) && stop.length > MAX_STOP) {
    throw invalid(`stop may hold at most ${MAX_STOP} sequences, not ${stop.length}`)
  }
}

/**
 * As OpenAI: a tool message answers a call an assistant message made before it, and each call an
 * assistant message makes is answered before the next user or assistant turn.
 */
function checkToolTurns(messages: unknown[]): void {
  const called = new Set<unknown>()
  /** The calls of the last assistant turn not yet answered, and that turn's place. */
  let unanswered = new Set<unknown>()
  let callsAt = -1
  const refuseUnanswered = (at: string) => {
    const [id] = unanswered
    throw invalid(
      `${at}: the assistant message at messages[${callsAt}] has tool_calls that must be answered first: tool_call_id ${shown(id)} has no tool message responding to it`,
    )
  }
  messages.forEach((message, i) => {
    if (!isRecord(message)) return
    if (message.role === 'tool') {
      const id = message.tool_call_id
      if (typeof id !== 'string') throw invalid(`messages[${i}].tool_call_id is required on a tool message`)
      if (!called.has(id)) {
        throw invalid(
          `messages[${i}].tool_call_id ${shown(id)} answers no tool_calls of an earlier assistant message`,
        )
      }
      unanswered.delete(id)
      return
    }
    if (message.role !== 'user' && message.role !== 'assistant') return
    if (unanswered.size > 0) refuseUnanswered(`messages[${i}]`)
    // Nothing is left unanswered here (refused above): a turn without calls leaves it so.
    if (message.role !== 'assistant' || !Array.isArray(message.tool_calls)) return
    const ids = message.tool_calls.map((call) => (isRecord(call) ? call.id : undefined))
    for (const id of ids) called.add(id)
    unanswered = new Set(ids)
    callsAt = i
  })
  if (unanswered.size > 0) refuseUnanswered('messages')
}

const CHAT_RANGED = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty'] as const

/** A tool message, or an assistant's calls: what checkToolTurns reads. */
const usesTools = (message: unknown) =>
  isRecord(message) && (message.role === 'tool' || Array.isArray(message.tool_calls))

/**
 * A chat completions request OpenAI would refuse: a 400 naming the field. A request without tools
 * (most) allocates nothing for the checks that read them.
 */
export function checkChatRequest(body: Record<string, unknown>): void {
  refuseOutOfRange(body, CHAT_RANGED)
  if (body.tools != null || body.tool_choice != null) checkTools(body)
  checkLogitBias(body.logit_bias)
  checkStop(body.stop)
  if (Array.isArray(body.messages) && body.messages.some(usesTools)) checkToolTurns(body.messages)
}
