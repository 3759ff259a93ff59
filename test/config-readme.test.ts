// README's Configuration tables are what src/config*.ts reads: every variable the code reads has a
// row, every SVC_ row names a variable the code reads, and each integer's default and bounds are
// the ones the code checks against, so an operator's value is judged as the README says.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, loadGatewayConfig } from '../src/config.ts'

const ROOT = join(import.meta.dir, '..')
const CONFIG_FILES = ['src/config.ts', 'src/config-market.ts']
const source = CONFIG_FILES.map((file) => readFileSync(join(ROOT, file), 'utf8')).join('\n')

/** Each row's variables with its Default cell's part for each: `600` (1 to 1000000). */
function readmeRows(): Map<string, string> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('\n## Configuration\n'))
  const rows = new Map<string, string>()
  for (const line of section.slice(0, section.indexOf('\n## ', 1)).split('\n')) {
    const cells = /^\| ([^|]+) \| ([^|]+) \|/.exec(line)
    if (!cells) continue
    const names = [...cells[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)
    const defaults = cells[2]!.trim().split(' / ')
    for (const [i, name] of names.entries()) rows.set(name, (defaults[i] ?? defaults[0]!).trim())
  }
  return rows
}

/** A bound or default as the code writes it: 1_000_000, 7 * 86_400, 32 * MIB. */
function evaluate(expression: string): number {
  return expression
    .split('*')
    .map((factor) => factor.trim().replace(/_/g, ''))
    .reduce((product, factor) => product * (factor === 'MIB' ? 1024 * 1024 : Number(factor)), 1)
}

const integers = [...source.matchAll(/integer\(env, '([A-Z0-9_]+)', ([^,]+), ([^,]+), ([^)]+)\)/g)].map(
  (m) => ({ name: m[1]!, fallback: evaluate(m[2]!), min: evaluate(m[3]!), max: evaluate(m[4]!) }),
)

test('every variable the code reads has a row, and every SVC_ row is read', () => {
  const rows = readmeRows()
  const read = new Set(
    [...source.matchAll(/'((?:SVC|REDIS)_[A-Z0-9_]+|PORT|HOST|LOG_LEVEL)'/g)].map((m) => m[1]!),
  )
  expect(read.size).toBeGreaterThan(50)
  expect([...read].filter((name) => !rows.has(name))).toEqual([])
  expect([...rows.keys()].filter((name) => name.startsWith('SVC_') && !read.has(name))).toEqual([])
})

test("each integer's default and bounds in the README are the code's", () => {
  const rows = readmeRows()
  expect(integers.map((i) => i.name)).toEqual(
    expect.arrayContaining(['SVC_STREAM_IDLE_MS', 'SVC_STREAM_MAX_MS', 'SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE']),
  )
  for (const { name, fallback, min, max } of integers) {
    expect(rows.get(name), name).toBe(`\`${fallback}\` (${min} to ${max})`)
  }
})

test('the parsed bounds are the ones the loader enforces', () => {
  const base = {
    REDIS_URL: 'redis://127.0.0.1:6379',
    SVC_ADMIN_TOKEN: 'a'.repeat(24),
    SVC_MASTER_KEY: '00'.repeat(32),
    SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
  }
  // The funding group loads only when it is configured: its integers are checked the same way.
  const inFunding = (name: string) =>
    name === 'SVC_CONFIRMATIONS' || name.startsWith('SVC_X402_') || name.startsWith('SVC_RELAYER_')
  for (const { name, min, max } of integers.filter((i) => !inFunding(i.name))) {
    for (const value of [min, max])
      expect(() => loadGatewayConfig({ ...base, [name]: String(value) })).not.toThrow()
    for (const value of [min - 1, max + 1])
      expect(() => loadGatewayConfig({ ...base, [name]: String(value) }), `${name}=${value}`).toThrow(
        ConfigError,
      )
  }
})
