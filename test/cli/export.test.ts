// `svc-gateway export` as a child process on a real Redis: the market's settled attempts as JSON
// lines through a consumer group, each acknowledged once written; killed part-way (SIGKILL) and run
// again, every entry comes out, none lost, and at most the line in flight at the kill repeats.
import { afterAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { formatMicros } from '../../src/money/units.ts'
import { runCli } from '../helpers/cli.ts'
import { admitFor, admitted, clearFor, marketFixture, postOffer, seedAccount } from '../helpers/market.ts'
import { testRedisUrl } from '../helpers/stack.ts'

const fixtures: ReturnType<typeof marketFixture>[] = []
afterAll(() => {
  for (const fx of fixtures) fx.close()
})

interface Line {
  id: string
  attemptId: string
  supportReference: string
  accountId: string
  status: string
  costUsdc: string
}

async function clearedMarket(count: number) {
  const fx = marketFixture()
  fixtures.push(fx)
  await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  const settle = async () => {
    await clearFor(fx, admitted(await admitFor(fx, acct)).attemptId, 700)
  }
  // In parallel batches: the Stream's order is the scripts' order either way.
  for (let i = 0; i < count; i += 100)
    await Promise.all(Array.from({ length: Math.min(100, count - i) }, settle))
  const env = { REDIS_URL: testRedisUrl(), SVC_REDIS_PREFIX: fx.keys.prefix }
  const ids = async () =>
    ((await fx.store.xrange(fx.keys.endedAttempts, '-', '+')) as [string, string[]][]).map(([id]) => id)
  return { fx, acct, env, settle, ids }
}

const lines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line)

describe('svc-gateway export', () => {
  test('--once writes every ended attempt once, in order, and the next run only what is new', async () => {
    const market = await clearedMarket(30)
    const first = await runCli(['export', '--group', 'warehouse', '--once'], market.env)
    expect(first.code).toBe(0)
    const out = lines(first.stdout)
    expect(out.map((l) => l.id)).toEqual(await market.ids())
    expect(out[0]).toMatchObject({ accountId: market.acct, status: 'completed', costUsdc: formatMicros(350) })
    // The fixtures' attempt ids are UUIDs, no request's reference: named whole (see 'an export line').
    expect(out[0]!.supportReference).toBe(out[0]!.attemptId)
    expect(lines((await runCli(['export', '--group', 'warehouse', '--once'], market.env)).stdout)).toEqual([])
    for (let i = 0; i < 5; i++) await market.settle()
    const next = lines((await runCli(['export', '--group', 'warehouse', '--once'], market.env)).stdout)
    expect(next.map((l) => l.id)).toEqual((await market.ids()).slice(30))
    // Another group reads the whole Stream on its own.
    expect(lines((await runCli(['export', '--group', 'audit', '--once'], market.env)).stdout)).toHaveLength(
      35,
    )
    // Nothing pending: every line written was acknowledged.
    const pending = (await market.fx.store.xpending(market.fx.keys.endedAttempts, 'warehouse')) as [
      number,
      ...unknown[],
    ]
    expect(pending[0]).toBe(0)
  })

  test('killed part-way and run again: nothing lost, at most the line in flight repeated', async () => {
    const market = await clearedMarket(3_000)
    const child = Bun.spawn(
      [process.execPath, join(import.meta.dir, '../../src/main.ts'), 'export', '--group', 'wh'],
      {
        env: { PATH: process.env.PATH, ...market.env },
        stdout: 'pipe',
        stderr: 'pipe',
      },
    )
    // Read a few lines, then stop reading: the pipe fills and the export blocks on its next write.
    const reader = child.stdout.getReader()
    const decoder = new TextDecoder()
    let text = ''
    while (text.split('\n').length < 50) {
      const { value, done } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    child.kill('SIGKILL')
    await child.exited
    // What was written before the kill is still in the pipe: read it all.
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    const before = lines(text.slice(0, text.lastIndexOf('\n') + 1))
    expect(before.length).toBeGreaterThan(0)
    expect(before.length).toBeLessThan(3_000)

    const resumed = await runCli(['export', '--group', 'wh', '--once'], market.env)
    expect(resumed.code).toBe(0)
    const after = lines(resumed.stdout)
    const all = [...before, ...after].map((l) => l.id)
    expect([...new Set(all)]).toEqual(await market.ids())
    expect(all.length - new Set(all).size).toBeLessThanOrEqual(1)
  })

  test('entries trimmed before a group read them are counted on stderr, and the rest exported', async () => {
    const market = await clearedMarket(10)
    expect(lines((await runCli(['export', '--group', 'wh', '--once'], market.env)).stdout)).toHaveLength(10)
    for (let i = 0; i < 10; i++) await market.settle()
    await market.fx.store.xtrim(market.fx.keys.endedAttempts, 'MAXLEN', 4)
    const late = await runCli(['export', '--group', 'wh', '--once'], market.env)
    expect(late.stderr).toContain(
      'export: 6 settled attempts were trimmed from the Stream before group wh read them',
    )
    expect(lines(late.stdout).map((l) => l.id)).toEqual(await market.ids())
  })

  test('a missing or malformed group is a usage error (exit 2) that creates nothing', async () => {
    const market = await clearedMarket(1)
    for (const args of [
      ['export'],
      ['export', '--group'],
      ['export', '--group', 'a b'],
      ['export', 'x', '--group', 'g'],
    ]) {
      const result = await runCli(args, market.env)
      expect([args.join(' '), result.code]).toEqual([args.join(' '), 2])
      expect(result.stderr).toContain('usage: svc-gateway export')
    }
    expect(await market.fx.store.xinfo('GROUPS', market.fx.keys.endedAttempts)).toEqual([])
  })
})

describe('an export line', () => {
  test("names the attempt's request by its support reference; an id that is not an attempt's, whole", async () => {
    const { exportLine } = await import('../../src/cli/export.ts')
    const line = (attempt: string) =>
      JSON.parse(
        exportLine(['1795000000000-0', ['attempt', attempt, 'costUsdc', '1500', 'status', 'cleared']]),
      )
    expect(line('sr_abcdefghijklmnopqrst.2')).toMatchObject({
      attemptId: 'sr_abcdefghijklmnopqrst.2',
      supportReference: 'sr_abcdefghijklmnopqrst',
      costUsdc: '0.001500',
    })
    expect(line('imported-attempt').supportReference).toBe('imported-attempt')
  })
})
