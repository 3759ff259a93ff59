// Every Lua script's result codes, in one table: a script replies with a small integer first (1
// done, 0 nothing to do, a negative number a refusal), as its header block in lua/ documents. A
// wrapper compares a reply with these, never with a bare number; what each refusal means to a
// client is mapped beside the service that meets it (market/refusal-errors.ts, accounts/results.ts).

/** admit, quote */
export enum AdmitCode {
  Admitted = 1,
  UnknownAccount = -1,
  KeyConcurrency = -2,
  BuyerConcurrency = -3,
  PoolEmpty = -4,
  NoEligibleSupply = -5,
  InsufficientRoutable = -6,
  KeysBusy = -7,
  SupplyExhausted = -8,
  InsufficientBalance = -9,
  DuplicateAttempt = -10,
  UnknownKey = -11,
  KeyLimit = -12,
}

/** create-account, mint-key, revoke-key, set-key-limit, credit */
export enum AccountCode {
  Ok = 1,
  NoAccount = -1,
  KeyCap = -2,
  WalletTaken = -3,
  IdTaken = -4,
  NoKey = -5,
  BadAmount = -6,
  LimitBelowSpent = -7,
  KeyLimitBinding = -8,
  ResetWithoutLimit = -9,
  /** The calling key was revoked after its request was authenticated. */
  CallerRevoked = -10,
  /** A hand credit's Idempotency-Key was used for another amount. */
  IdempotencyKeyReused = -11,
}

/** clear */
export enum ClearCode {
  Cleared = 1,
  UnknownAttempt = -1,
  Released = -2,
}

/** release */
export enum ReleaseCode {
  Released = 1,
  AlreadyEnded = 0,
  UnknownAttempt = -1,
}

/** offer-put */
export enum OfferCode {
  Ok = 1,
  UnknownOffer = -1,
  BelowUsed = -2,
  UpstreamKeyInUse = -3,
  SupplierSuspended = -4,
  UnknownSupplier = -5,
  OfferLimit = -6,
  /** A supplier's offer keeps the upstream it was posted with. */
  SupplierUpstream = -7,
}

/** supplier-signin, supplier-status */
export enum SupplierCode {
  Ok = 1,
  /** sign-in: the nonce is unknown, expired or used; status: unknown supplier */
  Refused = -1,
  KeyCap = -2,
  IdTaken = -4,
}

/** renew */
export enum RenewCode {
  Renewed = 1,
  Gone = 0,
}

/** claim-payment, credit-payment, confirm-payment, release-payment, move-payment, take-back-payment */
export enum PaymentCode {
  Done = 1,
  AlreadyDone = 0,
  NoAccount = -1,
  BadAmount = -6,
  PendingShort = -7,
  TransactionTaken = -8,
  /** credit-payment: the authorization's payment was taken back (its transaction lost, expired unused). */
  TakenBack = -9,
  /** credit-payment: the authorization's claim was released, expired unused or canceled by the payer. */
  Released = -10,
}

/** payout-create */
export enum PayoutCreateCode {
  Ok = 1,
  UnknownSupplier = -1,
  Suspended = -2,
  BelowMinimum = -3,
  AbovePayable = -4,
  KeyReused = -5,
  IdTaken = -6,
}

/** payout-move, payout-lock */
export enum PayoutMoveCode {
  Moved = 1,
  AlreadySo = 0,
  UnknownPayout = -1,
  Illegal = -2,
  NotHolder = -3,
  /** signed: the supplier is suspended; withheld: it is not. */
  Suspension = -4,
  /** The payout is (or would be) signed by another wallet than the lock's. */
  OtherSigner = -5,
}
