// Chat fields pass through to the supplier, but the buyer pays for the tokens of the request as
// sent, within its hold: a field that turns on something the upstream charges the supplier's key
// for beyond them (web search, web scraping, its own system prompt, characters whose settings may
// search) would have the supplier pay what no one bills. Such a request is refused by name; the
// upstream's own parameters pass only when known to cost nothing more.
import { badRequest } from '../errors.ts'
import { shown } from './json-object.ts'

/** `venice_parameters` the token bill covers. */
const TOKEN_BILLED: ReadonlySet<string> = new Set([
  'disable_thinking',
  'strip_thinking_response',
  // Meaningful only with web search, which is refused below: harmless on their own.
  'enable_web_citations',
  'include_search_results_in_stream',
  'return_search_results_as_documents',
])

/**
 * Switches allowed only off: the searches add a fee; the upstream's own system prompt (on by
 * default) adds prompt tokens no hold bounds, so it is always sent off (`withoutUpstreamPrompt`).
 */
const OFF_VALUES: Readonly<Record<string, unknown>> = {
  enable_web_search: 'off',
  enable_web_scraping: false,
  include_venice_system_prompt: false,
}

const refuse = (message: string) => badRequest(message, 'unsupported_parameter')

/**
 * Tools the client runs itself (one with no type is left to the supplier to refuse); any other
 * kind would be run, and charged for, upstream.
 */
const CLIENT_TOOLS: ReadonlySet<unknown> = new Set(['function', 'custom', undefined])

/**
 * Content parts whose prompt tokens the hold bounds (tokens.ts promptTokenBound): text by its
 * bytes, an image by its size or the ceiling, inline audio by its base64 bytes. A video or a file
 * the supplier fetches or decodes itself reads into the prompt as many tokens as it has frames or
 * pages, which nothing here can know before it is served: the hold would be the bytes of its JSON.
 */
const BOUNDED_PARTS: ReadonlySet<unknown> = new Set(['text', 'image_url', 'input_audio', 'refusal'])

function refuseUnboundedParts(messages: unknown): void {
  if (!Array.isArray(messages)) return
  messages.forEach((message, i) => {
    const content = (message as { content?: unknown } | null)?.content
    if (!Array.isArray(content)) return
    content.forEach((part, j) => {
      if (typeof part !== 'object' || part === null) return
      const { type, input_audio: audio } = part as { type?: unknown; input_audio?: unknown }
      const inlineAudio = typeof (audio as { data?: unknown } | null)?.data === 'string'
      if (BOUNDED_PARTS.has(type) && (type !== 'input_audio' || inlineAudio)) return
      throw refuse(
        `messages[${i}].content[${j}] of type '${shown(type)}' is not supported: its prompt tokens cannot be bounded before the supplier reads it (text, image_url and inline input_audio parts are)`,
      )
    })
  })
}

export function refuseUnbilledFeatures(body: Record<string, unknown>): void {
  refuseUnboundedParts(body.messages)
  if (Array.isArray(body.tools)) {
    body.tools.forEach((tool, i) => {
      const type = typeof tool === 'object' && tool !== null ? (tool as { type?: unknown }).type : undefined
      if (!CLIENT_TOOLS.has(type)) {
        throw refuse(
          `tools[${i}] of type '${String(type)}' is not supported: only function and custom tools are`,
        )
      }
    })
  }
  if (body.web_search_options != null) {
    throw refuse(
      'web_search_options is not supported: web search is charged beyond tokens, and only tokens are billed here',
    )
  }
  const venice = body.venice_parameters
  if (venice == null) return
  if (typeof venice !== 'object' || Array.isArray(venice)) throw refuse('venice_parameters must be an object')
  for (const [name, value] of Object.entries(venice)) {
    if (TOKEN_BILLED.has(name) || value == null) continue
    if (name in OFF_VALUES) {
      if (value === OFF_VALUES[name]) continue
      throw refuse(
        `venice_parameters.${name} is supported only as ${JSON.stringify(OFF_VALUES[name])}: on, it is charged beyond the tokens of the request as sent`,
      )
    }
    throw refuse(`venice_parameters.${name} is not supported here`)
  }
}

/**
 * The buyer's `venice_parameters` with the upstream's default system prompt turned off: the prompt
 * billed is then the one the buyer sent, which the hold bounds.
 */
export function withoutUpstreamPrompt(venice: unknown): Record<string, unknown> {
  return { ...(venice as Record<string, unknown> | undefined), include_venice_system_prompt: false }
}
