// `svc-gateway supplier ...`: the operator's supplier commands, straight to Redis through the same
// service as /admin/v1/suppliers, printing the same JSON. Config from the environment: REDIS_URL,
// SVC_REDIS_PREFIX.
import { loadStoreConfig } from '../config.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'
import { adminSupplierView, SupplierStore } from '../suppliers/store.ts'
import { runOperatorCommand, UsageError } from './operator-command.ts'

export const SUPPLIER_USAGE = `usage:
  svc-gateway supplier list
  svc-gateway supplier show|suspend|reinstate <supplierId>`

async function run(suppliers: SupplierStore, command: string | undefined, id: string | undefined) {
  const needId = () => {
    if (!id) throw new UsageError(`supplier ${command} needs a supplier id`)
    return id
  }
  switch (command) {
    case 'list':
      return { object: 'list', data: (await suppliers.list()).map(adminSupplierView) }
    case 'show':
      return adminSupplierView(await suppliers.require(needId()))
    case 'suspend':
      return adminSupplierView(await suppliers.setStatus(needId(), 'suspended'))
    case 'reinstate':
      return adminSupplierView(await suppliers.setStatus(needId(), 'active'))
    default:
      throw new UsageError(command ? `unknown supplier command: ${command}` : 'supplier needs a command')
  }
}

export async function supplier(args: string[]): Promise<void> {
  const config = loadStoreConfig()
  const store = createStore(config.redisUrl, { name: 'svc-cli' })
  try {
    await runOperatorCommand(SUPPLIER_USAGE, async () => {
      const [command, id, ...extra] = args
      const takes = command === 'list' ? 0 : 1
      if (extra.length > 0 || (command === 'list' && id !== undefined))
        throw new UsageError(`supplier ${command} takes ${takes === 0 ? 'no argument' : 'one supplier id'}`)
      return run(new SupplierStore(store, await recordedKeyspace(store, config.redisPrefix)), command, id)
    })
  } finally {
    store.close()
  }
}
