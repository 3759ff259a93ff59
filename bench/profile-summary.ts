// Reads a .cpuprofile by sample counts (Bun's markdown summary weighs samples by the time since the
// previous one, so idle gaps land on whatever ran next): the hottest functions by self samples, and
// our own functions (src/) by inclusive samples.
//   bun bench/profile-summary.ts <file.cpuprofile> [top=25]
import { readFileSync } from 'node:fs'
import { ROOT } from './stack.ts'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}

/**
 * The phases of a paid request, by the source file of the innermost of our frames on a sample's
 * stack (first rule that matches); samples with none of ours are the runtime's own: the event loop,
 * sockets, the HTTP server and garbage collection, outside any of our calls.
 */
const PHASES: [phase: string, file: RegExp][] = [
  ['response', /src\/http\/own-response\.ts|src\/http\/inference\/call\.ts/],
  ['logging and metrics', /src\/logger\.ts|src\/metrics\/|src\/http\/request-context\.ts/],
  ['clear', /src\/inference\/clear-usage\.ts|src\/market\/clearing\.ts|src\/inference\/meter\.ts/],
  ['relay', /src\/inference\/relay-|src\/inference\/upstream-events\.ts/],
  ['supplier call and parse', /src\/upstream\/|src\/inference\/supplier\.ts/],
  ['admit', /src\/market\/admission\.ts|src\/inference\/key-wait\.ts/],
  [
    'validation',
    /src\/inference\/[a-z-]+-request\.ts|src\/inference\/tokens\.ts|src\/inference\/callable-model\.ts/,
  ],
  ['auth', /src\/http\/auth\.ts/],
  [
    'accept and parse',
    /src\/http\/json-body\.ts|src\/app\.ts|src\/http\/error-handler\.ts|node_modules\/elysia/,
  ],
  ['the call itself', /src\/inference\/(service|dispatch)\.ts|src\/http\/inference\//],
]

/** Non-idle samples by phase, as shares. */
export function phasesOf(path: string): { phase: string; samples: number; share: number }[] {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as { nodes: ProfileNode[]; samples: number[] }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const counts = new Map<string, number>()
  let busy = 0
  for (const id of profile.samples) {
    if (byId.get(id)!.callFrame.functionName === '(idle)') continue
    busy += 1
    let phase = 'runtime (no frame of ours)'
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at)!.callFrame.url
      const rule = PHASES.find(([, file]) => file.test(url))
      if (rule) {
        phase = rule[0]
        break
      }
    }
    counts.set(phase, (counts.get(phase) ?? 0) + 1)
  }
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([phase, samples]) => ({ phase, samples, share: samples / busy }))
}

export function summarizeProfile(path: string, top = 25): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as { nodes: ProfileNode[]; samples: number[] }
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const label = (n: ProfileNode) =>
    `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^file:\/\//, '').replace(`${ROOT}/`, '') || '[native]'}${n.callFrame.lineNumber >= 0 ? `:${n.callFrame.lineNumber + 1}` : ''}`
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let busy = 0
  for (const id of profile.samples) {
    const node = byId.get(id)!
    if (['(idle)', '(program)', '(garbage collector)'].includes(node.callFrame.functionName)) {
      if (node.callFrame.functionName !== '(idle)') self.set(label(node), (self.get(label(node)) ?? 0) + 1)
      if (node.callFrame.functionName !== '(idle)') busy += 1
      continue
    }
    busy += 1
    self.set(label(node), (self.get(label(node)) ?? 0) + 1)
    const seen = new Set<string>()
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const key = label(byId.get(at)!)
      if (seen.has(key)) continue
      seen.add(key)
      inclusive.set(key, (inclusive.get(key) ?? 0) + 1)
    }
  }
  const pct = (n: number) => `${((100 * n) / busy).toFixed(1)}%`
  const list = (m: Map<string, number>, keep: (k: string) => boolean) =>
    [...m.entries()]
      .filter(([k]) => keep(k))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, n]) => `  ${pct(n).padStart(6)}  ${n.toString().padStart(6)}  ${k}`)
  return [
    `${profile.samples.length} samples, ${busy} not idle (percentages are of those)`,
    'by phase:',
    ...phasesOf(path).map((p) => `  ${(100 * p.share).toFixed(1).padStart(5)}%  ${p.phase}`),
    'self:',
    ...list(self, () => true),
    'inclusive, our code (src/):',
    ...list(inclusive, (k) => k.includes(' src/')),
  ].join('\n')
}

if (import.meta.main) console.log(summarizeProfile(process.argv[2]!, Number(process.argv[3] ?? 25)))
