// Streamed tool-call arguments read as JSON piece by piece: a beginning that a client's partial
// JSON parse takes, and the point where the object is whole, at every way of cutting the text.
import { describe, expect, test } from 'bun:test'
import { JsonPrefix, objectOf } from '../../src/inference/json-prefix.ts'

/** [arguments, can begin an object, is a whole object] */
const CASES: [string, boolean, boolean][] = [
  ['{"a":1}', true, true],
  ['{"a":[1,2,{"b":null}],"c":"x\\"y\\u00e9","d":true,"e":false}', true, true],
  ['  {"a":-1.5e3}  ', true, true],
  ['{}', true, true],
  ['{"q":"a\\"b 😀 ü"}', true, true],
  ['', true, false],
  ['{"a":1', true, false],
  ['{"a":tru', true, false],
  ['{"a":"x\\u00', true, false],
  ["{'a':1}", false, false],
  ['[1]', false, false],
  ['"s"', false, false],
  ['{"a":trux}', false, false],
  ['{"a":1}x', false, false],
  ['{"a":01}', false, false],
  ['{"a":1.}', false, false],
  ['{"a":1,}', false, false],
  ['{"a" 1}', false, false],
  ['{"a":"x\\q"}', false, false],
  ['{"a":[1}', false, false],
  ['{"a":"line\nbreak"}', false, false],
]

describe('JsonPrefix', () => {
  for (const [args, valid, closed] of CASES) {
    test(JSON.stringify(args), () => {
      for (let cut = 1; cut <= Math.max(1, args.length); cut++) {
        const json = new JsonPrefix()
        for (let at = 0; at < args.length; at += cut) json.feed(args.slice(at, at + cut))
        expect([cut, json.valid, json.closed]).toEqual([cut, valid, closed])
      }
    })
  }

  test('whitespace alone has not opened an object; a brace has', () => {
    const json = new JsonPrefix()
    json.feed('  \n')
    expect(json.opened).toBe(false)
    json.feed('{')
    expect(json.opened).toBe(true)
    json.feed("'")
    expect([json.valid, json.opened]).toEqual([false, false])
  })

  test('every closed object parses', () => {
    for (const [args, , closed] of CASES) if (closed) expect(() => JSON.parse(args)).not.toThrow()
  })

  test('every beginning of an object, whole, cut or turned invalid, closes into one object', () => {
    for (const [args] of CASES) {
      for (let cut = 0; cut <= args.length; cut++) {
        const text = args.slice(0, cut)
        const object = objectOf(text)
        if (object !== null) expect(typeof object).toBe('object')
      }
    }
    expect(objectOf('{"a":1,"b":"x')).toEqual({ a: 1, b: 'x' })
    expect(objectOf('{"a":1,}')).toEqual({ a: 1 })
    expect(objectOf('{"a":tru')).toBeNull()
    expect(objectOf("{'a':1}")).toBeNull()
    expect(objectOf('{}')).toEqual({})
  })
})
