// Every subcommand of the one binary, by name: what src/main.ts runs, and what tests run in-process.
import pkg from '../../package.json' with { type: 'json' }
import { ConfigError } from '../config.ts'

const USAGE = `svc-gateway ${pkg.version}
usage: svc-gateway [command]
  serve     run the gateway (default); configured by environment variables (README, Configuration):
            REDIS_URL, SVC_ADMIN_TOKEN, SVC_MASTER_KEY and SVC_UPSTREAM_URL required
  sim       run the simulated supplier (Venice-style upstream with fault injection; SIM_PORT, default 8090)
  demo      a local Redis, the simulated supplier and the gateway, ready to call (PORT, default 8080)
  account   operator account commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX):
            account create --wallet <0x...> | credit <accountId> <amountUsdc> [--note <text>]
            [--idempotency-key <text>] | show <accountId>
  offer     operator offer commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX, SVC_MASTER_KEY):
            offer create|update|pause|resume|delete|list (see: svc-gateway offer)
  supplier  operator supplier commands, straight to Redis (REDIS_URL, SVC_REDIS_PREFIX):
            supplier list | show|suspend|reinstate <supplierId>
  audit     check the money invariants over the whole keyspace; exit 1 naming what is off;
            audit --chain also reads every confirmed payout's transfer on chain (the funding variables)
  export    the market's settled attempts as JSON lines on stdout, through a consumer group
            (REDIS_URL, SVC_REDIS_PREFIX): export --group <name> [--once] [--consumer <name>]
  layout    the market's layout recorded in Redis (REDIS_URL, SVC_REDIS_PREFIX):
            layout [show] | migrate apart (a one-slot market moved apart, every gateway stopped)
  functions the gateway's Redis function libraries, one per deployed version (REDIS_URL):
            functions [list] | prune [--dry-run] (deletes every version's but this build's)
  sizing    paid requests/s and Redis CPU per request on this machine, for 1 and 3 Redis masters
            and 1, 2, 4, 8 replicas (starts its own; needs redis-server and redis-cli):
            sizing [--masters 1,3] [--replicas 1,2,4,8] [--clients 32] [--seconds 5] [--layout one-slot|apart] [--offers 1]
                   [--max-in-flight N] [--accounts N] [--pin N] [--io-threads 1]
  --version print the version
  <command> --help   that command's usage`

/** A command's own usage where it prints one, else its lines of USAGE above. */
async function commandHelp(command: string): Promise<string | undefined> {
  switch (command) {
    case 'account':
      return (await import('./account.ts')).ACCOUNT_USAGE
    case 'offer':
      return (await import('./offer.ts')).OFFER_USAGE
    case 'supplier':
      return (await import('./supplier.ts')).SUPPLIER_USAGE
    case 'export':
      return (await import('./export.ts')).EXPORT_USAGE
    case 'layout':
      return (await import('./layout.ts')).LAYOUT_USAGE
    case 'functions':
      return (await import('./functions.ts')).FUNCTIONS_USAGE
  }
  const lines = USAGE.split('\n')
  const start = lines.findIndex((line) => line.startsWith(`  ${command} `))
  if (start < 0) return undefined
  const end = lines.findIndex((line, i) => i > start && !line.startsWith(' '.repeat(12)))
  return ['usage:', ...lines.slice(start, end < 0 ? undefined : end)].join('\n')
}

// Each command's module is loaded when it runs: a process loads what its one command needs (the
// simulated supplier no gateway, `serve` no chain client for audits), and starts sooner for it.
async function dispatch(argv: string[]): Promise<void> {
  const command = argv[0] ?? 'serve'
  const rest = argv.slice(1)
  // `<command> --help` prints, and never runs: `sim --help` or `serve --help` would start a server.
  if (rest.includes('--help') || rest.includes('-h')) {
    const help = await commandHelp(command)
    if (help !== undefined) {
      console.log(help)
      return
    }
  }
  switch (command) {
    case 'serve':
      return (await import('./serve.ts')).serve()
    case 'sim':
      return (await import('./sim.ts')).sim()
    case 'demo':
      return (await import('./demo.ts')).demo()
    case 'offer':
      return (await import('./offer.ts')).offer(rest)
    case 'supplier':
      return (await import('./supplier.ts')).supplier(rest)
    case 'audit':
      return (await import('./audit.ts')).audit(rest)
    case 'export':
      return (await import('./export.ts')).exportSettled(rest)
    case 'layout':
      return (await import('./layout.ts')).layout(rest)
    case 'functions':
      return (await import('./functions.ts')).functions(rest)
    case 'account':
      return (await import('./account.ts')).account(rest)
    case 'sizing':
      return (await import('./sizing.ts')).sizing(rest)
    case '--version':
    case 'version':
      console.log(pkg.version)
      return
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE)
      return
    default:
      console.error(`unknown command: ${command}\n${USAGE}`)
      process.exitCode = 2
  }
}

/**
 * Runs one subcommand in this process. A command reports through stdout, stderr and
 * process.exitCode; a throw is printed here and becomes exit code 2 (configuration) or 1. Returns
 * true when it threw, so the binary exits at once rather than wait on what the command left open.
 */
export async function runCommand(argv: string[]): Promise<boolean> {
  try {
    await dispatch(argv)
    return false
  } catch (error) {
    if (error instanceof ConfigError) console.error(error.message)
    else console.error(`svc-gateway: ${(error as Error)?.message ?? String(error)}`)
    process.exitCode = error instanceof ConfigError ? 2 : 1
    return true
  }
}
