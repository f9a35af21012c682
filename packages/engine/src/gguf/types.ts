/** GGUF v3 value and tensor types, with the numeric codes the file format uses. */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

export const GgufValueType = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;

export type GgufScalarTypeName = Exclude<keyof typeof GgufValueType, 'array'>;
export type GgufScalar = number | bigint | boolean | string;

/** One metadata value, typed as the file stores it, so a value read from one file can be written unchanged to another. */
export type GgufValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: GgufScalarTypeName; values: readonly GgufScalar[] };

export type GgufMetadata = Map<string, GgufValue>;

/** ggml tensor types this project writes. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

export interface GgufTensor {
  name: string;
  /** Dimensions in ggml order: `dims[0]` is the contiguous one (a weight's input width). */
  dims: readonly number[];
  type: GgmlTypeName;
  data: Float32Array;
}

export function typeNameOf(code: number): keyof typeof GgufValueType {
  const entry = Object.entries(GgufValueType).find(([, c]) => c === code);
  if (!entry) throw new Error(`GGUF: unknown value type ${code}`);
  return entry[0] as keyof typeof GgufValueType;
}
