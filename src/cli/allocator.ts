// Bun's allocator (its build of mimalloc) hands the free blocks inside pages still in use back to
// the system as soon as it can ("purge holes"), on a thread of its own. A gateway frees and
// allocates the same sizes on every request, so those pages are faulted back in at once
// (BENCHMARKS.md, "The allocator off its hole purging" has what it cost). Whole free spans still
// go back after the allocator's delay, so memory
// taken in a burst is returned all the same.
//
// The allocator reads its options from the environment once, at start: a serving process that was
// not started with the option set runs itself again, in place (same pid, stdio and arguments),
// with it set. An operator who sets MIMALLOC_PURGE_HOLES keeps their value.

const OPTION = 'MIMALLOC_PURGE_HOLES'

/** The commands that serve requests: only they run long enough, and hot enough, to pay the churn. */
const SERVING = new Set(['serve', 'demo'])

/** This process's own command line, as execve takes it: a compiled binary's, or bun's with its script. */
function ownArguments(): string[] {
  const compiled = Bun.main.startsWith('/$bunfs/')
  const rest = compiled ? process.argv.slice(2) : [...process.execArgv, ...process.argv.slice(1)]
  return [process.execPath, ...rest]
}

/** Runs this process again with the allocator's hole purging off, when `command` serves requests. */
export function serveWithSteadyAllocator(command: string): void {
  if (!SERVING.has(command) || process.env[OPTION] !== undefined) return
  try {
    process.execve?.(process.execPath, ownArguments(), { ...process.env, [OPTION]: '0' })
  } catch {
    // No execve here: the process serves on with the allocator's defaults.
  }
}
