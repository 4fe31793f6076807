/**
 * A paged KV cache for batched decoding (issue 12). Every layer keeps one K store and one V store
 * of shape (pages · PAGE, Hkv, D); a sequence owns a list of pages, so sequences of any length
 * share the stores without a slot of the maximum length each. A step's new rows are described to
 * the kernels by one host object, `PagedBatch` (uploaded once per step on the GPU).
 *
 * Row n of a step (one new token of some sequence) sits at position pos[n] of its sequence, writes
 * its k/v to store row dest[n], and attends to keys 0 ..= pos[n] of its sequence, key j being store
 * row pages[seq[n] · maxPages + ⌊j / pageSize⌋] · pageSize + j mod pageSize.
 */

export interface PagedBatch {
  /** Rows per page of the stores. */
  pageSize: number;
  /** Columns of `pages` (the longest page list in this step). */
  maxPages: number;
  /** (N) position of each new row in its sequence (its RoPE angle; it sees keys 0 ..= pos). */
  pos: Uint32Array;
  /** (N) store row that each new row's k and v are written to. */
  dest: Uint32Array;
  /** (N) row of `pages` that lists the pages of each new row's sequence. */
  seq: Uint32Array;
  /** (numSeq, maxPages) page ids of each sequence in this step (unused entries 0). */
  pages: Uint32Array;
}
