// A Responses request is held like the chat call it becomes: its tools, tool choice, output
// schema and function-call turns land where the hold's prompt bound counts them, so the bound
// stays a true upper bound of what a tokenizer makes of them.
import { expect, test } from 'bun:test'
import { countTokens } from 'gpt-tokenizer'
import { type ResponsesBody, responsesToChat } from '../../src/inference/responses-request.ts'
import { type ChatMessageLike, promptTokenBound } from '../../src/inference/tokens.ts'

const AS_TEXT = { disallowedSpecial: new Set<string>() }
const long = (word: string) => Array.from({ length: 400 }, (_, i) => `${word}${i}`).join(' ')

test('tools, tool_choice, text.format and function-call items are in the prompt bound', () => {
  const description = long('tool')
  const schemaDescription = long('field')
  const callArguments = JSON.stringify({ note: long('argument') })
  const body = {
    model: 'llama-3.3-70b',
    input: [
      { role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'call_1', name: 'lookup', arguments: callArguments },
      { type: 'function_call_output', call_id: 'call_1', output: 'done' },
    ],
    tools: [
      { type: 'function', name: 'lookup', description, parameters: { type: 'object', properties: {} } },
    ],
    tool_choice: { type: 'function', name: 'lookup' },
    text: {
      format: {
        type: 'json_schema',
        name: 'answer',
        schema: { type: 'object', description: schemaDescription, properties: {} },
      },
    },
  } as unknown as ResponsesBody
  const { chat } = responsesToChat(body)
  const bound = promptTokenBound(chat.messages as ChatMessageLike[], chat as Record<string, unknown>)
  const counted = [description, schemaDescription, callArguments].map((text) => countTokens(text, AS_TEXT))
  expect(bound).toBeGreaterThan(counted.reduce((a, b) => a + b, 0))
  // Without them the bound is far smaller: each one is counted, not merely the messages.
  const bare = promptTokenBound([{ role: 'user', content: 'go' }], {})
  expect(bound - bare).toBeGreaterThan(Buffer.byteLength(description + schemaDescription + callArguments))
})
