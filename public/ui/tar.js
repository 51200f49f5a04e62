// A folder picked in the browser packed as tar.gz: a small ustar writer (PAX for long names) and CompressionStream('gzip').

const encoder = new TextEncoder();

function octal(value, width) {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name, size, type, mode, mtime) {
  const block = new Uint8Array(512);
  const put = (text, offset, width) => block.set(encoder.encode(text).subarray(0, width), offset);
  put(name, 0, 100);
  put(octal(mode, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(mtime, 12), 136, 12);
  put('        ', 148, 8); // checksum counted as spaces
  put(type, 156, 1);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  let sum = 0;
  for (const byte of block) sum += byte;
  put(octal(sum, 7) + ' ', 148, 8);
  return block;
}

/** A PAX extended header carrying `path` (names over 100 bytes, or not ASCII). */
function paxPath(path, mtime) {
  const record = (body) => {
    // The decimal length prefix counts the whole record in bytes, itself included.
    const n = encoder.encode(body).length + 2; // the space and the newline
    let length = n + 1;
    while (String(length).length + n !== length) length = String(length).length + n;
    return `${length} ${body}\n`;
  };
  const data = encoder.encode(record(`path=${path}`));
  return [header('PaxHeader', data.length, 'x', 0o644, mtime), data, padding(data.length)];
}

function padding(size) {
  const rest = size % 512;
  return new Uint8Array(rest === 0 ? 0 : 512 - rest);
}

function entry(path, size, type, mode, mtime) {
  const needsPax = encoder.encode(path).length > 100 || /[^\x20-\x7e]/.test(path);
  const short = needsPax ? path.slice(-90).replace(/[^\x20-\x7e]/g, '_') : path;
  return [...(needsPax ? paxPath(path, mtime) : []), header(short, size, type, mode, mtime)];
}

/**
 * `.dockerignore` patterns, roughly as Docker reads them: `*` within a path segment, `**` across
 * segments, `?` one character, `!` re-includes, a pattern also excludes what is under it. Comments
 * and blank lines are skipped. (Docker's exact rules live in the CLI's packer; this is close enough
 * to keep `node_modules`, `.git` and build output out of an upload.)
 */
export function ignoreMatcher(text) {
  const rules = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    if (negate) line = line.slice(1).trim();
    line = line.replace(/^\/+/, '').replace(/\/+$/, '').replace(/^\.\//, '');
    if (line === '') continue;
    let re = '';
    for (let i = 0; i < line.length; i += 1) {
      const c = line[i];
      if (c === '*' && line[i + 1] === '*') { re += '.*'; i += 1; if (line[i + 1] === '/') i += 1; }
      else if (c === '*') re += '[^/]*';
      else if (c === '?') re += '[^/]';
      else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
    rules.push({ negate, re: new RegExp(`^${re}(/.*)?$`) });
  }
  return (path) => {
    let excluded = false;
    for (const rule of rules) if (rule.re.test(path)) excluded = !rule.negate;
    return excluded;
  };
}

/**
 * Packs files chosen with `<input type=file webkitdirectory>` (each with a `webkitRelativePath`
 * starting with the folder's name) as a gzip-compressed tar Blob. The folder's own name is dropped,
 * `.git/` is left out, and `.dockerignore` rules apply (the Dockerfile and `.dockerignore` are always
 * sent). Browsers give no file modes: files are written 0755 so scripts stay executable.
 * Resolves with `{blob, files, skipped}`.
 */
export async function packFolder(fileList) {
  const files = [...fileList].map((file) => ({ file, path: (file.webkitRelativePath || file.name).split('/').slice(1).join('/') || file.name }));
  const ignoreFile = files.find((f) => f.path === '.dockerignore');
  const ignored = ignoreFile ? ignoreMatcher(await ignoreFile.file.text()) : () => false;
  const parts = [];
  const dirs = new Set();
  let count = 0;
  let skipped = 0;
  const mtime = Math.floor(Date.now() / 1000);
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const { file, path } of files) {
    const always = path === 'Dockerfile' || path === '.dockerignore';
    if (!always && (path === '.git' || path.startsWith('.git/') || ignored(path))) { skipped += 1; continue; }
    const segments = path.split('/');
    for (let i = 1; i < segments.length; i += 1) {
      const dir = segments.slice(0, i).join('/') + '/';
      if (dirs.has(dir)) continue;
      dirs.add(dir);
      parts.push(...entry(dir, 0, '5', 0o755, mtime));
    }
    parts.push(...entry(path, file.size, '0', 0o755, Math.floor(file.lastModified / 1000) || mtime), file, padding(file.size));
    count += 1;
  }
  parts.push(new Uint8Array(1024));
  // The Blob references the files (no copy); the gzip stream reads them as it goes.
  const gz = new Blob(parts).stream().pipeThrough(new CompressionStream('gzip'));
  const blob = await new Response(gz).blob();
  return { blob: new Blob([blob], { type: 'application/gzip' }), files: count, skipped };
}
