// A tool call's arguments read as they stream: whether what came so far can still begin a JSON
// object, whether the object is closed, and the longest beginning that has one meaning. A client
// parses streamed arguments as partial JSON (the Anthropic SDK at every read), so only a valid
// beginning may be streamed to it; a closed object is a whole call, since nothing but whitespace
// can follow it in valid JSON. Arguments that begin an object but are cut short or turn invalid
// mean the object their longest "safe" beginning makes once its open string and brackets close:
// a beginning that ends after a whole value, after a nested opening bracket, or inside a string
// value (never inside a key, a number's sign, a literal or an escape). Arguments with no safe
// beginning (`{'q': 1}`, `{"a":tru`) have none to stream and stay text. The stream sends only up to that
// point and the closers at the call's end; a buffered answer reads the same object.

type Mode = 'start' | 'key' | 'colon' | 'value' | 'after' | 'string' | 'number' | 'literal' | 'end'
type NumberState = 'minus' | 'zero' | 'int' | 'dot' | 'frac' | 'e' | 'esign' | 'exp'

const WHITESPACE = new Set([' ', '\t', '\n', '\r'])
const ESCAPES = new Set(['"', '\\', '/', 'b', 'f', 'n', 'r', 't'])
const HEX = /^[0-9a-fA-F]$/
const DIGIT = /^[0-9]$/
const WHOLE_NUMBER = new Set<NumberState>(['zero', 'int', 'frac', 'exp'])

export class JsonPrefix {
  /** What came so far can begin a JSON object (once false, for good). */
  valid = true
  /** The first thing after any whitespace was `{`. */
  began = false
  /** The length of the longest safe beginning, and what closes it into a whole object. */
  safe = 0
  closing = ''
  /** The length up to the top-level object's closing brace; 0 while it has not closed. */
  end = 0
  private length = 0
  private mode: Mode = 'start'
  /** The brackets open, innermost first, as the text that closes them. */
  private closers = ''
  /** Just after `{` or `[`: a closer may come, a comma may not. */
  private first = false
  private inKey = false
  /** 0 outside an escape; 1 after a backslash; 2 to 5 in \u's hex digits. */
  private escape = 0
  private number: NumberState = 'int'
  private literal = ''
  private literalAt = 0

  /** The top-level object has opened: a beginning worth sending (not only whitespace). */
  get opened(): boolean {
    return this.valid && this.began
  }

  /** The top-level object is closed: the arguments are whole. */
  get closed(): boolean {
    return this.valid && this.mode === 'end'
  }

  /**
   * The top-level object closed, whatever came after it: the arguments are whole, the first
   * `end` characters; anything after them is no part of them.
   */
  get whole(): boolean {
    return this.end > 0
  }

  feed(text: string): void {
    for (const char of text) {
      if (!this.valid) return
      if (!this.step(char)) {
        this.valid = false
        return
      }
      this.length += char.length
      this.mark()
    }
  }

  /** Notes the text so far as the safe beginning when it is one. */
  private mark(): void {
    const { mode } = this
    if (mode === 'end' && this.end === 0) this.end = this.length
    // The top-level `{` alone means nothing yet: arguments that turn invalid there stay text.
    const nested = this.closers.length > 1
    if (
      mode === 'after' ||
      mode === 'end' ||
      ((mode === 'key' || mode === 'value') && this.first && nested)
    ) {
      this.setSafe(this.closers)
    } else if (mode === 'string' && !this.inKey && this.escape === 0) {
      this.setSafe(`"${this.closers}`)
    } else if (mode === 'number' && WHOLE_NUMBER.has(this.number)) {
      this.setSafe(this.closers)
    }
  }

  private setSafe(closing: string): void {
    this.safe = this.length
    this.closing = closing
  }

  private open(closer: '}' | ']'): void {
    this.closers = closer + this.closers
    this.mode = closer === '}' ? 'key' : 'value'
    this.first = true
  }

  /** Closes the innermost bracket if `char` is its closer. */
  private close(char: string): boolean {
    if (this.closers[0] !== char) return false
    this.closers = this.closers.slice(1)
    this.mode = this.closers === '' ? 'end' : 'after'
    this.first = false
    return true
  }

