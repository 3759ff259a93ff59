// The market's scripts, each assembled from the shared libraries it includes (lua/lib/*.lua) and
// its own body. Concatenation is the include mechanism: one source string per script, still one
// atomic EVALSHA.
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

const withLibs = (...parts: string[]) => parts.join('\n')
// Each script carries only the libraries it calls: every one runs its definitions on every call.
const settling = [libKeys, libNumbers, libAttempts]

// Every market script takes one key: the keyspace base, from which lib/keys builds the rest.
export const MARKET_SCRIPTS = {
  admit: { lua: withLibs(libKeys, libNumbers, libOffers, libAttempts, libReap, libPick, admit), keys: 1 },
  clear: { lua: withLibs(...settling, clear), keys: 1 },
  release: { lua: withLibs(...settling, release), keys: 1 },
  reap: { lua: withLibs(...settling, libReap, reap), keys: 1 },
  renew: { lua: withLibs(libKeys, libNumbers, renew), keys: 1 },
  offerPut: { lua: withLibs(libKeys, libNumbers, libOffers, offerPut), keys: 1 },
  capacity: { lua: withLibs(libKeys, libNumbers, libOffers, capacity), keys: 1 },
  quote: { lua: withLibs(libKeys, libNumbers, libOffers, libPick, quote), keys: 1 },
} as const
