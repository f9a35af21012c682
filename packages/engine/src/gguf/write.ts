import { encodeTensor, encodedSize } from './tensor-encoding.ts';
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  GgufValueType,
  type GgufMetadata,
  type GgufScalar,
  type GgufScalarTypeName,
  type GgufTensor,
  type GgufValue,
} from './types.ts';

/** Serialises a GGUF v3 file: header, metadata, tensor infos, then tensor data aligned to 32 bytes. */
export function writeGguf(metadata: GgufMetadata, tensors: readonly GgufTensor[]): Buffer {
  const header = new ChunkWriter();
  header.u32(GGUF_MAGIC);
  header.u32(GGUF_VERSION);
  header.u64(BigInt(tensors.length));
  header.u64(BigInt(metadata.size));
  for (const [key, value] of metadata) {
    header.string(key);
    writeValue(header, value);
  }

  let dataSize = 0;
  const offsets: number[] = [];
  for (const tensor of tensors) {
    const count = tensor.dims.reduce((a, b) => a * b, 1);
    if (count !== tensor.data.length) {
      throw new Error(`GGUF: tensor ${tensor.name} has ${tensor.data.length} values for dims [${tensor.dims.join(', ')}]`);
    }
    offsets.push(dataSize);
    dataSize = align(dataSize + encodedSize(tensor.type, count));
    header.string(tensor.name);
    header.u32(tensor.dims.length);
    for (const dim of tensor.dims) header.u64(BigInt(dim));
    header.u32(GgmlType[tensor.type]);
    header.u64(BigInt(offsets.at(-1)!));
  }

  const head = header.toBuffer();
  const dataStart = align(head.length);
  const file = Buffer.alloc(dataStart + dataSize);
  head.copy(file, 0);
  tensors.forEach((tensor, i) => encodeTensor(tensor.type, tensor.data, file, dataStart + offsets[i]!));
  return file;
}

function align(offset: number): number {
  return Math.ceil(offset / GGUF_DEFAULT_ALIGNMENT) * GGUF_DEFAULT_ALIGNMENT;
}

function writeValue(out: ChunkWriter, value: GgufValue): void {
  out.u32(GgufValueType[value.type]);
  if (value.type === 'array') {
    out.u32(GgufValueType[value.itemType]);
    out.u64(BigInt(value.values.length));
    for (const item of value.values) writeScalar(out, value.itemType, item);
  } else {
    writeScalar(out, value.type, value.value);
  }
}

function writeScalar(out: ChunkWriter, type: GgufScalarTypeName, value: GgufScalar): void {
  switch (type) {
    case 'string':
      return out.string(String(value));
    case 'bool':
      return out.u8(value ? 1 : 0);
    case 'u64':
      return out.u64(BigInt(value));
    case 'i64':
      return out.i64(BigInt(value));
    default:
      return out.number(type, Number(value));
  }
}

/** Appends little-endian values to a list of small buffers; joined once at the end. */
class ChunkWriter {
  private readonly chunks: Buffer[] = [];

  u8(v: number): void {
    this.number('u8', v);
  }

  u32(v: number): void {
    this.number('u32', v);
  }

  u64(v: bigint): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(v);
    this.chunks.push(b);
  }

  i64(v: bigint): void {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(v);
    this.chunks.push(b);
  }

  string(s: string): void {
    const bytes = Buffer.from(s, 'utf8');
    this.u64(BigInt(bytes.length));
    this.chunks.push(bytes);
  }

  number(type: Exclude<GgufScalarTypeName, 'string' | 'bool' | 'u64' | 'i64'>, v: number): void {
    const size = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, f64: 8 }[type];
    const b = Buffer.alloc(size);
    if (type === 'u8') b.writeUInt8(v);
    else if (type === 'i8') b.writeInt8(v);
    else if (type === 'u16') b.writeUInt16LE(v);
    else if (type === 'i16') b.writeInt16LE(v);
    else if (type === 'u32') b.writeUInt32LE(v);
    else if (type === 'i32') b.writeInt32LE(v);
    else if (type === 'f32') b.writeFloatLE(v);
    else b.writeDoubleLE(v);
    this.chunks.push(b);
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
