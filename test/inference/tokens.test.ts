// The gateway's own token counts: the answer's text kept until it is needed, counted by the real
// tokenizer in bounded batches, in a worker that starts only when a count is made.
import { describe, expect, test } from 'bun:test'
import { countTokens as reference } from 'gpt-tokenizer'
import {
  countTokens,
  countTokensAside,
  countTokensBy,
  failNextTokenCounts,
  setTokenCountTimeoutMs,
  setTokenizerIdleMs,
  tokenizerStarted,
  tokenizerStarts,
} from '../../src/inference/token-count.ts'
import { TOKEN_PIECE, textPieces } from '../../src/inference/token-pieces.ts'
import { OUTPUT_BATCH_CHARS, OutputTokenCounter, promptTokenCount } from '../../src/inference/tokens.ts'
import { until } from '../helpers/wait.ts'

const AS_TEXT = { disallowedSpecial: new Set<string>() }
const count = (text: string) => reference(text, AS_TEXT)
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i % 97}ord `)

describe('OutputTokenCounter', () => {
  test('an answer below one batch is counted whole, as the tokenizer counts the joined deltas', async () => {
    const deltas = ['Hello', ', wor', 'ld! ', '日本', '語 🎉', ' <|endoftext|>', ...words(100)]
    const counter = new OutputTokenCounter()
    for (const d of deltas) counter.add(d)
    expect(await counter.total()).toBe(count(deltas.join('')))
  })

  test('a long answer is counted in batches cut where a batch filled, nothing dropped or counted twice', async () => {
    const deltas = words(5000) // about 35,000 characters: several batches
    const counter = new OutputTokenCounter()
    for (const d of deltas) counter.add(d)
    let expected = 0
    let batch = ''
    for (const d of deltas) {
      batch += d
      if (batch.length >= OUTPUT_BATCH_CHARS) {
        expected += count(batch)
        batch = ''
      }
    }
    expected += count(batch)
    expect(await counter.total()).toBe(expected)
    // and the batches lose next to nothing against counting the whole answer at once
    expect(Math.abs(expected - count(deltas.join('')))).toBeLessThanOrEqual(10)
  })

  test('total() can be asked twice: the second time counts nothing new', async () => {
    const counter = new OutputTokenCounter()
    counter.add('one two three')
    const first = await counter.total()
    expect(first).toBe(3)
    expect(await counter.total()).toBe(first)
  })

  test('text past what its limit can be billed for is not counted: the bill is the limit all the same', async () => {
    const deltas = words(100_000) // about 700,000 characters: far more than 10 tokens can spell
    const counter = new OutputTokenCounter(10)
    for (const d of deltas) counter.add(d)
    const total = await counter.total()
    // At least the limit (the bill caps there), from a few batches rather than the whole text.
    expect(total).toBeGreaterThanOrEqual(10)
    expect(total).toBeLessThan(count(deltas.join('')) / 20)
    // One delta past the limit on its own (a buffered answer's text) is cut alike.
    const whole = new OutputTokenCounter(10)
    whole.add(deltas.join(''))
    expect(await whole.total()).toBeGreaterThanOrEqual(10)
    expect(await whole.total()).toBeLessThan(count(deltas.join('')) / 20)
  })

  test('no text, no tokens', async () => {
    expect(await new OutputTokenCounter().total()).toBe(0)
  })

  test('a batch whose count failed while the answer streamed is counted again by the count total is given', async () => {
    const deltas = words(1000) // a batch counted on the way, and the rest
    const counter = new OutputTokenCounter()
    failNextTokenCounts(1) // the worker dies under the first batch's count
    for (const d of deltas) counter.add(d)
    failNextTokenCounts(0)
    const total = await counter.total((text) => countTokensBy(text, Date.now() + 60_000))
    expect(Math.abs(total - count(deltas.join('')))).toBeLessThanOrEqual(2)
  })
})

test('countTokensBy asks a failed count again until its deadline, then its error stands', async () => {
  failNextTokenCounts(2)
  expect(await countTokensBy('one two three', Date.now() + 60_000)).toBe(3)
  failNextTokenCounts(Number.POSITIVE_INFINITY)
  try {
    await expect(countTokensBy('one two three', Date.now() + 200)).rejects.toThrow('token worker failed')
  } finally {
    failNextTokenCounts(0)
  }
  expect(await countTokens('one two three')).toBe(3)
})

test('the prompt count is the tokenizer count plus the per-message overheads', async () => {
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Say <|im_start|> hi' }] },
    { role: 'user', content: '' },
  ]
  expect(await promptTokenCount(messages)).toBe(
    3 + 4 + count('Be brief.') + 4 + count('Say <|im_start|> hi') + 4,
  )
})

test('counts made at once, short and long, each get their own answer', async () => {
  const texts = Array.from({ length: 50 }, (_, i) => 'token '.repeat(i * 37 + 1))
  const counts = await Promise.all(
    texts.map((t) => {
      const counter = new OutputTokenCounter()
      counter.add(t)
      return counter.total()
    }),
  )
  expect(counts).toEqual(texts.map(count))
})

test('the tokenizer stays out of the process until a count is made, and out of its main thread after', async () => {
  // A process of its own: in this one the tests above have started the worker.
  const script = `
    const { heapStats } = await import('bun:jsc')
    const { OutputTokenCounter } = await import(${JSON.stringify(`${import.meta.dir}/../../src/inference/tokens.ts`)})
    const { setTokenCountTimeoutMs, tokenizerStarted } = await import(${JSON.stringify(`${import.meta.dir}/../../src/inference/token-count.ts`)})
    // As in the test process (see preload.ts): a cold worker on a loaded machine may pass 10 s.
    setTokenCountTimeoutMs(120_000)
    const counter = new OutputTokenCounter()
    for (let i = 0; i < 500; i++) counter.add('word ')
    const before = tokenizerStarted()
    const total = await counter.total()
    Bun.gc(true)
    const heapMb = heapStats().heapSize / 2 ** 20
    console.log(JSON.stringify({ before, after: tokenizerStarted(), total, heapUnder10Mb: heapMb < 10 }))`
  const proc = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'inherit' })
  const out = JSON.parse((await new Response(proc.stdout).text()).trim()) as Record<string, unknown>
  expect(await proc.exited).toBe(0)
  // The main thread's heap stays small: the tokenizer's ~24 MB of tables are the worker's
  expect(out).toEqual({ before: false, after: true, total: count('word '.repeat(500)), heapUnder10Mb: true })
})

test('an idle worker is let go, and the next count starts a new one that answers the same', async () => {
  setTokenizerIdleMs(50)
  try {
    const counter = new OutputTokenCounter()
    counter.add('the market clears at the cheapest ask')
    const first = await counter.total()
    expect(tokenizerStarted()).toBe(true)
    await until(() => !tokenizerStarted())
    expect(tokenizerStarted()).toBe(false)
    const again = new OutputTokenCounter()
    again.add('the market clears at the cheapest ask')
    expect(await again.total()).toBe(first)
    expect(first).toBe(count('the market clears at the cheapest ask'))
  } finally {
    setTokenizerIdleMs(60_000)
  }
})

describe('text counted in pieces', () => {
  test('in order, each at most TOKEN_PIECE characters, cut at a space near the end, never inside a surrogate pair', () => {
    const prose = words(3_000).join('')
    for (const text of [
      'x'.repeat(200_000),
      prose,
      '😀'.repeat(2_001),
      `${'a'.repeat(999)}😀${'b'.repeat(1_500)}`,
    ]) {
      const pieces = textPieces(text)
      expect(pieces.join('')).toBe(text)
      for (const piece of pieces) {
        expect(piece.length).toBeGreaterThan(0)
        expect(piece.length).toBeLessThanOrEqual(TOKEN_PIECE)
        const last = piece.charCodeAt(piece.length - 1)
        expect(last >= 0xd800 && last <= 0xdbff).toBe(false)
      }
    }
    expect(textPieces('x'.repeat(200_000))).toHaveLength(200)
    expect(
      textPieces(prose)
        .slice(1)
        .every((piece) => piece.startsWith(' ')),
    ).toBe(true)
  })

  test('prose counts as it does whole; a run with no break at most a token more per piece', async () => {
    const prose = words(4_000).join('')
    expect(await countTokens(prose)).toBe(count(prose))
    const run = 'x'.repeat(20_000)
    const pieced = await countTokens(run)
    expect(pieced).toBeGreaterThanOrEqual(count(run))
    expect(pieced).toBeLessThanOrEqual(count(run) + textPieces(run).length)
  })
})

test('a count past its deadline ends the worker; the counts queued behind it are answered by a new one', async () => {
  await countTokens('warm') // a worker up, as in a serving process
  const starts = tokenizerStarts()
  setTokenCountTimeoutMs(50)
  // Millions of letters: far longer to count than its deadline.
  const long = countTokens('x'.repeat(4_000_000))
  setTokenCountTimeoutMs(120_000)
  const queued = countTokens('hello there, world')
  await expect(long).rejects.toThrow('not answered')
  // Ended at the deadline, not when its count would have finished: a new worker took the rest.
  expect(tokenizerStarts()).toBe(starts + 1)
  expect(await queued).toBe(count('hello there, world'))
})

describe('counts aside (count_tokens)', () => {
  test('count as countTokens does, sent in batches of pieces: nothing dropped or counted twice, many at once', async () => {
    const texts = [words(20_000).join(''), 'y'.repeat(150_000), ` ${'日本語 🎉 '.repeat(30_000)}`, 'hi']
    const aside = await Promise.all(texts.map((t) => countTokensAside(t)))
    expect(aside).toEqual(await Promise.all(texts.map((t) => countTokens(t))))
    expect(await countTokensAside('')).toBe(0)
  })

  test('one past its deadline fails alone: the worker is kept, and a billed count asked meanwhile is answered', async () => {
    await countTokens('warm')
    const starts = tokenizerStarts()
    setTokenCountTimeoutMs(50)
    const free = countTokensAside('x'.repeat(4_000_000))
    setTokenCountTimeoutMs(120_000)
    const billed = countTokens('hello there, world')
    await expect(free).rejects.toThrow('not answered')
    expect(await billed).toBe(count('hello there, world'))
    expect(tokenizerStarts()).toBe(starts)
    expect(await countTokensAside('and after')).toBe(count('and after'))
  })
})
