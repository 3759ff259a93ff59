// A key's name as every route and tool that takes one checks it (api-keys.ts says what it may be),
// and any other name or label a route shows back (an offer's supplier label) checked the same way.
import { t } from 'elysia'
import { KEY_NAME_MAX, shownTextPattern } from './api-keys.ts'

/** A name or label of min to max characters, none a control or bidirectional formatting character. */
export const shownText = (max: number, min = 1, options: { maxLength?: number } = {}) =>
  t.String({
    pattern: shownTextPattern(min, max),
    error: `must be ${min} to ${max} characters, none of them a control or bidirectional formatting character`,
    description: `${min} to ${max} characters`,
    ...options,
  })

export const keyName = shownText(KEY_NAME_MAX)
