// cluster-key-slot (ioredis' own dependency) ships no types.
declare module 'cluster-key-slot' {
  /** The Cluster slot (0..16383) of a key, by its hash tag where it has one. */
  export default function calculateSlot(key: string): number
}
