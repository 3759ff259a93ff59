// The upstream response parser (src/upstream/response-parser.ts) fed a supplier's answer one byte
// at a time: this tree's parser against the one at a base revision, read from git, in one run.
// The answer is the most a supplier can make the parser hold: a head near its 64 KiB limit, then
// chunk-size lines near their 4 KiB limit and two long trailer lines.
//   bun bench/parser-trickle.ts [base=<git revision, default HEAD>] [rounds=5]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ResponseParser } from '../src/upstream/response-parser.ts'
import { median } from './stats.ts'

type Parser = { feed(bytes: Uint8Array): void; readonly done: boolean }
type ParserClass = new (events: {
  head(head: unknown): void
  body(bytes: Uint8Array): void
  end(): void
}) => Parser

const args = Object.fromEntries(process.argv.slice(2).map((arg) => arg.split('=', 2) as [string, string]))
const base = args.base ?? 'HEAD'
const rounds = Number(args.rounds ?? 5)

const head = (kib: number) =>
  `HTTP/1.1 200 OK\r\nx-filler: ${'f'.repeat(kib * 1024)}\r\ncontent-length: 2\r\n\r\nok`
// Two head sizes: rescanning costs 16 times as much for 4 times the head, resuming 4 times.
const answers = {
  'head, 16 KiB': head(16),
  'head, 63 KiB': head(63),
  'chunk lines and trailers':
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n' +
    `5;${'e'.repeat(4000)}\r\nhello\r\n`.repeat(8) +
    `0\r\nx-t: ${'t'.repeat(30_000)}\r\nx-u: ${'u'.repeat(30_000)}\r\n\r\n`,
}

async function baseParser(): Promise<ParserClass> {
  const source = Bun.spawnSync(['git', 'show', `${base}:src/upstream/response-parser.ts`])
  if (source.exitCode !== 0) throw new Error(`git show ${base}: ${source.stderr.toString()}`)
  const dir = mkdtempSync(join(tmpdir(), 'parser-base-'))
  const file = join(dir, 'response-parser.ts')
  writeFileSync(file, source.stdout)
  try {
    return (await import(file)).ResponseParser as ParserClass
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Milliseconds to parse `bytes` fed one byte at a time. */
function trickle(Parser: ParserClass, bytes: Uint8Array): number {
  const parser = new Parser({ head() {}, body() {}, end() {} })
  const start = performance.now()
  for (let i = 0; i < bytes.length; i++) parser.feed(bytes.subarray(i, i + 1))
  const ms = performance.now() - start
  if (!parser.done) throw new Error('the answer did not end')
  return ms
}

const Base = await baseParser()
const commit = Bun.spawnSync(['git', 'rev-parse', '--short', base]).stdout.toString().trim()
console.log(`one byte a feed, median of ${rounds} rounds; base ${commit}, new this tree`)
console.log('| answer | bytes | base ms | new ms | base / new |')
console.log('|---|---|---|---|---|')
for (const [name, text] of Object.entries(answers)) {
  const bytes = Buffer.from(text, 'latin1')
  const times = { base: [] as number[], new: [] as number[] }
  for (let round = 0; round < rounds; round++) {
    // Alternated, so neither always runs on a warmer machine.
    times.base.push(trickle(Base, bytes))
    times.new.push(trickle(ResponseParser as ParserClass, bytes))
  }
  const [old, now] = [median(times.base), median(times.new)]
  console.log(
    `| ${name} | ${bytes.length} | ${old.toFixed(1)} | ${now.toFixed(1)} | ${(old / now).toFixed(0)} x |`,
  )
}
