// The tokenizer's own thread: counts text with gpt-tokenizer (o200k) for the main thread's
// TokenCount. Its tables, larger than the rest of the gateway's JS heap, live in this worker's heap,
// so the gateway's own heap, and the garbage its collector lets build up in proportion to it, stay
// small; loading them never stalls a request (see BENCHMARKS.md, "Token counts in a worker").
import { countTokens } from 'gpt-tokenizer'
import { textPieces } from './token-pieces.ts'

export interface CountRequest {
  id: number
  /** A text, or a batch of its pieces (token-count.ts countTokensAside). */
  text: string | string[]
}
export interface CountReply {
  id: number
  tokens?: number
  error?: string
}

// A special token's spelling ("<|endoftext|>") is counted as the text it is. By default the
// tokenizer throws on one, and a prompt or an answer holding it went unbilled.
const AS_TEXT = { disallowedSpecial: new Set<string>() }

// Counted a piece at a time: see token-pieces.ts.
function countInPieces(text: string | string[]): number {
  let tokens = 0
  for (const piece of typeof text === 'string' ? textPieces(text) : text)
    tokens += countTokens(piece, AS_TEXT)
  return tokens
}

declare const self: Worker
self.onmessage = (event: MessageEvent<CountRequest>) => {
  const { id, text } = event.data
  let reply: CountReply
  try {
    reply = { id, tokens: countInPieces(text) }
  } catch (error) {
    reply = { id, error: (error as Error).message }
  }
  self.postMessage(reply)
}
