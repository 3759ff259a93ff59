// `svc-gateway <command> --help` prints that command's usage and exits 0, running nothing: no
// environment is read (an operator command would otherwise stop on an unset REDIS_URL) and no
// server starts (`sim --help` and `serve --help` would otherwise listen).
import { expect, test } from 'bun:test'
import { runCli } from '../helpers/cli.ts'

const COMMANDS = ['serve', 'sim', 'demo', 'account', 'offer', 'supplier', 'audit', 'export', 'layout']
const MORE = ['functions', 'sizing']

test('each command given --help prints its usage on stdout and exits 0, with no environment', async () => {
  for (const command of [...COMMANDS, ...MORE]) {
    for (const flag of ['--help', '-h']) {
      const r = await runCli([command, flag], {})
      expect({ command, flag, code: r.code, stderr: r.stderr }).toEqual({
        command,
        flag,
        code: 0,
        stderr: '',
      })
      expect(r.stdout).toStartWith('usage:')
      expect(r.stdout).toContain(command)
    }
  }
})

test('the usage names every option the README documents for account credit and sizing', async () => {
  expect((await runCli(['account', '--help'], {})).stdout).toContain('--idempotency-key')
  const sizing = (await runCli(['sizing', '--help'], {})).stdout
  for (const option of ['--accounts', '--pin', '--io-threads', '--max-in-flight'])
    expect(sizing).toContain(option)
  const top = await runCli(['--help'], {})
  expect(top.code).toBe(0)
  expect(top.stdout).toContain('[--idempotency-key <text>]')
  expect(top.stdout).toContain('--help')
})
