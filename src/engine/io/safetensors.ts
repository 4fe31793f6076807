/**
 * safetensors: read and write, treating every file as hostile.
 *
 * Layout (little-endian):
 *
 *   [8 bytes]  N, the header length (u64)
 *   [N bytes]  header: a UTF-8 JSON object
 *                { "__metadata__": { "<key>": "<string>", ... },            (optional)
 *                  "<tensor>": { "dtype": "F32" | "F16" | "BF16" | ...,
 *                                "shape": [d0, d1, ...],                      (row-major)
 *                                "data_offsets": [begin, end] }, ... }        (relative to the data)
 *   [rest]     data: the tensors' bytes
 *
 * Every number in the header is checked before it is used: the header length against the file,
 * each byte range against the data and against its dtype × shape (safe-integer arithmetic), and the
 * ranges against each other (no overlaps). A file that fails a check throws SafetensorsError with
 * `data.code` naming the problem; nothing ever reads past the buffer. Gaps between tensors are
 * tolerated (some writers align); overlaps are not.
 *
 * Only F32, F16 and BF16 tensors are supported; any other dtype is rejected at parse time with a
 * message naming the tensor and the dtype.
 *
 * Sharded checkpoints: `model.safetensors.index.json` = `{ "metadata": { "total_size": N },
 * "weight_map": { "<tensor>": "model-00001-of-00002.safetensors", ... } }`; `TensorStore` merges
 * the shards and checks the index against them.
 */
import { ModelLoadError, SafetensorsError } from '../../core/errors.ts';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, floatToHalf } from './float16.ts';

export type SafetensorsDType = 'F32' | 'F16' | 'BF16';

const SUPPORTED_DTYPES: readonly SafetensorsDType[] = ['F32', 'F16', 'BF16'];
const DTYPE_BYTES: Record<SafetensorsDType, number> = { F32: 4, F16: 2, BF16: 2 };
/** dtypes defined by the safetensors format that this engine does not load. */
const KNOWN_UNSUPPORTED = new Set([
  'BOOL',
  'U8',
  'I8',
  'U16',
  'I16',
  'U32',
  'I32',
  'U64',
  'I64',
  'F64',
  'F8_E5M2',
  'F8_E4M3',
  'F8_E8M0',
  'F6_E2M3',
  'F6_E3M2',
  'F4',
  'C64',
]);

/** The largest header accepted (the reference implementation uses the same limit). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

type SafetensorsErrorCode =
  | 'truncated'
  | 'header-too-large'
  | 'header-encoding'
  | 'header-json'
  | 'header-shape'
  | 'bad-metadata'
  | 'bad-entry'
  | 'unsupported-dtype'
  | 'size-mismatch'
  | 'out-of-range'
  | 'overlap'
  | 'missing-tensor'
  | 'duplicate-tensor'
  | 'bad-index';

/**
 * A safetensors file or index is malformed, hostile or uses an unsupported dtype.
 * `data.code` is one of SafetensorsErrorCode; `data.tensor` names the tensor when there is one.
 */
export { SafetensorsError };

function fail(code: SafetensorsErrorCode, message: string, extra: Record<string, unknown> = {}): never {
  throw new SafetensorsError(message, { code, ...extra });
}

export interface TensorInfo {
  name: string;
  dtype: SafetensorsDType;
  shape: number[];
  /** Byte range within the data section, as written in the header. */
  begin: number;
  end: number;
}

interface SafetensorsHeader {
  /** Byte offset of the data section within the file (8 + header length). */
  dataOffset: number;
  metadata: Record<string, string>;
  /** In header order. */
  tensors: Map<string, TensorInfo>;
}

export interface SafetensorsFile extends SafetensorsHeader {
  /** The whole file. */
  bytes: Uint8Array;
}

const isLittleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * A plain Uint8Array over the input. A Node Buffer is re-viewed as a Uint8Array: Buffer's own
 * slice() returns a view into a shared pool instead of a copy, which copyBytes relies on.
 */
const asBytes = (src: ArrayBuffer | Uint8Array): Uint8Array =>
  src instanceof Uint8Array ? new Uint8Array(src.buffer, src.byteOffset, src.byteLength) : new Uint8Array(src);

