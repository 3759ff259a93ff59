// A real local EVM for the funding tests: anvil (its binary ships inside the npm package
// @foundry-rs/anvil) on a free port with Base Sepolia's chain id, so x402 clients accept the
// network; the EIP-3009 token in contracts/ compiled by npm solc and deployed here; viem local
// accounts as payers. Nothing is mocked: the gateway settles on this chain.
//
// The token is compiled from contracts/TestUsdc.sol, never from a committed artifact, so its bytecode
// cannot drift from the source. Loading the WebAssembly compiler and compiling take seconds of CPU,
// so the output is cached in the temp folder under the SHA-256 of the compiler's input and version:
// the first test file of a run (or of the machine) compiles, the others read the file.
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import {
  type Abi,
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseAbi,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { freePort } from '../../src/redis/local-server.ts'

export const CHAIN_ID = 84532
export const USDC_NAME = 'USD Coin'
export const USDC_VERSION = '2'

// anvil's well-known development keys (mnemonic "test test ... junk"), funded with ETH at genesis.
const DEPLOYER_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80'
const RELAYER_KEY: Hex = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d'

export const usdcAbi = parseAbi([
  'function balanceOf(address) view returns (uint256)',
  'function mint(address to, uint256 value)',
  'function transfer(address to, uint256 value) returns (bool)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)',
])

const batchAbi = parseAbi(['function run(address target, bytes[] calls)'])

const compiled = new Map<string, { abi: Abi; bytecode: Hex }>()

const require = createRequire(import.meta.url)

/** Where the compiled contract for this exact input and compiler lives. */
function artifactPath(name: string, input: string): string {
  const solcVersion = require('solc/package.json').version as string
  const digest = createHash('sha256').update(solcVersion).update('\0').update(input).digest('hex')
  return join(tmpdir(), 'svc-gateway-tests', `${name}-${digest}.json`)
}

/** Compiles contracts/<name>.sol with solc-js, or reads the cached output of the same input. */
export function compileContract(name: string): { abi: Abi; bytecode: Hex } {
  const done = compiled.get(name)
  if (done) return done
  const source = readFileSync(join(import.meta.dir, `../../contracts/${name}.sol`), 'utf8')
  const input = JSON.stringify({
    language: 'Solidity',
    sources: { [`${name}.sol`]: { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: 'cancun',
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
    },
  })
  const path = artifactPath(name, input)
  try {
    const cached = JSON.parse(readFileSync(path, 'utf8'))
    compiled.set(name, cached)
    return cached
  } catch {}
  // Loaded only on a cache miss: the compiler alone takes seconds to load.
  const solc = require('solc') as { compile(input: string): string }
  const output = JSON.parse(solc.compile(input))
  const errors = (output.errors ?? []).filter((e: { severity: string }) => e.severity === 'error')
  if (errors.length)
    throw new Error(errors.map((e: { formattedMessage: string }) => e.formattedMessage).join('\n'))
  const contract = output.contracts[`${name}.sol`][name]
  const result = { abi: contract.abi as Abi, bytecode: `0x${contract.evm.bytecode.object}` as Hex }
  compiled.set(name, result)
  // Written aside and renamed, so a file running in parallel never reads half an artifact.
  mkdirSync(dirname(path), { recursive: true })
  const partial = `${path}.${process.pid}`
  writeFileSync(partial, JSON.stringify(result))
  renameSync(partial, path)
  return result
}

/** Compiles contracts/TestUsdc.sol (compileContract). */
export const compileTestUsdc = () => compileContract('TestUsdc')

/** transferWithAuthorization's arguments for the signed authorization of an X-PAYMENT header (v1). */
function transferArgs(header: string) {
  const { payload } = JSON.parse(Buffer.from(header, 'base64').toString()) as {
    payload: {
      signature: Hex
      authorization: Record<'from' | 'to' | 'value' | 'validAfter' | 'validBefore' | 'nonce', string>
    }
  }
  const a = payload.authorization
  return [
    a.from as Address,
    a.to as Address,
    BigInt(a.value),
    BigInt(a.validAfter),
    BigInt(a.validBefore),
    a.nonce as Hex,
    payload.signature,
  ] as const
}

/** The anvil binary of this platform's optional package, run directly (no Node wrapper process). */
export function anvilBinary(): string {
  const arch = process.arch === 'x64' ? 'amd64' : process.arch
  const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`)
  return join(dirname(pkg), 'bin', 'anvil')
}

async function waitForRpc(rpcUrl: string, deadline: number): Promise<void> {
  for (;;) {
    try {
      const response = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      })
      if (response.ok) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`anvil did not answer at ${rpcUrl}`)
    await Bun.sleep(25)
  }
}

/** A fresh local chain; `chainId` other than Base Sepolia's is another network's node (x402 clients refuse it). */
export async function startChain(chainId = CHAIN_ID) {
  const port = freePort()
  const child = Bun.spawn(
    [anvilBinary(), '--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--quiet'],
    { stdout: 'ignore', stderr: 'inherit' },
  )
  const rpcUrl = `http://127.0.0.1:${port}`
  try {
    await waitForRpc(rpcUrl, Date.now() + 10_000)
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  const chain = { ...baseSepolia, id: chainId, rpcUrls: { default: { http: [rpcUrl] } } }
  // A busy machine makes a long call (mining many blocks) slow, not wrong: the test's own time limit
  // is the hang guard, not viem's 10 s default.
  const transport = http(rpcUrl, { timeout: 60_000 })
  const publicClient = createPublicClient({ chain, transport, cacheTime: 0, pollingInterval: 50 })
  const testClient = createTestClient({ chain, transport, mode: 'anvil' })
  const deployer = createWalletClient({ chain, transport, account: privateKeyToAccount(DEPLOYER_KEY) })

  const { abi, bytecode } = compileTestUsdc()
  const deployHash = await deployer.deployContract({ abi, bytecode, args: [USDC_NAME, USDC_VERSION] })
  const deployed = await publicClient.waitForTransactionReceipt({ hash: deployHash })
  if (!deployed.contractAddress) throw new Error('TestUsdc deployment has no address')
  const usdc: Address = deployed.contractAddress
  const payTo = privateKeyToAccount(generatePrivateKey()).address

  // The deployer's sends are serialized so their nonces never collide.
  let minting: Promise<unknown> = Promise.resolve()
  async function mint(to: Address, micros: bigint): Promise<void> {
    const run = minting.then(async () => {
      const hash = await deployer.writeContract({
        address: usdc,
        abi: usdcAbi,
        functionName: 'mint',
        args: [to, micros],
      })
      await publicClient.waitForTransactionReceipt({ hash })
    })
    minting = run.catch(() => {})
    await run
  }

  return {
    rpcUrl,
    chainId,
    usdc,
    payTo,
    relayerKey: RELAYER_KEY,
    publicClient,
    testClient,
    mint,
    /** A fresh payer (a viem local account, no ETH needed: the relayer pays gas) holding `micros`. */
    async newPayer(micros = 1_000_000_000n): Promise<PrivateKeyAccount> {
      const account = privateKeyToAccount(generatePrivateKey())
      if (micros > 0n) await mint(account.address, micros)
      return account
    },
    /**
     * The payer's own transfer of `micros` to `to`, outside any authorization (given the ETH for its
     * gas); the mined transaction and its block.
     */
    async plainTransfer(payer: PrivateKeyAccount, to: Address, micros: bigint) {
      await testClient.setBalance({ address: payer.address, value: 10n ** 18n })
      const wallet = createWalletClient({ chain, transport, account: payer })
      const hash = await wallet.writeContract({
        address: usdc,
        abi: usdcAbi,
        functionName: 'transfer',
        args: [to, micros],
      })
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== 'success') throw new Error(`plain transfer ${hash} reverted`)
      return { transaction: hash, blockNumber: receipt.blockNumber }
    },
    /**
     * What anyone holding a copy of an X-PAYMENT header (v1) can do: send its signed authorization
     * from a wallet of their own (given the ETH for its gas); the mined transaction and its block.
     */
    async sendAuthorization(header: string) {
      const sender = privateKeyToAccount(generatePrivateKey())
      await testClient.setBalance({ address: sender.address, value: 10n ** 18n })
      const wallet = createWalletClient({ chain, transport, account: sender })
      const hash = await wallet.writeContract({
        address: usdc,
        abi: usdcAbi,
        functionName: 'transferWithAuthorization',
        args: transferArgs(header),
      })
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== 'success') throw new Error(`authorization sent in ${hash} reverted`)
      return { transaction: hash, blockNumber: receipt.blockNumber }
    },
    /**
     * What a payer (or a facilitator) batching its authorizations does: send the signed
     * authorizations of several X-PAYMENT headers (v1) in one transaction, through a multicall
     * contract (contracts/Batch.sol) deployed here; the mined transaction and its block.
     */
    async sendAuthorizations(headers: string[]) {
      // Deployed by a sender of its own: the deployer's sends (mints) keep their own order.
      const sender = privateKeyToAccount(generatePrivateKey())
      await testClient.setBalance({ address: sender.address, value: 10n ** 18n })
      const wallet = createWalletClient({ chain, transport, account: sender })
      const batch = compileContract('Batch')
      const deploy = await wallet.deployContract({ abi: batch.abi, bytecode: batch.bytecode })
      const address = (await publicClient.waitForTransactionReceipt({ hash: deploy })).contractAddress
      if (!address) throw new Error('Batch deployment has no address')
      const calls = headers.map((header) =>
        encodeFunctionData({
          abi: usdcAbi,
          functionName: 'transferWithAuthorization',
          args: transferArgs(header),
        }),
      )
      const hash = await wallet.writeContract({
        address,
        abi: batchAbi,
        functionName: 'run',
        args: [usdc, calls],
      })
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== 'success') throw new Error(`batch ${hash} reverted`)
      return { transaction: hash, blockNumber: receipt.blockNumber }
    },
    /**
     * The payer's EIP-3009 cancelAuthorization of its authorization `nonce`, signed by the payer and
     * sent from a wallet of the test's own (given the ETH for its gas); the mined transaction and its block.
     */
    async cancelAuthorization(payer: PrivateKeyAccount, nonce: Hex) {
      const signature = await payer.signTypedData({
        domain: { name: USDC_NAME, version: USDC_VERSION, chainId, verifyingContract: usdc },
        types: {
          CancelAuthorization: [
            { name: 'authorizer', type: 'address' },
            { name: 'nonce', type: 'bytes32' },
          ],
        },
        primaryType: 'CancelAuthorization',
        message: { authorizer: payer.address, nonce },
      })
      const sender = privateKeyToAccount(generatePrivateKey())
      await testClient.setBalance({ address: sender.address, value: 10n ** 18n })
      const wallet = createWalletClient({ chain, transport, account: sender })
      const hash = await wallet.writeContract({
        address: usdc,
        abi: usdcAbi,
        functionName: 'cancelAuthorization',
        args: [payer.address, nonce, signature],
      })
      const receipt = await publicClient.waitForTransactionReceipt({ hash })
      if (receipt.status !== 'success') throw new Error(`cancellation ${hash} reverted`)
      return { transaction: hash, blockNumber: receipt.blockNumber }
    },
    balanceOf(address: Address): Promise<bigint> {
      return publicClient.readContract({
        address: usdc,
        abi: usdcAbi,
        functionName: 'balanceOf',
        args: [address],
      })
    },
    /** The gateway's funding configuration for this chain, self-facilitated by the relayer key. */
    env(confirmations = 2): Record<string, string> {
      return {
        SVC_X402_NETWORK: 'base-sepolia',
        SVC_CHAIN_RPC_URL: rpcUrl,
        SVC_USDC_ADDRESS: usdc,
        SVC_USDC_NAME: USDC_NAME,
        SVC_USDC_VERSION: USDC_VERSION,
        SVC_PAY_TO: payTo,
        SVC_RELAYER_PRIVATE_KEY: RELAYER_KEY,
        SVC_CONFIRMATIONS: String(confirmations),
      }
    },
    async stop(): Promise<void> {
      child.kill('SIGTERM')
      await child.exited
    },
  }
}

export type TestChain = Awaited<ReturnType<typeof startChain>>
