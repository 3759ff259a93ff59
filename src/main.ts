#!/usr/bin/env bun
// Entry: parse the subcommand, load config, start. One binary runs every subcommand.
import pkg from '../package.json' with { type: 'json' }
import { account } from './cli/account.ts'
import { audit } from './cli/audit.ts'
import { demo } from './cli/demo.ts'
import { exportSettled } from './cli/export.ts'
import { functions } from './cli/functions.ts'
import { offer } from './cli/offer.ts'
import { serve } from './cli/serve.ts'
import { sim } from './cli/sim.ts'
import { supplier } from './cli/supplier.ts'
import { ConfigError } from './config.ts'

const USAGE = `svc-gateway ${pkg.version}
usage: svc-gateway [command]
  serve     run the gateway (default); configured by environment variables
  sim       run the simulated supplier (Venice-style upstream with fault injection)
  demo      a local Redis, the simulated supplier and the gateway, ready to call
  account   operator account commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX):
            account create --wallet <0x...> | credit <accountId> <amountUsdc> [--note <text>]
            | show <accountId>
  offer     operator offer commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX, SVC_MASTER_KEY):
            offer create|update|pause|resume|delete|list (see: svc-gateway offer)
  supplier  operator supplier commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX):
            supplier list | show|suspend|reinstate <supplierId>
  audit     check the money invariants over the whole keyspace; exit 1 naming what is off;
            audit --chain also reads every confirmed payout's transfer on chain (the funding variables)
  export    the market's settled attempts as JSON lines on stdout, through a consumer group
            (REDIS_URL, SVC_REDIS_PREFIX): export --group <name> [--once] [--consumer <name>]
  functions the gateway's Redis function libraries, one per deployed version (REDIS_URL):
            functions [list] | prune [--dry-run] (deletes every version's but this build's)
  --version print the version`

async function main(argv: string[]): Promise<void> {
  const command = argv[0] ?? 'serve'
  switch (command) {
    case 'serve':
      return serve()
    case 'sim':
      return sim()
    case 'demo':
      return demo()
    case 'offer':
      return offer(argv.slice(1))
    case 'supplier':
      return supplier(argv.slice(1))
    case 'audit':
      return audit(argv.slice(1))
    case 'export':
      return exportSettled(argv.slice(1))
    case 'functions':
      return functions(argv.slice(1))
    case 'account':
      return account(argv.slice(1))
    case '--version':
    case 'version':
      console.log(pkg.version)
      return
    case '--help':
    case 'help':
      console.log(USAGE)
      return
    default:
      console.error(`unknown command: ${command}\n${USAGE}`)
      process.exit(2)
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof ConfigError) console.error(error.message)
  else console.error(`svc-gateway: ${(error as Error)?.message ?? String(error)}`)
  process.exit(error instanceof ConfigError ? 2 : 1)
})
