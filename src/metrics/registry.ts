// A small Prometheus registry: counters and histograms kept in process, gauges read at scrape
// time. Hand-written because the text format is simple and every library we could add pulls in
// far more than these hundred lines.

type Labels = Record<string, string>

const render = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map((k) => `${k}="${String(labels[k]).replace(/["\\\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`))}"`)
    .join(',')

// Label sets repeat on every request (a route, a method, a status): each is sorted and escaped
// once, then found again by walking a tree of its names and values, which builds no string on the
// way (a key joined per call showed in the gateway's CPU profile: see BENCHMARKS.md, "Metric label
// sets"). Bounded, so that a label fed from input could never grow it without end.
interface LabelNode {
  next: Map<string, LabelNode>
  rendered?: string
}
const root: LabelNode = { next: new Map() }
let nodes = 0
const MAX_NODES = 20_000

const step = (node: LabelNode, part: string): LabelNode | undefined => {
  let child = node.next.get(part)
  if (child === undefined && nodes < MAX_NODES) {
    child = { next: new Map() }
    node.next.set(part, child)
    nodes++
  }
  return child
}

const key = (labels: Labels) => {
  let node: LabelNode | undefined = root
  for (const k in labels) {
    node = step(node, k)
    if (node) node = step(node, labels[k]!)
    if (!node) return render(labels)
  }
  node.rendered ??= render(labels)
  return node.rendered
}

export class Counter {
  private readonly values = new Map<string, number>()
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const k = key(labels)
    this.values.set(k, (this.values.get(k) ?? 0) + by)
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`]
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`)
    return lines
  }
}

export class Histogram {
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>()
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {}

  observe(labels: Labels, value: number): void {
    const k = key(labels)
    let s = this.series.get(k)
    if (!s) {
      s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 }
      this.series.set(k, s)
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i]! += 1
    s.sum += value
    s.count += 1
  }

  render(): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`]
    for (const [k, s] of this.series) {
      const sep = k ? `${k},` : ''
      this.buckets.forEach((b, i) => {
        lines.push(`${this.name}_bucket{${sep}le="${b}"} ${s.counts[i]}`)
      })
      lines.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`)
      lines.push(`${this.name}_sum${k ? `{${k}}` : ''} ${s.sum}`)
      lines.push(`${this.name}_count${k ? `{${k}}` : ''} ${s.count}`)
    }
    return lines
  }
}

/** A gauge, read at scrape time by its caller. */
export function renderGauge(name: string, help: string, value: number): string[] {
  return [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${value}`]
}

/** A gauge with one label: a series per value of it (none listed, none shown). */
export function renderLabelledGauge(
  name: string,
  help: string,
  label: string,
  values: readonly (readonly [string, number])[],
): string[] {
  return [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} gauge`,
    ...values.map(([v, n]) => `${name}{${render({ [label]: v })}} ${n}`),
  ]
}
