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

/**
 * The services in layers, lowest first: a module imports only from its own folder or a lower
 * layer, so no import runs back up (market knows nothing of suppliers, records nothing of
 * inference). Folders in one layer do not import each other. The entry points compose the rest.
 */
const LAYERS: string[][] = [
  ['money', 'errors', 'logger', 'timing', 'read-capped'],
  ['metrics', 'redis', 'config-env'],
  ['config-market'],
  ['config', 'records', 'accounts', 'catalog', 'upstream', 'sim'],
  ['market'],
  ['suppliers', 'funding'],
  ['payouts', 'inference', 'webhooks'],
  ['mcp'],
  ['http'],
  ['app'],
  ['gateway'],
  ['cli'],
  ['main'],
]

const layerOf = (folder: string) => LAYERS.findIndex((layer) => layer.includes(folder))
/** src/x/... -> "x"; src/x.ts -> "x"; outside src -> null. */
const folderOf = (path: string) => {
  const parts = relative(SRC, path).split('/')
  return parts[0] === '..' ? null : parts[0]!.replace(/\.ts$/, '')
}

function upwardImports(files: { name: string; source: string }[]): string[] {
  const offenders: string[] = []
  for (const { name, source } of files) {
    const from = folderOf(join(ROOT, name))!
    for (const { path } of transpiler.scanImports(source.replace(/^#!.*\n/, ''))) {
      if (!path.startsWith('.')) continue
      const to = folderOf(resolve(dirname(join(ROOT, name)), path))
      if (to === null || to === from) continue
      if (layerOf(to) >= layerOf(from)) offenders.push(`${name} imports src/${to}`)
    }
  }
  return offenders
}

test('every folder of src/ has its layer, and no import runs back up', () => {
  const folders = readdirSync(SRC).map((entry) => entry.replace(/\.ts$/, ''))
  expect(folders.filter((folder) => layerOf(folder) < 0)).toEqual([])
  const files = sourceFiles(SRC).map((file) => ({
    name: relative(ROOT, file),
    source: readFileSync(file, 'utf8'),
  }))
  expect(upwardImports(files)).toEqual([])
})

test('the layer check sees an import that runs back up (it is not vacuous)', () => {
  const file = {
    name: 'src/market/audit.ts',
    source: "import { x } from '../suppliers/audit.ts'\nexport const y = x",
  }
  expect(upwardImports([file])).toEqual(['src/market/audit.ts imports src/suppliers'])
})
