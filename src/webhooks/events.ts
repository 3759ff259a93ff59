// The event types a webhook endpoint may subscribe to, and who may: an account's and a supplier's.
export const ACCOUNT_EVENTS = [
  'balance.low',
  'key.budget.80',
  'key.budget.100',
  'funding.confirmed',
  'funding.reversed',
] as const
export const SUPPLIER_EVENTS = [
  'payout.confirmed',
  'payout.failed',
  'supplier.suspended',
  'supplier.reinstated',
] as const
export type EventType = (typeof ACCOUNT_EVENTS)[number] | (typeof SUPPLIER_EVENTS)[number]

/** A webhook owner's name, as its keys and the Lua scripts spell it. */
export type Owner = `acct:${string}` | `supplier:${string}`
export const accountOwner = (accountId: string): Owner => `acct:${accountId}`
export const supplierOwner = (supplierId: string): Owner => `supplier:${supplierId}`
export const ownerKind = (owner: Owner) => (owner.startsWith('acct:') ? 'account' : 'supplier')
export const eventsFor = (owner: Owner): readonly string[] =>
  ownerKind(owner) === 'account' ? ACCOUNT_EVENTS : SUPPLIER_EVENTS

/** The consumer group every replica reads the owners' event streams with. */
export const DELIVERY_GROUP = 'deliver'

/** One try of one event at one endpoint, as its delivery log keeps it (and the pages read it). */
export interface DeliveryRecord {
  eventId: string
  type: string
  attempt: number
  at: number
  ok: boolean
  httpStatus: number | null
  error: string | null
  replay: boolean
  /** Set on a record of an event dropped for the endpoint, not sent: why (SKIPPED_DISABLED). */
  skipped?: string
}

/** Why an event was not sent to an endpoint that wants it: the endpoint was disabled. */
export const SKIPPED_DISABLED = 'endpoint disabled'
