// Test helper: search every file under a directory for a value (plain text checks of data at rest).
import fs from 'node:fs';
import path from 'node:path';

/** Every regular file under `dir` whose bytes contain `needle` (as UTF-8, or as UTF-16 as some tools store text). */
export function filesContaining(dir: string, needle: string): string[] {
  const found: string[] = [];
  const patterns = [Buffer.from(needle, 'utf8'), Buffer.from(needle, 'utf16le')];
  const walk = (d: string): void => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile() && patterns.some((p) => fs.readFileSync(full).includes(p))) found.push(full);
    }
  };
  walk(dir);
  return found;
}
