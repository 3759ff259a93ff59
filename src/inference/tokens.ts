// Token counts the gateway makes itself. The hold needs a fast, true upper bound of the prompt
// (bytes, no tokenizer on the hot path); an answer that ends without usage is billed from a real
// tokenizer's count, made off the main thread (token-count.ts) and only when one is needed.
import { dataUrlImageSize, imageTokenBound } from './image-tokens.ts'
import { countTokens } from './token-count.ts'

export interface ChatMessageLike {
  role?: unknown
  content?: unknown
  name?: unknown
  tool_calls?: unknown
}

const PER_MESSAGE_OVERHEAD = 4
const PER_REQUEST_OVERHEAD = 16

/** Request fields the supplier turns into prompt text beside the messages (tools, schemas ...). */
export const PROMPT_FIELDS = ['tools', 'functions', 'tool_choice', 'response_format', 'prediction'] as const

function messageText(message: ChatMessageLike): string {
  const content = message.content
  let text = typeof content === 'string' ? content : ''
  if (Array.isArray(content)) {
    for (const part of content) {
      const partText = (part as { text?: unknown } | null)?.text
      if (typeof partText === 'string') text += partText
    }
  }
  if (message.tool_calls !== undefined) text += JSON.stringify(message.tool_calls)
  if (typeof message.name === 'string') text += message.name
  return text
}

const byteLength = (value: unknown) => (value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value)))

function imageUrlOf(part: unknown): string | null {
  const p = part as { type?: unknown; image_url?: unknown } | null
  if (!p || typeof p !== 'object' || p.image_url === undefined) return null
  const url = typeof p.image_url === 'string' ? p.image_url : (p.image_url as { url?: unknown } | null)?.url
  return typeof url === 'string' ? url : ''
}

/**
 * A true upper bound of a chat request's prompt tokens, for the hold: a byte-level BPE never makes
 * more tokens than the text has bytes, and every string the supplier could turn into prompt text
 * is counted at one token per byte (its JSON, keys and quotes included: a little over, never
 * under). An image part counts what the most expensive vision encoding makes of its size
 * (image-tokens.ts), never its base64 bytes. Over-holding costs the buyer nothing (the rest goes
 * back at the clear); under-holding would let a supplier be paid for less than it served.
 */
export function promptTokenBound(messages: ChatMessageLike[], fields: Record<string, unknown> = {}): number {
  let bytes = 0
  for (const name of PROMPT_FIELDS) bytes += byteLength(fields[name])
  let images = 0
  for (const message of messages) {
    const { content, ...rest } = message as Record<string, unknown>
    bytes += byteLength(rest)
    if (!Array.isArray(content)) {
      bytes += typeof content === 'string' ? Buffer.byteLength(content) : byteLength(content)
      continue
    }
    for (const part of content) {
      const url = imageUrlOf(part)
      if (url === null) {
        bytes += byteLength(part)
        continue
      }
      // The rest of the part too: a supplier reads it by its type, and a text part may carry an
      // image_url beside its text.
      const { image_url: _, ...rest } = part as Record<string, unknown>
      bytes += byteLength(rest)
      images += imageTokenBound(dataUrlImageSize(url))
    }
  }
  return bytes + images + PER_MESSAGE_OVERHEAD * messages.length + PER_REQUEST_OVERHEAD
}

/** The prompt fields (PROMPT_FIELDS) a request sent beside its messages. */
export function promptFieldsOf(body: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = {}
  for (const name of PROMPT_FIELDS) if (body[name] !== undefined) fields[name] = body[name]
  return fields
}

/** Image parts' tokens at the bound the hold took for them: no tokenizer reads an image. */
function imageTokens(messages: ChatMessageLike[]): number {
  let tokens = 0
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue
    for (const part of message.content) {
      const url = imageUrlOf(part)
      if (url !== null) tokens += imageTokenBound(dataUrlImageSize(url))
    }
  }
  return tokens
}

/**
 * The prompt's tokens by a real tokenizer, for billing an answer that reported no usage: its
 * messages, the prompt fields sent beside them (tools, schemas ...: `promptFieldsOf`) and its
 * images, as the supplier reads them all into the prompt. `count` is countTokensAside for a count
 * nothing is billed by.
 */
export async function promptTokenCount(
  messages: ChatMessageLike[],
  fields: Record<string, unknown> = {},
  count: (text: string) => Promise<number> = countTokens,
): Promise<number> {
  const texts = messages.map(messageText)
  for (const name of PROMPT_FIELDS) if (fields[name] !== undefined) texts.push(JSON.stringify(fields[name]))
  const counts = await Promise.all(texts.map((text) => count(text)))
  const text = counts.reduce((sum, n) => sum + n, 3 + PER_MESSAGE_OVERHEAD * messages.length)
  return text + imageTokens(messages)
}

/** Text kept per answer before it is counted and let go: most answers end below it, uncounted. */
export const OUTPUT_BATCH_CHARS = 4096
/** Deltas kept as they came before they are joined into one flat string (fewer, smaller strings). */
const JOIN_EVERY = 32
/**
 * The longest token of the tokenizer's vocabulary (o200k), in UTF-8 bytes: a text of n characters
 * (UTF-16 units, never more than its bytes) is at least n / this many tokens.
 */
const MAX_TOKEN_BYTES = 128

/**
 * Counts generated tokens as deltas stream by. The text is kept, not counted, while the supplier's
 * usage may still make it moot: it is counted when the answer ends without usage (`total`), or in
 * batches of OUTPUT_BATCH_CHARS on a long answer, so memory stays bounded either way. Text past
 * what `limit` tokens can spell is not kept: the estimate is capped there, so a supplier that
 * streams on past max_tokens costs the tokenizer nothing more.
 */
export class OutputTokenCounter {
  /** Characters still taken in: past them the text counts more than `limit` tokens whatever it is. */
  private left: number
  private text = ''
  private parts: string[] = []
  private partChars = 0
  /** Each batch's count, or its text when the count failed: counted again by `total`'s count. */
  private counted: Promise<number | string>[] = []

  constructor(limit = Number.POSITIVE_INFINITY) {
    this.left = limit * MAX_TOKEN_BYTES
  }

  add(delta: string): void {
    if (this.left <= 0) return
    if (delta.length > this.left) delta = delta.slice(0, this.left)
    this.left -= delta.length
    this.parts.push(delta)
    this.partChars += delta.length
    if (this.parts.length >= JOIN_EVERY) this.join()
    if (this.text.length + this.partChars >= OUTPUT_BATCH_CHARS) this.flush()
  }

  private join(): void {
    this.text += this.parts.join('')
    this.parts.length = 0
    this.partChars = 0
  }

  private flush(): void {
    this.join()
    const text = this.text
    if (text) this.counted.push(countTokens(text).catch(() => text))
    this.text = ''
  }

  /** The answer's tokens; a batch whose count failed is counted again by `count`. */
  async total(count: (text: string) => Promise<number> = countTokens): Promise<number> {
    this.flush()
    const counts = this.counted.map((batch) =>
      batch.then((tokens) => (typeof tokens === 'number' ? tokens : count(tokens))),
    )
    let sum = 0
    for (const n of await Promise.all(counts)) sum += n
    return sum
  }
}
