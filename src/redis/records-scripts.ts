// The records' script (lua/record-attempt.lua): the write-behind worker's copy of one ended
// attempt into its request record and the day's stats. Kept beside scripts.ts so the records work
// adds one line there.
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import recordAttempt from '../../lua/record-attempt.lua' with { type: 'text' }

export const RECORDS_SCRIPTS = {
  recordAttempt: { lua: [libKeys, libNumbers, recordAttempt].join('\n'), keys: 1 },
} as const
