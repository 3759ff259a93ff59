// How every operator command ends: its result as JSON on stdout (exit 0), a usage mistake with the
// usage text (exit 2), or an API error in the API's own shape on stderr (exit 1).
import { ApiError } from '../errors.ts'

export class UsageError extends Error {}

export async function runOperatorCommand(usage: string, command: () => Promise<unknown>): Promise<void> {
  try {
    console.log(JSON.stringify(await command(), null, 2))
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n${usage}`)
      process.exitCode = 2
    } else if (error instanceof ApiError) {
      console.error(JSON.stringify(error.body()))
      process.exitCode = 1
    } else {
      throw error
    }
  }
}
