// A tool call's arguments read as they stream: whether what came so far can still begin a JSON
// object, and whether the object is closed. A client parses streamed arguments as partial JSON
// (the Anthropic SDK at every read), so only a valid beginning may be streamed to it; and a closed
// object is a whole call, since nothing but whitespace can follow it in valid JSON.
import { JSONParser } from '@streamparser/json'

const JSON_WHITESPACE = /^[ \t\n\r]*/

export class JsonPrefix {
  /** What came so far can begin a JSON object (once false, for good). */
  valid = true
  private began = false
  private ended = false
  // Only the whole object is asked for: the parser keeps no value of its parts.
  private readonly parser = new JSONParser({ paths: ['$'], keepStack: false })

  constructor() {
    this.parser.onValue = () => {}
    this.parser.onEnd = () => {
      this.ended = true
    }
    this.parser.onError = () => {
      this.valid = false
    }
  }

  /** The top-level object has opened: a beginning worth sending (not only whitespace). */
  get opened(): boolean {
    return this.valid && this.began
  }

  /** The top-level object is closed: the arguments are whole. */
  get closed(): boolean {
    return this.valid && this.ended
  }

  feed(text: string): void {
    if (!this.valid) return
    if (!this.began) {
      const first = text.slice(JSON_WHITESPACE.exec(text)![0].length)
      if (first === '') return
      if (first[0] !== '{') {
        this.valid = false
        return
      }
      this.began = true
    }
    if (this.ended) {
      // Nothing but whitespace may follow the object.
      if (JSON_WHITESPACE.exec(text)![0].length !== text.length) this.valid = false
      return
    }
    try {
      this.parser.write(text)
    } catch {
      this.valid = false
    }
  }
}
