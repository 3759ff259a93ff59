// The Messages request as the supplier's chat call: each Anthropic field lands on its chat
// equivalent (images as image_url parts, tool results as tool messages ahead of the turn's text,
// tool_choice, thinking as reasoning effort, stop sequences, metadata.user_id as user).
import { expect, test } from 'bun:test'
import { type MessagesBody, messagesToChat } from '../../src/inference/messages-request.ts'

/** The translation, its chat body read as the plain record the supplier receives. */
function translate(body: Record<string, unknown>) {
  const translated = messagesToChat({
    model: 'llama-3.3-70b',
    max_tokens: 100,
    ...body,
  } as unknown as MessagesBody)
  return { ...translated, chat: translated.chat as Record<string, unknown> }
}

test('blocks become chat messages: images, tool_use, tool results first, errors said so', () => {
  const { chat, needs } = translate({
    system: 'Be brief.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
          { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'hmm', signature: 's' },
          { type: 'text', text: 'Looking.' },
          { type: 'tool_use', id: 'toolu_1', name: 'look', input: { at: 'a' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'and?' },
          {
            type: 'tool_result',
            tool_use_id: 'toolu_1',
            content: [{ type: 'text', text: 'blurry' }],
            is_error: true,
          },
        ],
      },
    ],
  })
  expect(needs.vision).toBe(true)
  expect(chat.messages).toEqual([
    { role: 'system', content: 'Be brief.' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'What is this?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
      ],
    },
    {
      role: 'assistant',
      content: 'Looking.',
      tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'look', arguments: '{"at":"a"}' } }],
    },
    { role: 'tool', tool_call_id: 'toolu_1', content: 'Error: blurry' },
    { role: 'user', content: [{ type: 'text', text: 'and?' }] },
  ])
})

test('tools, tool_choice, sampling, stop sequences, metadata and thinking', () => {
  const tools = [{ name: 'look', description: 'Look', input_schema: { type: 'object' } }]
  const base = { messages: [{ role: 'user', content: 'hi' }], tools }
  const { chat, stopSequences } = translate({
    ...base,
    tool_choice: { type: 'any', disable_parallel_tool_use: true },
    temperature: 0.2,
    top_p: 0.9,
    top_k: 5,
    stop_sequences: ['END'],
    metadata: { user_id: 'u1' },
  })
  expect(chat).toMatchObject({
    max_tokens: 100,
    tools: [
      { type: 'function', function: { name: 'look', description: 'Look', parameters: { type: 'object' } } },
    ],
    tool_choice: 'required',
    parallel_tool_calls: false,
    temperature: 0.2,
    top_p: 0.9,
    top_k: 5,
    stop: ['END'],
    user: 'u1',
  })
  expect(stopSequences).toEqual(['END'])
  expect(translate({ ...base, tool_choice: { type: 'tool', name: 'look' } }).chat.tool_choice).toEqual({
    type: 'function',
    function: { name: 'look' },
  })
  expect(translate({ ...base, tool_choice: { type: 'none' } }).chat.tool_choice).toBe('none')
  expect(translate({ ...base, tool_choice: { type: 'auto' } }).chat).toMatchObject({ tool_choice: 'auto' })
  expect(translate({ ...base, tool_choice: { type: 'auto' } }).chat.parallel_tool_calls).toBeUndefined()
  const thinking = (budget: number) =>
    translate({ ...base, max_tokens: 40_000, thinking: { type: 'enabled', budget_tokens: budget } })
  expect(thinking(1024).chat.reasoning_effort).toBe('low')
  expect(thinking(8000).chat.reasoning_effort).toBe('medium')
  expect(thinking(20_000).chat.reasoning_effort).toBe('high')
  expect(thinking(1024).needs.reasoning).toBe(true)
  expect(() => translate({ ...base, thinking: { type: 'enabled', budget_tokens: 100 } })).toThrow(
    'budget_tokens',
  )
})

test('system as text blocks is one system message; a block that is not text is refused by name', () => {
  const messages = [{ role: 'user', content: 'hi' }]
  const system = [
    { type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } },
    { type: 'text', text: 'Answer in French.' },
  ]
  expect(translate({ system, messages }).chat.messages).toEqual([
    { role: 'system', content: 'Be brief.\nAnswer in French.' },
    { role: 'user', content: 'hi' },
  ])
  const image = { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }
  expect(() => translate({ system: [image], messages })).toThrow("system[0] of type 'image'")
  // A text block without its text says so, not that text is unsupported.
  expect(() => translate({ system: [{ type: 'text' }], messages })).toThrow('system[0].text must be a string')
})

test("a tool's hints are accepted; a tool field that cannot be honoured is refused by name", () => {
  const messages = [{ role: 'user', content: 'hi' }]
  const tool = { name: 'look', input_schema: { type: 'object' } }
  const hinted = {
    ...tool,
    cache_control: { type: 'ephemeral' },
    eager_input_streaming: true,
    defer_loading: false,
    allowed_callers: ['direct'],
  }
  expect(translate({ messages, tools: [hinted] }).chat.tools).toEqual([
    { type: 'function', function: { name: 'look', parameters: { type: 'object' } } },
  ])
  for (const [extra, named] of [
    [{ input_examples: [{ at: 'a' }] }, 'tools[0].input_examples'],
    [{ allowed_callers: ['code_execution_20250825'] }, 'tools[0].allowed_callers'],
    [{ colour: 'red' }, 'tools[0].colour'],
  ] as const) {
    expect(() => translate({ messages, tools: [{ ...tool, ...extra }] })).toThrow(named)
  }
  expect(() => translate({ messages: [{ ...messages[0], name: 'ann' }] })).toThrow('messages[0].name')
})

