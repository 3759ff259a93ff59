// SVC_DISABLED_MODELS matches ids as the catalog folds them (case, surrounding space; bare or
// `svc/` prefixed): an operator's `Llama-3.3-70B` keeps `llama-3.3-70b` off, in every spelling the
// upstream lists, since the upstream may take any of them for the same model. An entry that names
// no model on the upstream's list is logged at start, so a typo does not pass for a disabled model.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mapUpstreamModels } from '../../src/catalog/venice-mapping.ts'
import { createLogger } from '../../src/logger.ts'
import { logCapture } from '../helpers/accounts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const logs = logCapture()
let stack: TestStack
beforeAll(async () => {
  stack = await startStack({
    env: { SVC_DISABLED_MODELS: 'svc/QWEN3-4B, Glm-4.6 ,no-such-model' },
    logger: createLogger('info', 'svc-gateway', logs.stream),
  })
})
afterAll(() => stack.stop())

test('a model disabled in another case, spacing or with the prefix is off the catalog', async () => {
  const list = (await (await fetch(`${stack.url}/v1/models`)).json()) as { data: { id: string }[] }
  const ids = list.data.map((m) => m.id)
  expect(ids).toContain('llama-3.3-70b')
  expect(ids).not.toContain('qwen3-4b')
  expect(ids).not.toContain('glm-4.6')
  for (const id of ['qwen3-4b', 'svc/glm-4.6']) {
    expect((await fetch(`${stack.url}/v1/models/${id}`)).status).toBe(404)
  }
})

test('every spelling the upstream lists of a disabled model is off', () => {
  const model = (id: string) => ({
    id,
    type: 'text',
    model_spec: { name: id, pricing: { input: { diem: 1 }, output: { diem: 2 } } },
  })
  const entries = mapUpstreamModels({ data: [model('m'), model('M'), model(' m'), model('n')] }, ['svc/M'])
  expect(entries.map((e) => e.row.id)).toEqual(['n'])
})

test('an entry naming no listed model is a warning at start; those that matched are not', () => {
  const warnings = logs.lines
    .map((line) => JSON.parse(line) as { level: number; msg: string; models?: string[] })
    .filter((line) => line.level === 40 && line.models !== undefined)
  expect(warnings.map((w) => w.models)).toEqual([['no-such-model']])
  expect(warnings[0]!.msg).toContain('SVC_DISABLED_MODELS')
})
