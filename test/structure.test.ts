// The tree keeps its shape: services know nothing of HTTP (only the entry points, the app, the
// process's start, the CLI, and src/http/ itself import from src/http/), and no source file grows
// past what one job takes.
import { expect, test } from 'bun:test'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dir, '..')
const SRC = join(ROOT, 'src')
const ENTRY_POINTS = ['src/app.ts', 'src/main.ts', 'src/gateway.ts']

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

const transpiler = new Bun.Transpiler({ loader: 'ts' })

test('no service imports from src/http/', () => {
  const offenders: string[] = []
  for (const file of sourceFiles(SRC)) {
    const name = relative(ROOT, file)
    if (name.startsWith('src/http/') || name.startsWith('src/cli/') || ENTRY_POINTS.includes(name)) continue
    for (const { path } of transpiler.scanImports(readFileSync(file, 'utf8'))) {
      if (!path.startsWith('.')) continue
      const target = relative(ROOT, resolve(dirname(file), path))
      if (target.startsWith('src/http/')) offenders.push(`${name} imports ${target}`)
    }
  }
  expect(offenders).toEqual([])
})

test('the check sees an import into src/http/ (it is not vacuous)', () => {
  const imports = transpiler.scanImports("import { x } from '../http/auth.ts'\nexport const y = x")
  expect(imports.map((i) => i.path)).toEqual(['../http/auth.ts'])
})

/** Past this a file is usually two jobs: split it by job rather than raise the bound. */
const MAX_LINES = 400

test(`no source file is past ${MAX_LINES} lines`, () => {
  const long = sourceFiles(SRC)
    .map((file) => ({ name: relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length }))
    .filter((f) => f.lines > MAX_LINES)
    .map((f) => `${f.name}: ${f.lines}`)
  expect(long).toEqual([])
})
