#!/usr/bin/env bun
// Entry: parse the subcommand, load config, start. One binary runs every subcommand.
import { serveWithSteadyAllocator } from './cli/allocator.ts'
import { runCommand } from './cli/run.ts'

const argv = process.argv.slice(2)
serveWithSteadyAllocator(argv[0] ?? 'serve')
if (await runCommand(argv)) process.exit()
