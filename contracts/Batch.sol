// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// A multicall for the funding tests: calls one contract with each of `calls` in one transaction,
/// reverting them all if one fails, as a wallet or a facilitator batches EIP-3009
/// transferWithAuthorization calls. Test-only.
contract Batch {
    function run(address target, bytes[] calldata calls) external {
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory reason) = target.call(calls[i]);
            if (!ok) {
                assembly {
                    revert(add(reason, 32), mload(reason))
                }
            }
        }
    }
}
