// The pages' HTML, scripts and styles, bundled by Bun from their HTML entries. `bun build
// --compile` bundles every imported .html into the binary ahead of time (the import's `files`); run
// from source, the same entry is bundled once at first use with Bun.build. Either way the result is
// one HTML per page whose scripts and styles are files served from ASSET_PATH, named by content hash.

import { basename } from 'node:path'
import type { HTMLBundle } from 'bun'

export const ASSET_PATH = '/pages/assets/'

export interface Asset {
  body: Uint8Array
  type: string
}

export interface BuiltPage {
  html: string
  assets: Map<string, Asset>
}

/** Points the HTML's references to its own files at ASSET_PATH. */
function linkAssets(html: string, names: Iterable<string>): string {
  let linked = html
  for (const name of names) {
    linked = linked
      .replaceAll(`"/${name}"`, `"${ASSET_PATH}${name}"`)
      .replaceAll(`"./${name}"`, `"${ASSET_PATH}${name}"`)
  }
  return linked
}

async function fromBinary(index: string, files: NonNullable<HTMLBundle['files']>): Promise<BuiltPage> {
  const assets = new Map<string, Asset>()
  let html = ''
  for (const file of files) {
    if (file.path === index) {
      html = await Bun.file(file.path).text()
      continue
    }
    const body = await Bun.file(file.path).bytes()
    assets.set(basename(file.path), { body, type: file.headers['content-type'] })
  }
  return { html: linkAssets(html, assets.keys()), assets }
}

async function fromSource(bundle: HTMLBundle): Promise<BuiltPage> {
  const naming = '[name]-[hash].[ext]'
  const result = await Bun.build({
    entrypoints: [bundle.index],
    minify: true,
    publicPath: ASSET_PATH,
    naming: { entry: naming, chunk: naming, asset: naming },
  })
  if (!result.success) throw new AggregateError(result.logs, `bundling ${bundle.index} failed`)
  const assets = new Map<string, Asset>()
  let html = ''
  for (const output of result.outputs) {
    if (output.path.endsWith('.html')) html = await output.text()
    else
      assets.set(basename(output.path), {
        body: new Uint8Array(await output.arrayBuffer()),
        type: output.type,
      })
  }
  return { html: linkAssets(html, assets.keys()), assets }
}

// Each page is built once per process, whatever the number of apps that serve it (bundling from
// source takes a second of CPU; the tests start many apps).
const built = new Map<string, Promise<BuiltPage>>()

/** The page and its files, from the binary when it was compiled, else bundled now. */
export function buildPage(bundle: HTMLBundle): Promise<BuiltPage> {
  // HTMLBundle's fields are getters: read them here, never spread the object.
  const index = bundle.index
  let page = built.get(index)
  if (!page) {
    const files = bundle.files
    page = files ? fromBinary(index, files) : fromSource(bundle)
    built.set(index, page)
    page.catch(() => built.delete(index))
  }
  return page
}
