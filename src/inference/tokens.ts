// Token counts the gateway makes itself. The hold needs a fast, generous upper bound of the prompt
// (bytes, no tokenizer on the hot path); an answer that ends without usage is billed from a real
// tokenizer's count, made off the main thread (token-count.ts) and only when one is needed.
import { countTokens } from './token-count.ts'

export interface ChatMessageLike {
  role?: unknown
  content?: unknown
  name?: unknown
  tool_calls?: unknown
}

const PER_MESSAGE_OVERHEAD = 4
const PER_REQUEST_OVERHEAD = 16

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

/**
 * An upper bound of a prompt's tokens for the hold: 2 tokens per 5 UTF-8 bytes is above what
 * common tokenizers give for text, code and CJK alike. Over-holding costs nothing (the rest goes
 * back at the clear); under-holding would be written off.
 */
export function promptTokenBound(messages: ChatMessageLike[], extra = ''): number {
  let bytes = Buffer.byteLength(extra)
  for (const message of messages) bytes += Buffer.byteLength(messageText(message))
  return Math.ceil((bytes * 2) / 5) + PER_MESSAGE_OVERHEAD * messages.length + PER_REQUEST_OVERHEAD
}

/** The prompt's tokens by a real tokenizer, for billing a stream that reported no usage. */
export async function promptTokenCount(messages: ChatMessageLike[]): Promise<number> {
  const counts = await Promise.all(messages.map((message) => countTokens(messageText(message))))
  return counts.reduce((sum, n) => sum + PER_MESSAGE_OVERHEAD + n, 3)
}

/** Text kept per answer before it is counted and let go: most answers end below it, uncounted. */
export const OUTPUT_BATCH_CHARS = 4096
/** Deltas kept as they came before they are joined into one flat string (fewer, smaller strings). */
const JOIN_EVERY = 32

/**
 * Counts generated tokens as deltas stream by. The text is kept, not counted, while the supplier's
 * usage may still make it moot: it is counted when the answer ends without usage (`total`), or in
 * batches of OUTPUT_BATCH_CHARS on a long answer, so memory stays bounded either way.
 */
export class OutputTokenCounter {
  private text = ''
  private parts: string[] = []
  private partChars = 0
  private counted: Promise<number>[] = []

  add(delta: string): void {
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
    if (this.text) {
      const tokens = countTokens(this.text)
      tokens.catch(() => {}) // a failure is `total`'s to report, when (if ever) it is asked for
      this.counted.push(tokens)
    }
    this.text = ''
  }

  async total(): Promise<number> {
    this.flush()
    let sum = 0
    for (const n of await Promise.all(this.counted)) sum += n
    return sum
  }
}