/** Header length from the first 8 bytes, checked against the limit (and the file size when known). */
function readHeaderLength(bytes: Uint8Array, fileSize: number = bytes.length): number {
  if (bytes.length < 8 || fileSize < 8)
    fail('truncated', `safetensors file is ${fileSize} bytes: too short to hold the 8-byte header length`);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, 8);
  const lo = dv.getUint32(0, true);
  const hi = dv.getUint32(4, true);
  if (hi !== 0 || lo > MAX_HEADER_BYTES)
    fail(
      'header-too-large',
      `safetensors header claims ${hi * 2 ** 32 + lo} bytes; the limit is ${MAX_HEADER_BYTES} (a corrupt or hostile file)`,
    );
  if (8 + lo > fileSize)
    fail('truncated', `safetensors header claims ${lo} bytes but the file has only ${fileSize - 8} after the length`, {
      headerLength: lo,
      fileSize,
    });
  return lo;
}

const isSafeNonNegInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Parse and check the header. `bytes` must hold at least the first 8 + N bytes; `fileSize` is the
 * whole file's size (defaults to bytes.length), used to check that every tensor lies inside the file.
 */
function parseSafetensorsHeader(src: ArrayBuffer | Uint8Array, fileSize?: number): SafetensorsHeader {
  const bytes = asBytes(src);
  const size = fileSize ?? bytes.length;
  const n = readHeaderLength(bytes, size);
  if (bytes.length < 8 + n)
    fail('truncated', `need the first ${8 + n} bytes to read the safetensors header, got ${bytes.length}`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + n));
  } catch {
    fail('header-encoding', 'safetensors header is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    fail('header-json', `safetensors header is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    fail('header-shape', 'safetensors header must be a JSON object');

  const dataOffset = 8 + n;
  const dataSize = size - dataOffset;
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, TensorInfo>();
  for (const [name, entry] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
        fail('bad-metadata', '__metadata__ must be an object of string values');
      for (const [k, v] of Object.entries(entry as Record<string, unknown>)) {
        if (typeof v !== 'string') fail('bad-metadata', `__metadata__.${k} must be a string, got ${typeof v}`);
        metadata[k] = v;
      }
      continue;
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      fail('bad-entry', `tensor "${name}": header entry must be an object`, { tensor: name });
    const e = entry as Record<string, unknown>;
    const dtype = e.dtype;
    if (typeof dtype !== 'string') fail('bad-entry', `tensor "${name}": dtype must be a string`, { tensor: name });
    if (!(SUPPORTED_DTYPES as readonly string[]).includes(dtype)) {
      const what = KNOWN_UNSUPPORTED.has(dtype) ? 'is not supported' : 'is not a known safetensors dtype';
      fail(
        'unsupported-dtype',
        `tensor "${name}" has dtype ${JSON.stringify(dtype)}, which ${what}; this engine loads F32, F16 and BF16 checkpoints only`,
        { tensor: name, dtype },
      );
    }
    const shape = e.shape;
    if (!Array.isArray(shape) || !shape.every(isSafeNonNegInt))
      fail('bad-entry', `tensor "${name}": shape must be an array of non-negative integers`, { tensor: name });
    const offsets = e.data_offsets;
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isSafeNonNegInt))
      fail('bad-entry', `tensor "${name}": data_offsets must be two non-negative integers`, { tensor: name });
    const [begin, end] = offsets as [number, number];
    if (begin > end)
      fail('bad-entry', `tensor "${name}": data_offsets [${begin}, ${end}] run backwards`, { tensor: name });
    let count = 1;
    for (const d of shape as number[]) {
      count *= d;
      if (!Number.isSafeInteger(count)) fail('size-mismatch', `tensor "${name}": shape is too large`, { tensor: name });
    }
    const want = count * DTYPE_BYTES[dtype as SafetensorsDType];
    if (!Number.isSafeInteger(want) || want !== end - begin)
      fail(
        'size-mismatch',
        `tensor "${name}": shape ${JSON.stringify(shape)} of ${dtype} needs ${want} bytes but data_offsets span ${end - begin}`,
        { tensor: name },
      );
    if (end > dataSize)
      fail(
        'out-of-range',
        `tensor "${name}": data_offsets [${begin}, ${end}] run past the end of the data (${Math.max(0, dataSize)} bytes); the file is truncated or corrupt`,
        { tensor: name },
      );
    tensors.set(name, { name, dtype: dtype as SafetensorsDType, shape: [...(shape as number[])], begin, end });
  }
  const sorted = [...tensors.values()].filter((t) => t.end > t.begin).sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    const cur = sorted[i]!;
    if (cur.begin < prev.end)
      fail(
        'overlap',
        `tensors "${prev.name}" [${prev.begin}, ${prev.end}] and "${cur.name}" [${cur.begin}, ${cur.end}] overlap`,
        { tensor: cur.name },
      );
  }
  return { dataOffset, metadata, tensors };
}

