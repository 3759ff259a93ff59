// The payout wallet's balances in /metrics (read on a timer, not per scrape) and the log's warning
// while either is below its threshold.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createLogger } from '../../src/logger.ts'
import { adminFetch, logCapture } from '../helpers/accounts.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { payoutEnv, payoutWalletOn } from '../helpers/payouts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let chain: TestChain
let stack: TestStack
const capture = logCapture()

beforeAll(async () => {
  chain = await startChain()
  const wallet = await payoutWalletOn(chain, 5_000_000n)
  stack = await startStack({
    env: {
      ...payoutEnv(chain, wallet.key),
      SVC_PAYOUT_LOW_USDC: '10.000000',
      // the wallet holds 10 ETH: above this threshold, so no gas warning
      SVC_PAYOUT_LOW_GAS_ETH: '1.000000',
    },
    logger: createLogger('info', 'svc-gateway', capture.stream),
  })
})
afterAll(async () => {
  await stack.stop()
  await chain.stop()
})

test('/metrics shows the payout wallet USDC and gas; the log warns of low USDC only', async () => {
  let text = ''
  // The gauges are the process's: a file run before this one in the same worker may have set them,
  // so wait for this wallet's balance rather than for the gauge's name.
  await until(async () => {
    text = await (await adminFetch(stack, '/metrics')).text()
    return text.includes('svc_payout_wallet_usdc_micros 5000000\n')
  }, 50)
  expect(text).toContain('svc_payout_wallet_usdc_micros 5000000\n')
  expect(text).toContain(`svc_payout_wallet_gas_wei ${10 ** 19}\n`)
  const warnings = capture.lines.map((line) => JSON.parse(line)).filter((l) => l.level === 40)
  expect(warnings.map((l) => l.msg)).toContain('payout wallet low on USDC')
  expect(warnings.map((l) => l.msg)).not.toContain('payout wallet low on gas')
  expect(warnings.find((l) => l.msg === 'payout wallet low on USDC')).toMatchObject({
    usdc: '5.000000',
    below: '10.000000',
  })
})
