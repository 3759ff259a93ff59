/** A script that includes no library: its EVAL form is its body. */
export const standalone = (lua: string, keys: number) => ({ lua, body: lua, market: false, keys })
