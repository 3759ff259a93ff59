// What the simulated supplier answers a chat request with, decided before any byte goes out: the
// reasoning a reasoning model thinks first, then either a tool call (when the request offers
// tools) or content (JSON that fits a requested schema, or words). Every piece is one token, and
// the answer is cut at the request's token limit with finish_reason "length", as a real model is,
// or before the first word that is one of its `stop` sequences (named as vLLM does, `stop_reason`).
import { completionTokens } from './generate.ts'
import { schemaValue } from './schema-value.ts'

const REASONING_WORDS = ['weighing', 'the', 'ask', 'against', 'the', 'balance', 'before', 'answering']

/** Reasoning tokens a reasoning model spends at each `reasoning_effort`; medium when none is named. */
const REASONING_TOKENS: Record<string, number> = { none: 0, minimal: 1, low: 2, medium: 4, high: 8 }

/** JSON (an object, tool arguments) goes out in pieces of this many characters, one token each. */
const JSON_PIECE_CHARS = 6

export interface ChatRequestLike {
  messages: { role?: unknown }[]
  tools?: unknown
  tool_choice?: unknown
  response_format?: unknown
  reasoning_effort?: unknown
  stop?: unknown
}

export interface SimToolCall {
  id: string
  name: string
  /** The arguments (JSON text), one token a piece. */
  pieces: string[]
}

export interface SimAnswer {
  reasoning: string[]
  content: string[]
  toolCall: SimToolCall | null
  finishReason: 'stop' | 'length' | 'tool_calls'
  /** The stop sequence the content ended before, when it did. */
  matchedStop?: string
}

export const answerTokens = (answer: SimAnswer) =>
  answer.reasoning.length + answer.content.length + (answer.toolCall?.pieces.length ?? 0)

function reasoningTokens(count: number): string[] {
  const tokens: string[] = []
  for (let i = 0; i < count; i++) {
    const word = REASONING_WORDS[i % REASONING_WORDS.length]!
    tokens.push(i === 0 ? word : ` ${word}`)
  }
  return tokens
}

function jsonPieces(text: string): string[] {
  const pieces: string[] = []
  for (let i = 0; i < text.length; i += JSON_PIECE_CHARS) pieces.push(text.slice(i, i + JSON_PIECE_CHARS))
  return pieces
}

interface FunctionTool {
  name: string
  parameters: unknown
}

function functionTools(tools: unknown): FunctionTool[] {
  if (!Array.isArray(tools)) return []
  return tools
    .map(
      (tool) => (tool as { type?: unknown; function?: { name?: unknown; parameters?: unknown } })?.function,
    )
    .filter((fn): fn is FunctionTool => typeof fn?.name === 'string')
}

/**
 * The tool a model calls, or null for a text answer: the named one when tool_choice names one;
 * with "auto", the first offered, unless the last message is a tool's result (then it answers).
 */
function chosenTool(request: ChatRequestLike): FunctionTool | null {
  const tools = functionTools(request.tools)
  const choice = request.tool_choice
  if (tools.length === 0 || choice === 'none') return null
  const named = (choice as { function?: { name?: unknown } } | null)?.function?.name
  if (typeof named === 'string') return tools.find((tool) => tool.name === named) ?? null
  if (choice !== 'required' && request.messages.at(-1)?.role === 'tool') return null
  return tools[0]!
}

function jsonContent(format: unknown): string | null {
  const f = format as { type?: unknown; json_schema?: { schema?: unknown } } | null
  if (f?.type === 'json_schema') return JSON.stringify(schemaValue(f.json_schema?.schema ?? {}))
  if (f?.type === 'json_object') return JSON.stringify({ answer: 'the market clears at the cheapest ask' })
  return null
}

/** Content cut before its first word that is one of the request's stop sequences. */
function stopped(content: string[], stop: unknown): { content: string[]; matchedStop?: string } {
  const sequences = typeof stop === 'string' ? [stop] : Array.isArray(stop) ? stop : []
  const at = content.findIndex((token) => sequences.includes(token.trim()))
  if (at < 0) return { content }
  return { content: content.slice(0, at), matchedStop: content[at]!.trim() }
}

/** The whole answer for a request, cut at `maxTokens` (reasoning first, as a model spends them). */
export function planAnswer(
  request: ChatRequestLike,
  reasoningModel: boolean,
  wantedWords: number,
  maxTokens: number | undefined,
): SimAnswer {
  const effort = typeof request.reasoning_effort === 'string' ? request.reasoning_effort : 'medium'
  const reasoning = reasoningModel ? reasoningTokens(REASONING_TOKENS[effort] ?? 4) : []
  const tool = chosenTool(request)
  const json = tool ? null : jsonContent(request.response_format)
  const words = stopped(completionTokens(wantedWords), request.stop)
  const content = tool ? [] : json !== null ? jsonPieces(json) : words.content
  const toolCall = tool
    ? {
        id: `call_${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`,
        name: tool.name,
        pieces: jsonPieces(JSON.stringify(schemaValue(tool.parameters ?? {}))),
      }
    : null
  const answer: SimAnswer = { reasoning, content, toolCall, finishReason: tool ? 'tool_calls' : 'stop' }
  if (!tool && json === null && words.matchedStop !== undefined) answer.matchedStop = words.matchedStop
  if (maxTokens === undefined || answerTokens(answer) <= maxTokens) return answer
  let budget = maxTokens
  const take = (pieces: string[]) => {
    const kept = pieces.slice(0, budget)
    budget -= kept.length
    return kept
  }
  return {
    reasoning: take(reasoning),
    content: take(content),
    toolCall: toolCall ? { ...toolCall, pieces: take(toolCall.pieces) } : null,
    finishReason: 'length',
  }
}
