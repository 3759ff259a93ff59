// A key's name as every route and tool that takes one checks it (api-keys.ts says what it may be).
import { t } from 'elysia'
import { KEY_NAME_MAX, KEY_NAME_PATTERN } from './api-keys.ts'

export const keyName = t.String({
  pattern: KEY_NAME_PATTERN,
  error: `must be 1 to ${KEY_NAME_MAX} characters, none of them a control or bidirectional formatting character`,
  description: `1 to ${KEY_NAME_MAX} characters`,
})
