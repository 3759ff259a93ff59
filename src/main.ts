#!/usr/bin/env bun
// Entry: parse the subcommand, load config, start. One binary runs every subcommand.
import { runCommand } from './cli/run.ts'

if (await runCommand(process.argv.slice(2))) process.exit()
