// The rotation's overlaps, as rotation.ts computes them: each previous secret signs until the end of
// the overlap it was given and never past a later rotation's; 0 ends them all; at most
// MAX_PREVIOUS_SECRETS sign beside the current one, the newest kept.
import { expect, test } from 'bun:test'
import {
  MAX_PREVIOUS_SECRETS,
  type RotatedFields,
  rotated,
  signingPrevious,
} from '../../src/webhooks/rotation.ts'

const HOUR = 3_600_000
const at = 1_000 * HOUR
const rotate = (endpoint: RotatedFields, sealed: string, when: number, overlapSeconds: number) =>
  rotated(endpoint, sealed, { at: when, overlapSeconds, key: null })

test('a second rotation keeps the first secret to its own earlier end, none past the new overlap', () => {
  const first = rotate({ sealedSecret: 'a' }, 'b', at, 3600)
  const second = rotate(first, 'c', at + HOUR / 2, 24 * 3600)
  expect(second.sealedSecret).toBe('c')
  expect(second.previousSecrets.map((p) => [p.sealedSecret, p.until])).toEqual([
    ['b', at + HOUR / 2 + 24 * HOUR],
    ['a', at + HOUR],
  ])
  // A shorter overlap later cuts every one of them to it.
  const third = rotate(second, 'd', at + HOUR / 2, 60)
  expect(third.previousSecrets.map((p) => [p.sealedSecret, p.until])).toEqual(
    ['c', 'b', 'a'].map((sealed) => [sealed, at + HOUR / 2 + 60_000]),
  )
  // At the end of an overlap the secret stops signing.
  expect(signingPrevious(first, at + HOUR - 1).map((p) => p.sealedSecret)).toEqual(['a'])
  expect(signingPrevious(first, at + HOUR)).toEqual([])
})

test('an overlap of 0 ends every previous secret; rotations in a row keep the newest few', () => {
  let endpoint: RotatedFields = { sealedSecret: 's0' }
  for (let i = 1; i <= 6; i++) endpoint = rotate(endpoint, `s${i}`, at + i, 24 * 3600)
  expect(endpoint.previousSecrets!.map((p) => p.sealedSecret)).toEqual(['s5', 's4', 's3'])
  expect(endpoint.previousSecrets).toHaveLength(MAX_PREVIOUS_SECRETS)
  const revoked = rotate(endpoint, 's7', at + 7, 0)
  expect(revoked.previousSecrets).toEqual([])
  expect(signingPrevious(revoked, at + 7)).toEqual([])
})