test('a deferred tool is never seen by the model, as where no tool search runs: not sent, yet checked', () => {
  const messages = [{ role: 'user', content: 'hi' }]
  const look = { name: 'look', input_schema: { type: 'object' } }
  const deferred = { name: 'mcp__later', input_schema: { type: 'object' }, defer_loading: true }
  expect(translate({ messages, tools: [look, deferred] }).chat.tools).toEqual([
    { type: 'function', function: { name: 'look', parameters: { type: 'object' } } },
  ])
  expect(translate({ messages, tools: [deferred] }).chat.tools).toBeUndefined()
  expect(() => translate({ messages, tools: [{ ...deferred, input_schema: 'x' }] })).toThrow(
    'tools[0].input_schema',
  )
  expect(() =>
    translate({ messages, tools: [look, deferred], tool_choice: { type: 'tool', name: 'mcp__later' } }),
  ).toThrow(
    "names the tool 'mcp__later', which no tool sent defines (a tool with defer_loading true is not sent",
  )
})

test('a system message inside messages is a chat system message where it stands', () => {
  const { chat } = translate({
    system: 'Be brief.',
    messages: [
      { role: 'user', content: 'hi' },
      {
        role: 'system',
        content: [
          { type: 'text', text: 'Today is Monday.', cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'Answer in French.' },
        ],
      },
      { role: 'assistant', content: 'Bonjour.' },
      { role: 'system', content: 'Now in English.' },
      { role: 'user', content: 'again' },
    ],
  })
  expect(chat.messages).toEqual([
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'hi' },
    { role: 'system', content: 'Today is Monday.\nAnswer in French.' },
    { role: 'assistant', content: 'Bonjour.' },
    { role: 'system', content: 'Now in English.' },
    { role: 'user', content: 'again' },
  ])
  const image = { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }
  const withImage = [
    { role: 'user', content: 'hi' },
    { role: 'system', content: [image] },
  ]
  expect(() => translate({ messages: withImage })).toThrow("messages[1].content[0] of type 'image'")
  // Instructions alone are nothing to answer.
  expect(() => translate({ messages: [{ role: 'system', content: 'Be brief.' }] })).toThrow(
    'nothing to answer',
  )
})

test('context_management: clearing thinking changes nothing sent; any other edit is refused by name', () => {
  const messages = [{ role: 'user', content: 'hi' }]
  const plain = translate({ messages }).chat
  const clearThinking = { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] }
  expect(translate({ messages, context_management: clearThinking }).chat).toEqual(plain)
  expect(translate({ messages, context_management: {} }).chat).toEqual(plain)
  const clearTools = { edits: [clearThinking.edits[0], { type: 'clear_tool_uses_20250919' }] }
  expect(() => translate({ messages, context_management: clearTools })).toThrow(
    "context_management.edits[1] of type 'clear_tool_uses_20250919' is not supported",
  )
  expect(() => translate({ messages, context_management: { trigger: 1 } })).toThrow(
    'context_management.trigger',
  )
  expect(() => translate({ messages, context_management: 'auto' })).toThrow('context_management must be')
  expect(() => translate({ messages, context_management: { edits: {} } })).toThrow('edits must be an array')
})

test('a system message between tool calls and their results is sent after the results', () => {
  const look = { name: 'look', input_schema: { type: 'object' } }
  const { chat } = translate({
    tools: [look],
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'look', input: {} }] },
      { role: 'system', content: 'Today is Monday.' },
      { role: 'system', content: 'Answer in French.' },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'c1', content: 'sunny' },
          { type: 'text', text: 'and now?' },
        ],
      },
    ],
  })
  // Chat suppliers refuse a tool message that does not follow the calls it answers.
  expect(chat.messages).toEqual([
    { role: 'user', content: 'hi' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'look', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    { role: 'system', content: 'Today is Monday.' },
    { role: 'system', content: 'Answer in French.' },
    { role: 'user', content: [{ type: 'text', text: 'and now?' }] },
  ])
})

test('with every tool deferred, tool_choice auto or none sends no tool_choice (none without tools)', () => {
  const messages = [{ role: 'user', content: 'hi' }]
  const deferred = { name: 'mcp__later', input_schema: { type: 'object' }, defer_loading: true }
  for (const type of ['auto', 'none']) {
    const { chat } = translate({
      messages,
      tools: [deferred],
      tool_choice: { type, disable_parallel_tool_use: true },
    })
    // A chat supplier refuses tool_choice and parallel_tool_calls without tools.
    expect(chat).toEqual(translate({ messages }).chat)
  }
  expect(() => translate({ messages, tools: [deferred], tool_choice: { type: 'any' } })).toThrow(
    "tool_choice of type 'any' needs tools",
  )
})

test('output_config.effort xhigh and max ask for the most the supplier has: high', () => {
  const messages = [{ role: 'user', content: 'hi' }]
  for (const effort of ['xhigh', 'max']) {
    const translated = translate({ messages, output_config: { effort } })
    expect(translated.chat.reasoning_effort).toBe('high')
    expect(translated.needs.effort).toBe(true)
  }
  expect(() => translate({ messages, output_config: { effort: 'extreme' } })).toThrow(
    'output_config.effort must be',
  )
})
