// The secrets scans' tools: every response kept as one searchable text, every value of a keyspace
// read whatever its type.
import type { Store } from '../../src/redis/store.ts'
import { keysUnder } from './stack.ts'

export interface Seen {
  what: string
  text: string
}

/** Keeps a response's status line, every header and the whole body, as one searchable text. */
export async function keep(seen: Seen[], what: string, response: Response): Promise<Response> {
  const body = await response.text()
  const headers = [...response.headers].map(([k, v]) => `${k}: ${v}`).join('\n')
  seen.push({ what, text: `${response.status}\n${headers}\n\n${body}` })
  return new Response(body, { status: response.status, headers: response.headers })
}

/** Every value under a keyspace, as text, whatever the key's type. */
export async function storedValues(store: Store, base: string): Promise<string> {
  const parts: string[] = []
  for (const key of await keysUnder(store, base)) {
    const type = await store.type(key)
    if (type === 'string') parts.push((await store.get(key)) ?? '')
    else if (type === 'hash') parts.push(JSON.stringify(await store.hgetall(key)))
    else if (type === 'set') parts.push(JSON.stringify(await store.smembers(key)))
    else if (type === 'zset') parts.push(JSON.stringify(await store.zrange(key, 0, -1, 'WITHSCORES')))
    else if (type === 'list') parts.push(JSON.stringify(await store.lrange(key, 0, -1)))
    else if (type === 'stream') parts.push(JSON.stringify(await store.xrange(key, '-', '+')))
    else parts.push(`unread ${type} ${key}`)
  }
  return parts.join('\n')
}

/** Where each named secret shows: in the log text, or in any text kept (responses, Redis). */
export function leaksOf(secrets: Record<string, string>, logs: string, seen: Seen[]): string[] {
  const leaks: string[] = []
  for (const [name, secret] of Object.entries(secrets)) {
    if (logs.includes(secret)) leaks.push(`${name} in the log`)
    for (const { what, text } of seen) if (text.includes(secret)) leaks.push(`${name} in ${what}`)
  }
  return leaks
}
