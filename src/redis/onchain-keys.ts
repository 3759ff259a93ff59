// The keys of what the gateway sends on chain: payouts from the operator's payout wallet, and the
// funding relayer's sends. Part of the keyspace (keys.ts); all under the prefix.

export function onChainKeys(key: (suffix: string) => string) {
  return {
    // Payouts: USDC sent on chain from the operator's payout wallet to a supplier's wallet.
    /**
     * hash, one per payout: id, supplierId, wallet (to), from (the payout wallet, once signed),
     * amount (micro-USDC), idempotencyKey (its SHA-256 hex), state (sending|pending|confirmed|failed),
     * createdAt, updatedAt (ms), nonce, txHash, rawTx (the signed transaction, recorded before it is
     * broadcast), hashes (every hash signed at that nonce, comma-separated), signedBlock (the head
     * when first signed), blockNumber, error. See lua/payout-create.lua and lua/payout-move.lua.
     */
    payout: (payoutId: string) => key(`payout:${payoutId}`),
    /** zset: the supplier's payout ids, scored by createdAt (ms) */
    supplierPayouts: (supplierId: string) => key(`supplier:${supplierId}:payouts`),
    /** zset: payouts not final yet (sending or pending), scored by createdAt: the sender's work */
    payoutsOpen: key('payouts:open'),
    /**
     * string, one per Idempotency-Key a supplier used (SHA-256 hex of it) -> payout id. Kept for
     * ever, as the payout is: a key that expired would let a late retry send a second transfer.
     */
    payoutKey: (supplierId: string, digest: string) => key(`supplier:${supplierId}:payout-key:${digest}`),
    /** string: the payout wallet's sender lock (lower-case address), a fencing token, SET NX PX */
    payoutSenderLock: (wallet: string) => key(`payout:sender:${wallet}`),
    /**
     * string: the payout wallet's (lower-case address) next nonce as its signed payouts count it,
     * raised by payout-move signed: a node answering from behind cannot make a nonce used twice.
     */
    payoutNextNonce: (wallet: string) => key(`payout:next-nonce:${wallet}`),
    /**
     * string: the relayer's (lower-case address) next nonce after the last send any replica made
     * from it, for a minute (src/funding/sender-lock.ts)
     */
    relayerNextNonce: (wallet: string) => key(`relayer:next-nonce:${wallet}`),
    /**
     * hash: nonce -> the signed bytes the relayer (lower-case address) broadcast at it, the last
     * 64: a dropped one is broadcast again while the next-nonce floor stands, an unmined one
     * signed again with higher fees (src/funding/unmined.ts)
     */
    relayerSent: (wallet: string) => key(`relayer:sent:${wallet}`),
    /**
     * hash: nonce -> when (unix ms) the relayer's (lower-case address) send at it was broadcast or
     * last signed again, until seen mined: whichever replica holds the key's turn raises its fee or
     * cancels it (src/funding/unmined.ts)
     */
    relayerUnmined: (wallet: string) => key(`relayer:unmined:${wallet}`),
  }
}