  /** Takes one character; false when it cannot continue the object. */
  private step(char: string): boolean {
    switch (this.mode) {
      case 'start':
        if (WHITESPACE.has(char)) return true
        if (char !== '{') return false
        this.began = true
        this.open('}')
        return true
      case 'end':
        return WHITESPACE.has(char)
      case 'key':
        if (WHITESPACE.has(char)) return true
        if (char === '}' && this.first) return this.close(char)
        if (char !== '"') return false
        this.mode = 'string'
        this.inKey = true
        return true
      case 'colon':
        if (WHITESPACE.has(char)) return true
        if (char !== ':') return false
        this.mode = 'value'
        this.first = false
        return true
      case 'value':
        return this.value(char)
      case 'after':
        if (WHITESPACE.has(char)) return true
        if (char === ',') {
          this.mode = this.closers[0] === '}' ? 'key' : 'value'
          this.first = false
          return true
        }
        return this.close(char)
      case 'string':
        return this.string(char)
      case 'number':
        return this.numberStep(char)
      case 'literal':
        if (char !== this.literal[this.literalAt]) return false
        this.literalAt++
        if (this.literalAt === this.literal.length) this.mode = 'after'
        return true
    }
  }

  private value(char: string): boolean {
    if (WHITESPACE.has(char)) return true
    if (char === ']' && this.first) return this.close(char)
    this.first = false
    if (char === '{') this.open('}')
    else if (char === '[') this.open(']')
    else if (char === '"') {
      this.mode = 'string'
      this.inKey = false
    } else if (char === '-' || DIGIT.test(char)) {
      this.mode = 'number'
      this.number = char === '-' ? 'minus' : char === '0' ? 'zero' : 'int'
    } else if (char === 't' || char === 'f' || char === 'n') {
      this.mode = 'literal'
      this.literal = char === 't' ? 'true' : char === 'f' ? 'false' : 'null'
      this.literalAt = 1
    } else return false
    return true
  }

  private string(char: string): boolean {
    if (this.escape === 1) {
      if (char === 'u') this.escape = 2
      else if (ESCAPES.has(char)) this.escape = 0
      else return false
      return true
    }
    if (this.escape > 1) {
      if (!HEX.test(char)) return false
      this.escape = this.escape === 5 ? 0 : this.escape + 1
      return true
    }
    if (char === '"') {
      this.mode = this.inKey ? 'colon' : 'after'
      return true
    }
    if (char === '\\') {
      this.escape = 1
      return true
    }
    return char >= ' '
  }

  private numberStep(char: string): boolean {
    const digit = DIGIT.test(char)
    const n = this.number
    if (n === 'minus') {
      if (!digit) return false
      this.number = char === '0' ? 'zero' : 'int'
    } else if ((n === 'dot' || n === 'frac') && digit) this.number = 'frac'
    else if ((n === 'e' || n === 'esign' || n === 'exp') && digit) this.number = 'exp'
    else if (n === 'int' && digit) this.number = 'int'
    else if (n === 'e' && (char === '+' || char === '-')) this.number = 'esign'
    else if ((n === 'zero' || n === 'int') && char === '.') this.number = 'dot'
    else if ((n === 'zero' || n === 'int' || n === 'frac') && (char === 'e' || char === 'E'))
      this.number = 'e'
    else {
      if (!WHOLE_NUMBER.has(n)) return false
      this.mode = 'after'
      return this.step(char)
    }
    return true
  }
}

/**
 * The object arguments mean, when they began one: the whole object, or the one their safe
 * beginning makes; null when they have no safe beginning.
 */
export function objectOf(args: string): Record<string, unknown> | null {
  const json = new JsonPrefix()
  json.feed(args)
  if (json.safe === 0) return null
  return JSON.parse(args.slice(0, json.safe) + json.closing) as Record<string, unknown>
}

/**
 * Arguments as a client gets them as text: once their object has closed, the object and nothing
 * after it (only whitespace may follow one in valid JSON); otherwise all of them.
 */
export function argumentsText(args: string): string {
  const json = new JsonPrefix()
  json.feed(args)
  return json.whole ? args.slice(0, json.end) : args
}
