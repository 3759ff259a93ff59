// The benchmark's output: markdown tables, printed and written into BENCHMARKS.md between two
// markers, so that what is written by hand around them (the profiles) stays.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'

export type Cell = string | number | null

export interface Table {
  title: string
  columns: string[]
  rows: Cell[][]
  notes?: string[]
}

export interface Check {
  target: string
  measured: string
  met: boolean
}

export const BEGIN = '<!-- bench:results:begin -->'
export const END = '<!-- bench:results:end -->'

export function fmt(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined || Number.isNaN(value)) return 'n/a'
  if (Number.isInteger(value) || Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US')
  return value.toFixed(digits)
}

export const signed = (value: number, digits = 2) => `${value >= 0 ? '+' : ''}${fmt(value, digits)}`

export function markdownTable(table: Table): string {
  const cell = (c: Cell) => (typeof c === 'number' ? fmt(c) : (c ?? ''))
  const lines = [
    `### ${table.title}`,
    '',
    `| ${table.columns.join(' | ')} |`,
    `|${table.columns.map(() => '---').join('|')}|`,
    ...table.rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ]
  if (table.notes?.length) lines.push('', ...table.notes)
  return lines.join('\n')
}

export function checksTable(checks: Check[]): string {
  return markdownTable({
    title: 'Targets',
    columns: ['target', 'measured', 'met'],
    rows: checks.map((c) => [c.target, c.measured, c.met ? 'yes' : '**no**']),
  })
}

const SKELETON = `# Benchmarks

Every figure below comes from one run of \`npm run bench\` on one machine, as ratios to baselines
measured in that same run; \`bench/\` holds the harness and its README-level notes are at the top of
\`bench/run.ts\`.

${BEGIN}
${END}
`

/** Replaces the generated part of BENCHMARKS.md (between the markers), keeping the rest. */
export function writeBenchmarks(path: string, generated: string): void {
  const current = existsSync(path) ? readFileSync(path, 'utf8') : SKELETON
  const start = current.indexOf(BEGIN)
  const end = current.indexOf(END)
  if (start < 0 || end < start) throw new Error(`${path} has lost its ${BEGIN} / ${END} markers`)
  writeFileSync(path, `${current.slice(0, start + BEGIN.length)}\n${generated}\n${current.slice(end)}`)
}
