// Anthropic's Messages API (/v1/messages) for the OpenAPI document; merged into OPERATIONS
// (operations.ts). Its errors are Anthropic's shape, so they are declared here, not by reference.
import { headers } from './components.ts'
import { type Operation, ok } from './operation-parts.ts'

const messagesError = (description: string, ...extra: Parameters<typeof headers>) => ({
  description,
  headers: headers('SupportReference', 'RetryAfter', ...extra),
  content: { 'application/json': { schema: { $ref: '#/components/schemas/MessagesError' } } },
})

/** The same refusals as chat, in Anthropic's error types. */
const MESSAGES_ERRORS = {
  '400': messagesError('invalid_request_error: a malformed field, or one that cannot be honoured, named'),
  '401': messagesError('authentication_error: no key, an unknown key, or a Cookie header'),
  '402': messagesError('billing_error (code insufficient_balance): confirmed USDC too low; no money moved'),
  '403': messagesError("permission_error (code key_limit_exceeded): past the key's spending limit"),
  '404': messagesError('not_found_error: unknown model'),
  '413': messagesError('request_too_large (code body_too_large): the body is over SVC_MAX_BODY_BYTES'),
  '429': messagesError('rate_limit_error: an in-flight cap; wait Retry-After seconds'),
  '500': messagesError('api_error (settle_failed, internal_error): nothing charged; safe to retry'),
  '502': messagesError('api_error (provider_error): no supplier completed; safe to retry'),
  '503': messagesError(
    'overloaded_error: no eligible supply now (no_eligible_supply carries buyerMaxCents and cheapestPostedCents), or store_unavailable',
    'ErrorCode',
    'BuyerMaxCents',
    'CheapestPostedCents',
    'RoutableDiemAboveMax',
  ),
}

export const MESSAGES_OPERATIONS: Record<string, Operation> = {
  'POST /v1/messages': {
    summary: "Anthropic's Messages API over the same market, key and balance as chat",
    description:
      "The key as x-api-key or Bearer; anthropic-version is accepted. Request: model, max_tokens (required), system (string or text blocks), messages with text, image (base64 or url), tool_use and tool_result blocks, and system messages among them (sent where they stand, after the tool results when between them and their calls), tools (input_schema), tool_choice (auto, any, tool, none; disable_parallel_tool_use; auto and none send nothing when no tool is sent), stop_sequences, temperature, top_p, top_k, metadata.user_id, thinking (enabled: budget_tokens as the supplier's reasoning effort, below 4096 low, below 16384 medium, else high; adaptive; disabled), output_config (effort: low, medium, high, xhigh and max as high; format json_schema), stream; context_management edits that clear thinking (earlier thinking is never sent); cache_control, service_tier auto and a tool's eager_input_streaming, defer_loading false and allowed_callers [direct] are accepted as hints; a tool with defer_loading true is checked and not sent (no tool search runs here). Anything else (server tools, documents, a tool's input_examples, container, mcp_servers ...) or a block the model cannot take (image, tools, thinking) is a 400 naming it, as is what Anthropic refuses (temperature outside 0 to 1, two tools of one name, a tool_result answering no earlier tool_use, an empty text block). Answer: a message with thinking, text and tool_use blocks (input parsed), stop_reason end_turn, max_tokens, stop_sequence (only when the supplier names the sequence it matched), tool_use or refusal, usage input_tokens (not read from cache), output_tokens, cache_read_input_tokens (when the supplier reports cached tokens), the cost headers. Streamed: message_start, ping, content_block_start / content_block_delta (text_delta, thinking_delta, input_json_delta: a tool call's arguments as they come, once its block opens when the call starts; arguments that never begin a JSON object go whole as its block closes, as the buffered answer's input) / content_block_stop, then after the clear message_delta (stop_reason, billed usage, and costUsdc, clearingPriceCents, supportReference) and message_stop; ping on silence. A stream cut short, released (nothing charged) or not cleared ends with an error event {type: error, error: {type, message, code, supportReference, costUsdc when charged}} instead.",
    tags: ['inference'],
    security: 'apiKey|anthropicKey',
    ok: {
      ...ok('The message', '200', {
        headers: headers('SupportReference', 'CostUsdc', 'ClearingPriceCents', 'BalanceRemaining'),
        content: {
          'application/json': {
            schema: { type: 'object', description: 'buffered (stream omitted or false)' },
          },
          'text/event-stream': {
            schema: { type: 'string', description: "SSE (stream: true): Anthropic's events" },
          },
        },
      }),
      ...MESSAGES_ERRORS,
    },
    errors: [],
  },
  'POST /v1/messages/count_tokens': {
    summary: "The prompt's input_tokens by the gateway's tokenizer; nothing held, charged or written",
    description:
      'The same prompt fields as /v1/messages (model, system, messages, tools, tool_choice, output_config), counted as the message_start of a stream counts them; max_tokens is not needed; a field /v1/messages refuses (mcp_servers, container ...) is refused here by name. The count is the tokenizer of the gateway, not of the supplier: close, not exact. Free, so it waits behind the counts paid requests need, and a wallet has a few in flight at most (429 count_concurrency_limit past them).',
    tags: ['inference'],
    security: 'apiKey|anthropicKey',
    ok: {
      ...ok('{input_tokens}'),
      '400': MESSAGES_ERRORS['400'],
      '401': MESSAGES_ERRORS['401'],
      '404': MESSAGES_ERRORS['404'],
      '413': MESSAGES_ERRORS['413'],
      '429': messagesError(
        'rate_limit_error (code count_concurrency_limit): the wallet has its counts in flight; wait Retry-After seconds',
      ),
      '503': messagesError(
        'overloaded_error (code count_unavailable): not counted in time; wait Retry-After seconds',
      ),
    },
    errors: [],
  },
}