/** Parse a whole safetensors file (header checked; tensor bytes read lazily by the accessors). */
export function parseSafetensors(src: ArrayBuffer | Uint8Array): SafetensorsFile {
  const bytes = asBytes(src);
  return { ...parseSafetensorsHeader(bytes), bytes };
}

function info(file: SafetensorsFile, name: string): TensorInfo {
  const t = file.tensors.get(name);
  if (!t) fail('missing-tensor', `tensor "${name}" is not in this safetensors file`, { tensor: name });
  return t;
}

/** A copy of the tensor's bytes, at offset 0 of a fresh (hence aligned) buffer. */
function copyBytes(file: SafetensorsFile, t: TensorInfo): ArrayBuffer {
  if (!isLittleEndian) throw new ModelLoadError('safetensors reading needs a little-endian host');
  const a = file.dataOffset + t.begin;
  const b = file.dataOffset + t.end;
  if (b > file.bytes.length) fail('out-of-range', `tensor "${t.name}" runs past the end of the buffer`);
  return Uint8Array.prototype.slice.call(file.bytes, a, b).buffer as ArrayBuffer;
}

/**
 * The tensor's stored bytes as a view into the file (no copy, not necessarily aligned): for
 * uploading straight to the GPU (`queue.writeBuffer(buf, 0, view)`).
 */
function tensorBytes(file: SafetensorsFile, name: string): Uint8Array {
  const t = info(file, name);
  const a = file.dataOffset + t.begin;
  const b = file.dataOffset + t.end;
  if (b > file.bytes.length) fail('out-of-range', `tensor "${t.name}" runs past the end of the buffer`);
  return file.bytes.subarray(a, b);
}

export interface RawTensor {
  dtype: SafetensorsDType;
  shape: number[];
  /** F32 → Float32Array; F16 and BF16 → their 16-bit patterns. */
  data: Float32Array | Uint16Array;
}

/** The tensor as stored: F32 as Float32Array, F16/BF16 as raw Uint16Array bit patterns. */
export function tensorRaw(file: SafetensorsFile, name: string): RawTensor {
  const t = info(file, name);
  const buf = copyBytes(file, t);
  return {
    dtype: t.dtype,
    shape: [...t.shape],
    data: t.dtype === 'F32' ? new Float32Array(buf) : new Uint16Array(buf),
  };
}

/** The tensor widened to f32 (exact for F16 and BF16). */
export function tensorF32(file: SafetensorsFile, name: string): Float32Array {
  return rawToF32(tensorRaw(file, name));
}

/** The tensor as IEEE binary16 bit patterns (F16 unchanged; F32 and BF16 rounded to nearest even). */
export function tensorF16(file: SafetensorsFile, name: string): Uint16Array {
  return rawToF16(tensorRaw(file, name));
}

function rawToF32(r: RawTensor): Float32Array {
  if (r.dtype === 'F32') return r.data as Float32Array;
  return r.dtype === 'F16' ? f16ToF32(r.data as Uint16Array) : bf16ToF32(r.data as Uint16Array);
}

function rawToF16(r: RawTensor): Uint16Array {
  if (r.dtype === 'F16') return r.data as Uint16Array;
  if (r.dtype === 'F32') return f32ToF16(r.data as Float32Array);
  const src = r.data as Uint16Array;
  const out = new Uint16Array(src.length);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < src.length; i++) {
    u[0] = src[i]! << 16;
    out[i] = floatToHalf(f[0]!);
  }
  return out;
}

// --- writing -------------------------------------------------------------------------------

