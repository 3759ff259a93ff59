// A gateway that takes payments on a local chain: anvil with the test USDC (chain.ts) and a test
// stack (stack.ts) configured for it, settling with the relayer key or through a facilitator of
// the test's own (facilitator.ts), reading the chain directly or through an RPC of the test's own in
// front of anvil (holding-rpc.ts, lagging-rpc.ts, serveRpc). One stop closes them all.
import { startChain, type TestChain } from './chain.ts'
import type { TestFacilitator } from './facilitator.ts'
import { startStack, type TestStack } from './stack.ts'

/** An RPC of the test's own in front of anvil. */
export interface FrontRpc {
  url: string
  stop(): void
}

export interface ChainStackOptions<R extends FrontRpc | undefined, F extends TestFacilitator | undefined>
  extends Omit<NonNullable<Parameters<typeof startStack>[0]>, 'env'> {
  /** How many blocks confirm a payment (SVC_CONFIRMATIONS). */
  confirmations: number
  /** The gateway's environment besides the chain's. */
  env?: Record<string, string>
  /** Started on anvil's URL: the gateway reads and sends through it, not anvil (SVC_CHAIN_RPC_URL). */
  rpc?: (anvilUrl: string) => R
  /** Started on the chain: the gateway settles through it, with no relayer key of its own. */
  facilitator?: (chain: TestChain) => F
}

export interface ChainStack<R = undefined, F = undefined> {
  chain: TestChain
  stack: TestStack
  rpc: R
  facilitator: F
  /** Mining back on, so nothing the gateway waits on stays unmined, then each part stopped. */
  stop(): Promise<void>
}

export async function startChainStack<
  R extends FrontRpc | undefined = undefined,
  F extends TestFacilitator | undefined = undefined,
>(options: ChainStackOptions<R, F>): Promise<ChainStack<R, F>> {
  const { confirmations, env, rpc: startRpc, facilitator: startSettler, ...stackOptions } = options
  const chain = await startChain()
  const rpc = startRpc?.(chain.rpcUrl) as R
  const facilitator = startSettler?.(chain) as F
  // Settled through the facilitator, the gateway holds no relayer key.
  const { SVC_RELAYER_PRIVATE_KEY: relayerKey, ...chainEnv } = chain.env(confirmations)
  async function stop(stack?: TestStack): Promise<void> {
    await chain.testClient.setAutomine(true)
    await stack?.stop()
    facilitator?.stop()
    rpc?.stop()
    await chain.stop()
  }
  try {
    const stack = await startStack({
      ...stackOptions,
      env: {
        ...chainEnv,
        ...(facilitator
          ? { SVC_FACILITATOR_URL: facilitator.url }
          : { SVC_RELAYER_PRIVATE_KEY: relayerKey! }),
        ...(rpc ? { SVC_CHAIN_RPC_URL: rpc.url } : {}),
        ...env,
      },
    })
    return { chain, stack, rpc, facilitator, stop: () => stop(stack) }
  } catch (error) {
    await stop()
    throw error
  }
}

/** An RPC of the test's own on a free loopback port, answering each request with `answer`. */
export function serveRpc(answer: (request: Request) => Response | Promise<Response>): FrontRpc {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: answer })
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) }
}
