// Clears a stop kept on disk for the next start: sent once by the gateway that claims the file, and
// one kept longer ago than the record retention never sent (its attempt's record may be gone, and
// the clear would be charged again as an admission the store lost).
import { expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createLogger } from '../../src/logger.ts'
import type { Clearing } from '../../src/market/clearing.ts'
import type { AttemptRef, ClearArgs } from '../../src/market/steps.ts'
import { UnsentClears } from '../../src/market/unsent-clears.ts'
import { storeClosed } from '../../src/redis/connection.ts'
import { until } from '../helpers/wait.ts'

const RETENTION_MS = 86_400_000
const entry = (attemptId: string, keptAt: number) =>
  JSON.stringify({
    attempt: { attemptId, accountId: 'acct', offerId: 'offer', model: 'm' },
    req: { burn: 700, feeBps: 0, recordRetentionMs: RETENTION_MS },
    keptAt,
  })

test('a kept clear is sent once by the next start, and one past the record retention is not sent', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'unsent-'))
  const now = Date.now()
  writeFileSync(
    join(dir, 'unsent-clears-earlier.jsonl'),
    `${entry('fresh', now - 60_000)}\n${entry('stale', now - RETENTION_MS - 60_000)}\n`,
  )
  const sent: string[] = []
  const clear = async (attempt: AttemptRef, _req: ClearArgs) => {
    sent.push(attempt.attemptId)
    return { replay: false, charged: 0 } as unknown as Clearing
  }
  const unsent = new UnsentClears(clear, createLogger('silent'), dir, 'this')
  unsent.sendKept()
  await until(() => unsent.size === 0)
  expect(sent).toEqual(['fresh'])
  // Everything the file held is sent or dropped: the claimed file is gone, and a second start sends nothing.
  await until(() => readdirSync(dir).length === 0)
  new UnsentClears(clear, createLogger('silent'), dir, 'again').sendKept()
  expect(sent).toEqual(['fresh'])
  expect(await unsent.stop()).toEqual({ kept: 0, lost: 0 })
  expect(existsSync(join(dir, 'unsent-clears-this.jsonl'))).toBe(false)
})

test('a clear the store closed under (a stop under a Redis that never answers) is written at the stop, not dropped', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'unsent-'))
  let tries = 0
  const clear = async () => {
    tries++
    throw storeClosed()
  }
  const unsent = new UnsentClears(clear, createLogger('silent'), dir, 'this')
  const attempt = { attemptId: 'closed', accountId: 'acct', offerId: 'offer', model: 'm' } as AttemptRef
  unsent.keep(attempt, { burn: 700, feeBps: 0, recordRetentionMs: RETENTION_MS } as unknown as ClearArgs)
  await until(() => tries === 1)
  expect(await unsent.stop()).toEqual({ kept: 1, lost: 0 })
  expect(readdirSync(dir)).toEqual(['unsent-clears-this.jsonl'])
})
