// The compiled binary, as `npm run build` makes it (minified: class names are not the source's),
// built from this tree into a temporary folder (once for a parallel run), or the one SVC_BINARY names.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parallelRun, runScoped } from './run-scope.ts'

let built: Promise<string> | null = null

export function compiledBinary(): Promise<string> {
  const given = process.env.SVC_BINARY
  if (given) return Promise.resolve(given)
  built ??= sharedBuild()
  return built
}

async function sharedBuild(): Promise<string> {
  const run = parallelRun()
  if (!run) return buildBinary()
  return (await runScoped<{ path: string }>('binary', `${import.meta.dir}/binary-keeper.ts`, run)).path
}

export async function buildBinary(): Promise<string> {
  const root = join(import.meta.dir, '../..')
  const script = ((await Bun.file(join(root, 'package.json')).json()) as { scripts: { build: string } })
    .scripts.build
  const outfile = join(mkdtempSync(join(tmpdir(), 'svc-binary-')), 'svc-gateway')
  const args = script.replace(/--outfile \S+/, `--outfile ${outfile}`).split(/\s+/)
  if (args[0] !== 'bun') throw new Error(`unexpected build script: ${script}`)
  const child = Bun.spawn([process.execPath, ...args.slice(1)], {
    cwd: root,
    stdout: 'ignore',
    stderr: 'pipe',
  })
  if ((await child.exited) !== 0) throw new Error(`build failed: ${await new Response(child.stderr).text()}`)
  return outfile
}
