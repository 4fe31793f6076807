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

/**
 * Decompress `data` (raw deflate or gzip), throwing `tooBig(total)` the moment the output passes
 * `cap` (a decompression bomb never gets allocated) and `damaged()` when it does not decompress.
 */
export function decompressCapped(
  format: 'deflate' | 'gzip',
  data: Uint8Array,
  cap: number,
  errors: { tooBig: (bytes: number) => Error; damaged: () => Error },
): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let over: Error | null = null;
  const onChunk = (chunk: Uint8Array) => {
    total += chunk.length;
    if (total > cap) throw (over = errors.tooBig(total));
    chunks.push(chunk);
  };
  const stream = format === 'gzip' ? new Gunzip(onChunk) : new Inflate(onChunk);
  try {
    stream.push(data, true);
  } catch (err) {
    if (over && err === over) throw err;
    throw errors.damaged();
  }
  return joinChunks(chunks, total);
}
