// Deterministic text for the simulated supplier: one word is one token, so tests can predict usage.

const WORDS = [
  'the',
  'market',
  'clears',
  'at',
  'the',
  'cheapest',
  'ask',
  'and',
  'every',
  'micro',
  'dollar',
  'is',
  'counted',
  'once',
  'while',
  'streams',
  'flow',
  'through',
  'one',
  'small',
  'binary',
  'with',
  'redis',
  'behind',
]

export function completionTokens(count: number): string[] {
  const tokens: string[] = []
  for (let i = 0; i < count; i++) tokens.push(i === 0 ? WORDS[0]! : ` ${WORDS[i % WORDS.length]}`)
  return tokens
}

interface MessageLike {
  content?: unknown
}

/** The simulated upstream's own prompt-token count: about four characters a token, plus framing. */
export function promptTokens(messages: MessageLike[]): number {
  let chars = 0
  for (const message of messages) {
    const content = message.content
    if (typeof content === 'string') chars += content.length
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
          chars += (part as { text: string }).text.length
        }
      }
    }
  }
  return Math.ceil(chars / 4) + 3 * messages.length + 3
}
