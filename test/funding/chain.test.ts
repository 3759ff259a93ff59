// The chain harness itself: anvil answers with chain id 84532, the compiled token mints, and an
// EIP-3009 authorization moves tokens exactly once.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createWalletClient, http, parseAbi, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { loadFundingConfig } from '../../src/config.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { CHAIN_ID, startChain, type TestChain, USDC_NAME, USDC_VERSION } from '../helpers/chain.ts'
import { authorizationTypes } from '../helpers/x402.ts'

let chain: TestChain
beforeAll(async () => {
  chain = await startChain()
  // Compiling the token and starting anvil can pass bun's 5 s hook default on a busy machine.
}, 30_000)
afterAll(() => chain.stop())

const transferAbi = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
])

test('anvil runs with chain id 84532 and the token mints', async () => {
  expect(await chain.publicClient.getChainId()).toBe(CHAIN_ID)
  const payer = await chain.newPayer(5_000_000n)
  expect(await chain.balanceOf(payer.address)).toBe(5_000_000n)
})

test('transferWithAuthorization moves the amount once; a replay reverts', async () => {
  const payer = await chain.newPayer(5_000_000n)
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)))
  const now = BigInt(Math.floor(Date.now() / 1000))
  const message = {
    from: payer.address,
    to: chain.payTo,
    value: 2_000_000n,
    validAfter: now - 600n,
    validBefore: now + 600n,
    nonce,
  }
  const signature = await payer.signTypedData({
    domain: { name: USDC_NAME, version: USDC_VERSION, chainId: CHAIN_ID, verifyingContract: chain.usdc },
    types: authorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message,
  })
  const relayer = createWalletClient({
    chain: baseSepolia,
    transport: http(chain.rpcUrl),
    account: privateKeyToAccount(chain.relayerKey),
  })
  const args = [
    message.from,
    message.to,
    message.value,
    message.validAfter,
    message.validBefore,
    nonce,
    signature,
  ] as const
  const hash = await relayer.writeContract({
    address: chain.usdc,
    abi: transferAbi,
    functionName: 'transferWithAuthorization',
    args,
  })
  expect((await chain.publicClient.waitForTransactionReceipt({ hash })).status).toBe('success')
  expect(await chain.balanceOf(payer.address)).toBe(3_000_000n)
  expect(await chain.balanceOf(chain.payTo)).toBe(2_000_000n)
  await expect(
    chain.publicClient.simulateContract({
      address: chain.usdc,
      abi: transferAbi,
      functionName: 'transferWithAuthorization',
      args,
      account: relayer.account,
    }),
  ).rejects.toThrow(/authorization is used/)
})

test('the funding chain knows a pending transaction, not a made-up one, and a node that fails says neither', async () => {
  const config = loadFundingConfig(chain.env(1))!
  const known = fundingChain(config).known
  const payer = await chain.newPayer(1_000_000n)
  await chain.testClient.setBalance({ address: payer.address, value: 10n ** 18n })
  await chain.testClient.setAutomine(false)
  try {
    const wallet = createWalletClient({ account: payer, chain: baseSepolia, transport: http(chain.rpcUrl) })
    const pending = await wallet.sendTransaction({ to: chain.payTo, value: 0n })
    expect(await known(pending)).toBe(true)
    expect(await known(toHex(crypto.getRandomValues(new Uint8Array(32))))).toBe(false)
    // A node that does not answer: an error, never "gone", so no claim is released on its word.
    const down = fundingChain({ ...config, chainRpcUrl: 'http://127.0.0.1:9' }).known
    await expect(down(pending)).rejects.toThrow()
  } finally {
    await chain.testClient.setAutomine(true)
  }
})
