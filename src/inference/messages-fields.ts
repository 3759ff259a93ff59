// The top-level fields of a Messages request beyond its prompt and sampling: any field the facade
// does not know is refused by name, as are hints that would change what the supplier is sent.
import { badRequest } from '../errors.ts'
import { isRecord, shown } from './json-object.ts'

const invalid = (message: string) => badRequest(message, 'invalid_request')
const unsupported = (message: string) => badRequest(message, 'unsupported_parameter')

/** Fields the facade honours (or accepts as hints); any other is refused by name. */
const KNOWN_FIELDS = new Set([
  'model',
  'messages',
  'system',
  'max_tokens',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'tools',
  'tool_choice',
  'metadata',
  'thinking',
  'output_config',
  'cache_control',
  'service_tier',
  'context_management',
])

export function metadataUser(metadata: unknown): Record<string, unknown> {
  if (metadata == null) return {}
  if (!isRecord(metadata)) throw invalid('metadata must be an object')
  for (const key of Object.keys(metadata)) {
    if (key !== 'user_id') throw unsupported(`metadata.${key} is not supported (user_id is)`)
  }
  const user = metadata.user_id
  if (user == null) return {}
  if (typeof user !== 'string' || user.length > 256) throw invalid('metadata.user_id must be a string')
  return { user }
}

/**
 * Edits that clear earlier thinking change nothing sent: the supplier never gets thinking back.
 * Any other edit (clearing tool results) would change the prompt, and is refused by name.
 */
function checkContextManagement(value: unknown): void {
  if (value == null) return
  if (!isRecord(value)) throw invalid('context_management must be an object')
  for (const key of Object.keys(value)) {
    if (key !== 'edits') throw unsupported(`context_management.${key} is not supported`)
  }
  if (value.edits == null) return
  if (!Array.isArray(value.edits)) throw invalid('context_management.edits must be an array')
  value.edits.forEach((edit, i) => {
    const type = isRecord(edit) ? edit.type : typeof edit
    if (typeof type !== 'string' || !type.startsWith('clear_thinking_')) {
      throw unsupported(
        `context_management.edits[${i}] of type '${shown(type)}' is not supported (clear_thinking is)`,
      )
    }
  })
}

export function checkOtherFields(body: Record<string, unknown>): void {
  for (const key of Object.keys(body)) {
    if (!KNOWN_FIELDS.has(key)) throw unsupported(`${key} is not supported on /v1/messages`)
  }
  if (body.service_tier != null && body.service_tier !== 'auto' && body.service_tier !== 'standard_only') {
    throw unsupported(`service_tier '${shown(body.service_tier)}' is not supported`)
  }
  checkContextManagement(body.context_management)
}
