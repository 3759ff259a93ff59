// The tool calls of a supplier's chat stream, put together from their pieces. Suppliers (OpenAI,
// vLLM) may interleave parallel calls: pieces of call 0 after call 1 has opened; a call's id and
// name may come after its first arguments. No call is known complete before the stream ends. Some
// (DeepSeek, GLM) give parallel calls one id: a call keeps the supplier's id only when no earlier
// call of the answer has it, else the wire format names it, so a client tells its calls apart.

/** One tool-call entry of a chunk's `delta.tool_calls`. */
export interface ToolCallDelta {
  index?: unknown
  id?: unknown
  function?: { name?: unknown; arguments?: unknown }
}

export interface StreamCall {
  /** Its place among the stream's calls, in order of first appearance. */
  ordinal: number
  /** The supplier's index, its id and name once sent (null until then), its arguments so far. */
  index: number
  id: string | null
  name: string | null
  args: string
}

export class StreamToolCalls {
  readonly list: StreamCall[] = []
  /** The latest call under each supplier index. */
  private readonly byIndex = new Map<number, StreamCall>()
  /** The supplier's ids the calls have taken. */
  private readonly ids = new Set<string>()

  /**
   * Adds one entry's pieces to its call; returns the call, whether the entry opened it, and the
   * arguments piece it brought. An entry that brings nothing opens no call: null.
   */
  take(delta: ToolCallDelta): { call: StreamCall; piece: string; opened: boolean } | null {
    const index = typeof delta.index === 'number' ? delta.index : 0
    const id = typeof delta.id === 'string' && delta.id !== '' ? delta.id : null
    const name =
      typeof delta.function?.name === 'string' && delta.function.name !== '' ? delta.function.name : null
    const piece = typeof delta.function?.arguments === 'string' ? delta.function.arguments : ''
    let call = this.byIndex.get(index)
    if (call === undefined && id === null && name === null && piece === '') return null
    // A supplier that gives no index (each call whole in its chunk) still names each call by its id.
    const another = call !== undefined && id !== null && call.id !== null && id !== call.id && name !== null
    const opened = call === undefined || another
    if (opened) {
      call = { ordinal: this.list.length, index, id: null, name: null, args: '' }
      this.list.push(call)
      this.byIndex.set(index, call)
    }
    const found = call!
    if (found.id === null && id !== null && !this.ids.has(id)) {
      found.id = id
      this.ids.add(id)
    }
    found.name ??= name
    found.args += piece
    return { call: found, piece, opened }
  }
}

/** Each call's id in a buffered answer, as a stream gives it: the supplier's, unless empty or taken; else `fallback`. */
export function ownCallIds(ids: unknown[], fallback: (index: number) => string): string[] {
  const taken = new Set<string>()
  return ids.map((id, index) => {
    const own = typeof id === 'string' && id !== '' && !taken.has(id) ? id : fallback(index)
    taken.add(own)
    return own
  })
}
