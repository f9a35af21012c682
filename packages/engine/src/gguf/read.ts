import { GGUF_MAGIC, typeNameOf, type GgufMetadata, type GgufScalar, type GgufScalarTypeName, type GgufValue } from './types.ts';

export interface GgufTensorInfo {
  name: string;
  dims: number[];
  /** ggml type code. */
  type: number;
  /** Offset from the start of the tensor data section. */
  offset: bigint;
}

export interface GgufHeader {
  version: number;
  metadata: GgufMetadata;
  tensors: GgufTensorInfo[];
}

/** Reads a GGUF file's header, metadata and tensor infos (not the tensor data). */
export function readGgufHeader(file: Buffer): GgufHeader {
  const reader = new CursorReader(file);
  if (reader.u32() !== GGUF_MAGIC) throw new Error('GGUF: bad magic, not a GGUF file');
  const version = reader.u32();
  if (version !== 2 && version !== 3) throw new Error(`GGUF: unsupported version ${version}`);
  const tensorCount = Number(reader.u64());
  const keyCount = Number(reader.u64());
  const metadata: GgufMetadata = new Map();
  for (let i = 0; i < keyCount; i++) {
    const key = reader.string();
    metadata.set(key, readValue(reader));
  }
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = reader.string();
    const dims = Array.from({ length: reader.u32() }, () => Number(reader.u64()));
    tensors.push({ name, dims, type: reader.u32(), offset: reader.u64() });
  }
  return { version, metadata, tensors };
}

function readValue(reader: CursorReader): GgufValue {
  const type = typeNameOf(reader.u32());
  if (type === 'array') {
    const itemType = typeNameOf(reader.u32());
    if (itemType === 'array') throw new Error('GGUF: nested arrays are not supported');
    const count = Number(reader.u64());
    const values: GgufScalar[] = new Array(count);
    for (let i = 0; i < count; i++) values[i] = readScalar(reader, itemType);
    return { type: 'array', itemType, values };
  }
  const value = readScalar(reader, type);
  return { type, value } as GgufValue;
}

function readScalar(reader: CursorReader, type: GgufScalarTypeName): GgufScalar {
  switch (type) {
    case 'u8':
      return reader.take(1).readUInt8();
    case 'i8':
      return reader.take(1).readInt8();
    case 'u16':
      return reader.take(2).readUInt16LE();
    case 'i16':
      return reader.take(2).readInt16LE();
    case 'u32':
      return reader.u32();
    case 'i32':
      return reader.take(4).readInt32LE();
    case 'f32':
      return reader.take(4).readFloatLE();
    case 'f64':
      return reader.take(8).readDoubleLE();
    case 'u64':
      return reader.u64();
    case 'i64':
      return reader.take(8).readBigInt64LE();
    case 'bool':
      return reader.take(1).readUInt8() !== 0;
    case 'string':
      return reader.string();
  }
}

class CursorReader {
  private offset = 0;

  constructor(private readonly file: Buffer) {}

  take(length: number): Buffer {
    if (this.offset + length > this.file.length) throw new Error('GGUF: file is truncated');
    const slice = this.file.subarray(this.offset, this.offset + length);
    this.offset += length;
    return slice;
  }

  u32(): number {
    return this.take(4).readUInt32LE();
  }

  u64(): bigint {
    return this.take(8).readBigUInt64LE();
  }

  string(): string {
    return this.take(Number(this.u64())).toString('utf8');
  }
}
