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
    'self:',
    ...list(self, () => true),
    'inclusive, our code (src/):',
    ...list(inclusive, (k) => k.includes(' src/')),
  ].join('\n')
}

if (import.meta.main) console.log(summarizeProfile(process.argv[2]!, Number(process.argv[3] ?? 25)))
