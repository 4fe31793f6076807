/**
 * Bytes from untrusted sources, read with a hard cap: decompress (deflate or gzip, via fflate)
 * and join streamed chunks, failing as soon as the output passes the cap. Share links, run files
 * and fetched run files all read through these, each with its own typed errors.
 */
import { Gunzip, Inflate } from 'fflate';

/** Join chunks whose lengths add up to `total`. */
export function joinChunks(
  chunks: readonly Uint8Array[],
  total = chunks.reduce((n, c) => n + c.length, 0),
): Uint8Array {
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Compressed bytes fed to the inflater at a time: at most ~4 MiB of output per piece. */
const INFLATE_SLICE = 4096;

/**
 * Decompress `data` (raw deflate or gzip), throwing `tooBig(total)` the moment the output passes
 * `cap` (a decompression bomb never gets allocated) and `damaged()` when it does not decompress.
 * The input is fed in INFLATE_SLICE pieces: fflate emits a push's whole output at once, and one
 * deflate byte can unpack to ~1000, so a slice bounds what is allocated before the cap is checked.
 * `onChunk` sees each piece of output as it comes (a parser may stop early by throwing).
 */
export function decompressCapped(
  format: 'deflate' | 'gzip',
  data: Uint8Array,
  cap: number,
  errors: { tooBig: (bytes: number) => Error; damaged: () => Error },
  onChunk?: (chunk: Uint8Array) => void,
): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let thrown: unknown = null;
  const take = (chunk: Uint8Array) => {
    total += chunk.length;
    if (total > cap) throw (thrown = errors.tooBig(total));
    try {
      onChunk?.(chunk);
    } catch (err) {
      throw (thrown = err);
    }
    chunks.push(chunk);
  };
  const stream = format === 'gzip' ? new Gunzip(take) : new Inflate(take);
  try {
    for (let at = 0; at < data.length || at === 0; at += INFLATE_SLICE) {
      const end = Math.min(data.length, at + INFLATE_SLICE);
      stream.push(data.subarray(at, end), end === data.length);
    }
  } catch (err) {
    if (thrown !== null && err === thrown) throw err;
    throw errors.damaged();
  }
  return joinChunks(chunks, total);
}