export interface TensorToWrite {
  /** Stored dtype. */
  dtype: SafetensorsDType;
  shape: number[];
  /** Float32Array: converted to dtype (round to nearest even). Uint16Array: raw F16/BF16 bits. */
  data: Float32Array | Uint16Array;
}

function encodeTensor(name: string, t: TensorToWrite): Uint8Array {
  const count = t.shape.reduce((a, b) => a * b, 1);
  if (t.data.length !== count)
    throw new RangeError(
      `tensor "${name}": shape ${JSON.stringify(t.shape)} holds ${count} values, got ${t.data.length}`,
    );
  let out: Float32Array | Uint16Array;
  if (t.data instanceof Float32Array) {
    out = t.dtype === 'F32' ? t.data : t.dtype === 'F16' ? f32ToF16(t.data) : f32ToBf16(t.data);
  } else {
    if (t.dtype === 'F32') throw new TypeError(`tensor "${name}": F32 needs a Float32Array, got 16-bit data`);
    out = t.data;
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Serialize tensors (in the given order, wider dtypes first so every tensor stays aligned to its
 * element size) with optional `__metadata__`. The header is padded with spaces to a multiple of 8.
 */
export function writeSafetensors(
  tensors: Map<string, TensorToWrite> | Record<string, TensorToWrite>,
  metadata?: Record<string, string>,
): Uint8Array {
  const entries = (tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors)).map(([name, t], i) => ({
    name,
    t,
    i,
  }));
  entries.sort((a, b) => DTYPE_BYTES[b.t.dtype] - DTYPE_BYTES[a.t.dtype] || a.i - b.i);
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length) header.__metadata__ = metadata;
  const blobs: Uint8Array[] = [];
  let offset = 0;
  for (const { name, t } of entries) {
    if (name === '__metadata__') throw new RangeError('"__metadata__" is reserved and cannot name a tensor');
    if (!SUPPORTED_DTYPES.includes(t.dtype)) throw new RangeError(`tensor "${name}": cannot write dtype ${t.dtype}`);
    const blob = encodeTensor(name, t);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + blob.byteLength] };
    blobs.push(blob);
    offset += blob.byteLength;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setUint32(0, json.length, true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const b of blobs) {
    out.set(b, at);
    at += b.byteLength;
  }
  return out;
}

// --- sharded checkpoints -------------------------------------------------------------------

export const INDEX_FILE = 'model.safetensors.index.json';
export const SINGLE_FILE = 'model.safetensors';

export interface SafetensorsIndex {
  metadata: Record<string, unknown>;
  /** Tensor name → shard file name. */
  weightMap: Record<string, string>;
}

const SHARD_NAME = /^[\w.-]+\.safetensors$/;

