// A tool call's arguments read as they stream (src/inference/json-prefix.ts) against
// @streamparser/json's parser fed the same pieces, which only validates: µs per call of 1,238
// characters in pieces of 4. Usage: bun bench/json-prefix.ts [rounds]
import { JSONParser } from '@streamparser/json'
import { JsonPrefix } from '../src/inference/json-prefix.ts'

const rounds = Number(process.argv[2] ?? 2000)
const fields: Record<string, unknown> = {}
for (let i = 0; i < 40; i++) {
  fields[`field_${i}`] =
    i % 3 === 0 ? `value with "escape" ${i} ünïcode` : i % 3 === 1 ? i * 1.5 : [true, null, { n: i }]
}
const text = JSON.stringify(fields)
const pieces: string[] = []
for (let i = 0; i < text.length; i += 4) pieces.push(text.slice(i, i + 4))

function ours(): boolean {
  const prefix = new JsonPrefix()
  for (const piece of pieces) prefix.feed(piece)
  return prefix.closed
}

function library(): boolean {
  let ended = false
  const parser = new JSONParser({ paths: ['$'], keepStack: false })
  parser.onValue = () => {}
  parser.onEnd = () => {
    ended = true
  }
  for (const piece of pieces) parser.write(piece)
  return ended
}

function perCall(run: () => boolean): number {
  const started = performance.now()
  for (let r = 0; r < rounds; r++) if (!run()) throw new Error('the arguments did not close')
  return ((performance.now() - started) * 1000) / rounds
}

for (let round = 1; round <= 3; round++) {
  const library_ = perCall(library)
  const ours_ = perCall(ours)
  console.log(
    `round ${round}: @streamparser/json ${library_.toFixed(1)} µs, ours ${ours_.toFixed(1)} µs per call`,
  )
}
