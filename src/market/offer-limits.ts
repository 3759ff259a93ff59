// How many offers one supplier may have: lua/offer-put.lua (one slot) and lua/index-offer.lua
// (held apart) enforce them.

/** A supplier's offers standing (not deleted) at once. */
export const MAX_SUPPLIER_OFFERS = 50
/**
 * A supplier's offers ever posted: a deleted offer keeps its earnings, which the payout script sums
 * over all of them, so this bounds that loop.
 */
export const MAX_SUPPLIER_OFFERS_POSTED = 500