/** Parse and check `model.safetensors.index.json` (shard names must be plain file names). */
export function parseSafetensorsIndex(json: unknown): SafetensorsIndex {
  if (typeof json === 'string') {
    try {
      json = JSON.parse(json);
    } catch (err) {
      fail('bad-index', `${INDEX_FILE} is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    fail('bad-index', `${INDEX_FILE} must be a JSON object`);
  const j = json as Record<string, unknown>;
  const wm = j.weight_map;
  if (typeof wm !== 'object' || wm === null || Array.isArray(wm))
    fail('bad-index', `${INDEX_FILE} has no "weight_map" object`);
  const weightMap: Record<string, string> = {};
  for (const [k, v] of Object.entries(wm as Record<string, unknown>)) {
    if (typeof v !== 'string' || !SHARD_NAME.test(v) || v.startsWith('.'))
      fail(
        'bad-index',
        `${INDEX_FILE}: tensor "${k}" maps to ${JSON.stringify(v)}, not a plain *.safetensors file name`,
      );
    weightMap[k] = v;
  }
  const md = j.metadata;
  return {
    metadata: typeof md === 'object' && md !== null && !Array.isArray(md) ? (md as Record<string, unknown>) : {},
    weightMap,
  };
}

/** The shard file names an index refers to, in first-use order. */
export function shardFiles(index: SafetensorsIndex): string[] {
  return [...new Set(Object.values(index.weightMap))];
}

export interface ShardedWrite {
  /** File name → bytes: the shards and the index (JSON text, UTF-8). */
  files: Map<string, Uint8Array>;
  index: { metadata: { total_size: number }; weight_map: Record<string, string> };
}

/**
 * Split tensors into shards of at most `maxShardBytes` of tensor data each (a tensor bigger than
 * that gets a shard of its own), named `model-0000i-of-0000n.safetensors`, plus the index file.
 */
export function writeShardedSafetensors(
  tensors: Map<string, TensorToWrite>,
  maxShardBytes: number,
  metadata: Record<string, string> = { format: 'pt' },
): ShardedWrite {
  const groups: [string, TensorToWrite][][] = [[]];
  let used = 0;
  let total = 0;
  for (const [name, t] of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    total += bytes;
    if (used > 0 && used + bytes > maxShardBytes) {
      groups.push([]);
      used = 0;
    }
    groups.at(-1)!.push([name, t]);
    used += bytes;
  }
  const n = groups.length;
  const pad = (i: number) => String(i).padStart(5, '0');
  const files = new Map<string, Uint8Array>();
  const weightMap: Record<string, string> = {};
  groups.forEach((g, i) => {
    const file = `model-${pad(i + 1)}-of-${pad(n)}.safetensors`;
    files.set(file, writeSafetensors(new Map(g), metadata));
    for (const [name] of g) weightMap[name] = file;
  });
  const index = { metadata: { total_size: total }, weight_map: weightMap };
  files.set(INDEX_FILE, new TextEncoder().encode(JSON.stringify(index, null, 2) + '\n'));
  return { files, index };
}

/**
 * The tensors of a checkpoint, one file or many shards: lookups by name, conversion on access.
 * Construct with `fromFiles` (parsed shards, optionally checked against an index).
 */
export class TensorStore {
  private readonly where = new Map<string, SafetensorsFile>();

  private constructor(readonly files: Map<string, SafetensorsFile>) {
    for (const [fname, f] of files) {
      for (const name of f.tensors.keys()) {
        if (this.where.has(name))
          fail('duplicate-tensor', `tensor "${name}" appears in more than one shard (again in ${fname})`, {
            tensor: name,
          });
        this.where.set(name, f);
      }
    }
  }

  /**
   * Merge parsed files. With an index, every tensor it names must be in the shard it names, and
   * every tensor in a shard must be in the index.
   */
  static fromFiles(files: Map<string, SafetensorsFile>, index?: SafetensorsIndex): TensorStore {
    if (index) {
      for (const [name, shard] of Object.entries(index.weightMap)) {
        const f = files.get(shard);
        if (!f) fail('bad-index', `${INDEX_FILE} names shard ${shard}, which was not loaded`, { tensor: name });
        if (!f.tensors.has(name))
          fail('missing-tensor', `${INDEX_FILE} says tensor "${name}" is in ${shard}, but it is not`, { tensor: name });
      }
      for (const [fname, f] of files)
        for (const name of f.tensors.keys())
          if (index.weightMap[name] !== fname)
            fail('bad-index', `tensor "${name}" is in ${fname} but ${INDEX_FILE} does not map it there`, {
              tensor: name,
            });
    }
    return new TensorStore(files);
  }

  /** One parsed file. */
  static single(file: SafetensorsFile, name = SINGLE_FILE): TensorStore {
    return new TensorStore(new Map([[name, file]]));
  }

  names(): string[] {
    return [...this.where.keys()];
  }
  has(name: string): boolean {
    return this.where.has(name);
  }
  info(name: string): TensorInfo | undefined {
    return this.where.get(name)?.tensors.get(name);
  }
  private file(name: string): SafetensorsFile {
    const f = this.where.get(name);
    if (!f) fail('missing-tensor', `tensor "${name}" is not in this checkpoint`, { tensor: name });
    return f;
  }
  raw(name: string): RawTensor {
    return tensorRaw(this.file(name), name);
  }
  /** Stored bytes, a view into the file (no copy). */
  bytes(name: string): Uint8Array {
    return tensorBytes(this.file(name), name);
  }
  f32(name: string): Float32Array {
    return tensorF32(this.file(name), name);
  }
  f16(name: string): Uint16Array {
    return tensorF16(this.file(name), name);
  }
  /** Metadata of the first file (shards normally carry the same). */
  get metadata(): Record<string, string> {
    return this.files.values().next().value?.metadata ?? {};
  }
}
