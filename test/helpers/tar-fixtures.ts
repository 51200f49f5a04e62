// Test factory for tar archives crafted byte by byte, so tests can build malicious archives that real packers refuse to make.
import { writeFile } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';

/** Entry kinds; each maps to a ustar typeflag ('0', '5', '2', '1', '3', '4', '6', '7'). */
export type TarEntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'char' | 'block' | 'fifo' | 'contiguous';

export interface TarEntrySpec {
  /** Path stored in the header verbatim (no normalization). Longer than 100 bytes: a pax header carries it. */
  readonly path: string;
  /** Default 'file'. */
  readonly type?: TarEntryType;
  /** Raw typeflag overriding `type` (e.g. 'S' sparse, 'V', 'x', 'g', 'Z' unknown). */
  readonly typeflag?: string;
  /** Body of the entry (files); written padded to 512 bytes. */
  readonly content?: string | Buffer;
  /** Link target of symlinks and hardlinks. Longer than 100 bytes: a pax header carries it. */
  readonly linkpath?: string;
  /** Permission bits; default 0o644 for files, 0o755 for directories, 0o777 for links. */
  readonly mode?: number;
  /** Size written in the header, overriding the content length (to lie about the size). */
  readonly size?: number;
  /** Extra pax records emitted in an 'x' header before this entry. */
  readonly pax?: Readonly<Record<string, string>>;
}

export interface TarOptions {
  /** Append the two zero blocks that end an archive (default true). */
  readonly end?: boolean;
}

const TYPEFLAGS: Record<TarEntryType, string> = {
  file: '0',
  hardlink: '1',
  symlink: '2',
  char: '3',
  block: '4',
  dir: '5',
  fifo: '6',
  contiguous: '7',
};

const BLOCK = 512;

function writeString(block: Buffer, offset: number, length: number, value: string): void {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > length) throw new Error(`tar fixture: "${value}" does not fit in ${length} bytes`);
  bytes.copy(block, offset);
}

function writeOctal(block: Buffer, offset: number, length: number, value: number): void {
  // length-1 octal digits followed by a NUL, as GNU tar writes them.
  const digits = value.toString(8).padStart(length - 1, '0');
  if (digits.length > length - 1) throw new Error(`tar fixture: ${value} does not fit in a ${length}-byte field`);
  writeString(block, offset, length, `${digits}\0`);
}

/** One 512-byte ustar header with a correct checksum. */
export function makeHeader(fields: {
  path: string;
  typeflag: string;
  size: number;
  mode: number;
  linkpath?: string;
}): Buffer {
  const block = Buffer.alloc(BLOCK);
  writeString(block, 0, 100, fields.path);
  writeOctal(block, 100, 8, fields.mode);
  writeOctal(block, 108, 8, 0); // uid
  writeOctal(block, 116, 8, 0); // gid
  writeOctal(block, 124, 12, fields.size);
  writeOctal(block, 136, 12, 1_700_000_000); // mtime
  block.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  writeString(block, 156, 1, fields.typeflag);
  writeString(block, 157, 100, fields.linkpath ?? '');
  writeString(block, 257, 6, 'ustar\0');
  writeString(block, 263, 2, '00');
  writeString(block, 265, 32, 'root');
  writeString(block, 297, 32, 'root');
  let sum = 0;
  for (const byte of block) sum += byte;
  writeString(block, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return block;
}

function padded(body: Buffer): Buffer[] {
  const rest = body.length % BLOCK;
  return rest === 0 ? [body] : [body, Buffer.alloc(BLOCK - rest)];
}

function paxRecord(key: string, value: string): string {
  // "<len> key=value\n" where len counts itself.
  const tail = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(tail) + 1;
  while (String(len).length + Buffer.byteLength(tail) !== len) len = String(len).length + Buffer.byteLength(tail);
  return `${len}${tail}`;
}

/** Builds an uncompressed tar from `entries`, in order, exactly as described (no sanitizing). */
export function makeTar(entries: readonly TarEntrySpec[], options: TarOptions = {}): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const type = entry.type ?? 'file';
    const typeflag = entry.typeflag ?? TYPEFLAGS[type];
    const body = entry.content === undefined ? Buffer.alloc(0) : Buffer.from(entry.content);
    const records: Record<string, string> = { ...entry.pax };
    let path = entry.path;
    let linkpath = entry.linkpath;
    if (Buffer.byteLength(path) > 100) {
      records['path'] = path;
      path = path.slice(0, 90);
    }
    if (linkpath !== undefined && Buffer.byteLength(linkpath) > 100) {
      records['linkpath'] = linkpath;
      linkpath = linkpath.slice(0, 90);
    }
    const paxText = Object.entries(records).map(([k, v]) => paxRecord(k, v)).join('');
    if (paxText !== '') {
      const paxBody = Buffer.from(paxText, 'utf8');
      parts.push(makeHeader({ path: 'PaxHeader/entry', typeflag: 'x', size: paxBody.length, mode: 0o644 }));
      parts.push(...padded(paxBody));
    }
    const defaultMode = type === 'dir' ? 0o755 : type === 'symlink' || type === 'hardlink' ? 0o777 : 0o644;
    parts.push(
      makeHeader({
        path,
        typeflag,
        size: entry.size ?? body.length,
        mode: entry.mode ?? defaultMode,
        ...(linkpath === undefined ? {} : { linkpath }),
      }),
    );
    if (body.length > 0) parts.push(...padded(body));
  }
  if (options.end !== false) parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** A global pax header entry ('g'), for archives like those `git archive` makes. */
export function globalPaxEntry(records: Readonly<Record<string, string>>): TarEntrySpec {
  const text = Object.entries(records).map(([k, v]) => paxRecord(k, v)).join('');
  return { path: 'pax_global_header', typeflag: 'g', content: text, mode: 0o666 };
}

/** `makeTar` then gzip. */
export function makeTarGz(entries: readonly TarEntrySpec[], options: TarOptions = {}): Buffer {
  return gzipSync(makeTar(entries, options));
}

/** Writes `makeTarGz(entries)` to `file`. */
export async function writeTarGz(file: string, entries: readonly TarEntrySpec[], options: TarOptions = {}): Promise<void> {
  await writeFile(file, makeTarGz(entries, options));
}

/**
 * A gzip bomb: `files` files of `fileBytes` zeros each (a multiple of 16 MiB), as concatenated gzip
 * members so it is built in milliseconds: 34 files of 64 MiB make a 2.2 MB archive expanding to 2.2 GB.
 */
export function makeZeroBomb(files: number, fileBytes: number): Buffer {
  const chunk = 16 * 1024 * 1024;
  if (fileBytes % chunk !== 0) throw new Error('fileBytes must be a multiple of 16 MiB');
  const zeros = gzipSync(Buffer.alloc(chunk), { level: 9 });
  const members: Buffer[] = [];
  for (let i = 0; i < files; i++) {
    members.push(gzipSync(makeHeader({ path: `zeros-${i}.bin`, typeflag: '0', size: fileBytes, mode: 0o644 })));
    for (let done = 0; done < fileBytes; done += chunk) members.push(zeros);
  }
  members.push(gzipSync(Buffer.alloc(BLOCK * 2)));
  return Buffer.concat(members);
}
