// Lua scripts are embedded as text (`with { type: 'text' }`) so the compiled binary carries them.
declare module '*.lua' {
  const source: string
  export default source
}
