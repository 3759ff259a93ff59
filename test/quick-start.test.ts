// The README's Quick start keeps working: its start command installs production dependencies only
// (`--omit=dev`), so nothing the gateway runs may import a dev dependency; and CI runs the test
// command the README shows, so the two cannot drift apart.
import { expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

const ROOT = resolve(import.meta.dir, '..')
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
const transpiler = new Bun.Transpiler({ loader: 'ts' })

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

/** `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`; null for built-ins and relative paths. */
function packageOf(specifier: string): string | null {
  if (specifier.startsWith('.') || specifier.startsWith('node:') || specifier.startsWith('bun:')) return null
  if (specifier === 'bun') return null
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
}

function quickStart(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const block = readme.split('## Quick start')[1]!.split('```sh\n')[1]!.split('```')[0]!
  return block
    .trim()
    .split('\n')
    .map((line) => line.split('#')[0]!.trim())
}

test('the gateway imports production dependencies only', () => {
  const offenders: string[] = []
  for (const file of sourceFiles(join(ROOT, 'src'))) {
    const source = readFileSync(file, 'utf8').replace(/^#!.*\n/, '') // the entry's shebang
    for (const { path } of transpiler.scanImports(source)) {
      const name = packageOf(path)
      if (name && !pkg.dependencies[name]) offenders.push(`${file.slice(ROOT.length + 1)} imports ${name}`)
    }
  }
  expect(offenders).toEqual([])
})

test('the start command installs without dev dependencies, Bun among the production ones', () => {
  const [start] = quickStart()
  expect(start).toBe('npm install --omit=dev && npm run demo')
  expect(pkg.dependencies.bun).toBeDefined()
  expect(pkg.devDependencies.bun).toBeUndefined()
})

test("CI runs the README's test command", () => {
  const testCommand = quickStart()[1]!
  expect(testCommand).toContain('npm test')
  const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8')
  expect(ci.split('\n').map((line) => line.split('#')[0]!.trim())).toContain(testCommand)
})
