// Token counts the gateway makes itself. The hold needs a fast, generous upper bound of the prompt
// (bytes, no tokenizer on the hot path); a stream that ends without usage is billed from a real
// tokenizer's count (gpt-tokenizer, o200k).
import { countTokens } from 'gpt-tokenizer'

export interface ChatMessageLike {
  role?: unknown
  content?: unknown
  name?: unknown
  tool_calls?: unknown
}

// A special token's spelling ("<|endoftext|>") is counted as the text it is. By default the
// tokenizer throws on one, and a prompt or an answer holding it went unbilled.
const AS_TEXT = { disallowedSpecial: new Set<string>() }

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
export function promptTokenCount(messages: ChatMessageLike[]): number {
  let tokens = 3
  for (const message of messages) tokens += PER_MESSAGE_OVERHEAD + countTokens(messageText(message), AS_TEXT)
  return tokens
}

/** Counts generated tokens as deltas stream by, tokenizing in bounded batches (memory stays small). */
export class OutputTokenCounter {
  private pending = ''
  private counted = 0

  add(delta: string): void {
    this.pending += delta
    if (this.pending.length >= 2048) this.flush()
  }

  private flush(): void {
    if (this.pending) this.counted += countTokens(this.pending, AS_TEXT)
    this.pending = ''
  }

  total(): number {
    this.flush()
    return this.counted
  }
}
