// The Lua libraries the market's scripts include (lua/lib/*.lua), in an order where each comes
// after those it calls, and the prologue every market script runs first.
import libAttempts from '../../lua/lib/attempts.lua' with { type: 'text' }
import libEvents from '../../lua/lib/events.lua' with { type: 'text' }
import libHolds from '../../lua/lib/holds.lua' with { type: 'text' }
import libKeys from '../../lua/lib/keys.lua' with { type: 'text' }
import libLadder from '../../lua/lib/ladder.lua' with { type: 'text' }
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import libOffers from '../../lua/lib/offers.lua' with { type: 'text' }
import libPick from '../../lua/lib/pick.lua' with { type: 'text' }
import libPosts from '../../lua/lib/posts.lua' with { type: 'text' }
import libReap from '../../lua/lib/reap.lua' with { type: 'text' }
import libRecord from '../../lua/lib/record.lua' with { type: 'text' }
import slotGuard from '../../lua/lib/slot-guard.lua' with { type: 'text' }

/** Each library by name, for the scripts that include only some of them. */
export const LIB = {
  attempts: libAttempts,
  events: libEvents,
  holds: libHolds,
  keys: libKeys,
  ladder: libLadder,
  numbers: libNumbers,
  offers: libOffers,
  pick: libPick,
  posts: libPosts,
  reap: libReap,
  record: libRecord,
} as const

/** Every library, in an order where each comes after those it calls. */
export const MARKET_LIBS = [
  libKeys,
  libNumbers,
  libLadder,
  libOffers,
  libRecord,
  libAttempts,
  libPosts,
  libReap,
  libPick,
  libHolds,
  libEvents,
]
/** What every market script runs first: the per-call state of lib/numbers and lib/keys. */
export const MARKET_PROLOGUE = 'bind_globals()\nuse_keyspace(KEYS[1])'
/** What every script runs before anything else (function or EVAL form): no call on a slot being moved. */
export const SLOT_GUARD = slotGuard.trimEnd()
