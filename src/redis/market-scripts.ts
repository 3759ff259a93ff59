// The market's scripts, each assembled from the shared libraries it includes (lua/lib/*.lua) and
// its own body. Concatenation is the include mechanism: one source string per script, still one
// atomic EVALSHA. The same bodies and libraries make the Redis function library (functions.ts),
// which runs the libraries once at load instead of on every call.
import admit from '../../lua/admit.lua' with { type: 'text' }
import capacity from '../../lua/capacity.lua' with { type: 'text' }
import clear from '../../lua/clear.lua' with { type: 'text' }
import libAttempts from '../../lua/lib/attempts.lua' with { type: 'text' }
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import libOffers from '../../lua/lib/offers.lua' with { type: 'text' }
import libPick from '../../lua/lib/pick.lua' with { type: 'text' }
import libReap from '../../lua/lib/reap.lua' with { type: 'text' }
import offerPut from '../../lua/offer-put.lua' with { type: 'text' }
import quote from '../../lua/quote.lua' with { type: 'text' }
import reap from '../../lua/reap.lua' with { type: 'text' }
import release from '../../lua/release.lua' with { type: 'text' }
import renew from '../../lua/renew.lua' with { type: 'text' }

/** Every library, in an order where each comes after those it calls. */
export const MARKET_LIBS = [libKeys, libNumbers, libOffers, libAttempts, libReap, libPick]
/** What every market script runs first: the per-call state of lib/numbers and lib/keys. */
export const MARKET_PROLOGUE = 'bind_globals()\nuse_keyspace(KEYS[1])'

const script = (libs: string[], body: string) => ({
  lua: [...libs, MARKET_PROLOGUE, body].join('\n'),
  body,
  market: true,
  keys: 1,
})
// Each EVAL form carries only the libraries it calls: every one runs its definitions on every call.
const settling = [libKeys, libNumbers, libAttempts]

// Every market script takes one key: the keyspace base, from which lib/keys builds the rest.
export const MARKET_SCRIPTS = {
  admit: script(MARKET_LIBS, admit),
  clear: script(settling, clear),
  release: script(settling, release),
  reap: script([...settling, libReap], reap),
  renew: script([libKeys, libNumbers], renew),
  offerPut: script([libKeys, libNumbers, libOffers], offerPut),
  capacity: script([libKeys, libNumbers, libOffers], capacity),
  quote: script([libKeys, libNumbers, libOffers, libPick], quote),
} as const
