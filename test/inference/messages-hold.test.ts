// A Messages request is held like the chat call it becomes: its system, tools, tool choice, output
// schema, tool_use inputs and tool results land where the hold's prompt bound counts them, so the
// bound stays a true upper bound of what a tokenizer makes of them, and its max_tokens is the limit.
import { expect, test } from 'bun:test'
import { countTokens } from 'gpt-tokenizer'
import { validateChat } from '../../src/inference/chat-request.ts'
import { type MessagesBody, messagesToChat } from '../../src/inference/messages-request.ts'
import { burnOf } from '../../src/inference/meter.ts'
import { type ChatMessageLike, promptTokenBound } from '../../src/inference/tokens.ts'

const AS_TEXT = { disallowedSpecial: new Set<string>() }
const long = (word: string) => Array.from({ length: 400 }, (_, i) => `${word}${i}`).join(' ')

test('system, tools, output schema, tool_use inputs and tool results are in the prompt bound', () => {
  const system = long('system')
  const description = long('tool')
  const schemaDescription = long('field')
  const note = long('argument')
  const result = long('result')
  const body = {
    model: 'llama-3.3-70b',
    max_tokens: 300,
    system: [{ type: 'text', text: system }],
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { note } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: result }] },
    ],
    tools: [{ name: 'lookup', description, input_schema: { type: 'object', properties: {} } }],
    tool_choice: { type: 'tool', name: 'lookup' },
    output_config: {
      format: { type: 'json_schema', schema: { type: 'object', description: schemaDescription } },
    },
  } as unknown as MessagesBody
  const { chat } = messagesToChat(body)
  const bound = promptTokenBound(chat.messages as ChatMessageLike[], chat as Record<string, unknown>)
  const texts = [system, description, schemaDescription, JSON.stringify({ note }), result]
  const counted = texts.map((text) => countTokens(text, AS_TEXT))
  expect(bound).toBeGreaterThan(counted.reduce((a, b) => a + b, 0))
  const bare = promptTokenBound([{ role: 'user', content: 'go' }], {})
  expect(bound - bare).toBeGreaterThan(Buffer.byteLength(texts.join('')))

  // The same rule as chat: the prompt bound and max_tokens at the model's output price.
  const model = {
    id: 'llama-3.3-70b',
    prices: { inputPerMillion: 700_000, outputPerMillion: 2_800_000 },
    contextTokens: 128_000,
    maxCompletionTokens: 4096,
  }
  const held = validateChat(chat, model, 1024)
  expect(held.maxTokens).toBe(300)
  expect(held.promptTokenBound).toBe(bound)
  expect(held.holdDiem).toBe(burnOf({ promptTokens: bound, completionTokens: 300 }, model.prices))
})
