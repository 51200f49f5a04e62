// The fuzzer's randomness: a seeded PRNG (so a failing run reproduces) and the pools of hostile values it draws from.

/** A small seeded PRNG (mulberry32) with the helpers the generators need. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(0, items.length - 1)] as T;
  }

  /** Picks a key by weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let roll = this.next() * total;
    for (const [key, weight] of entries) {
      roll -= weight;
      if (roll < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /** A string of `length` characters from `alphabet`. */
  chars(length: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    let out = '';
    for (let i = 0; i < length; i++) out += alphabet[this.int(0, alphabet.length - 1)];
    return out;
  }

  /** A random (well-formed) UUID v4 string. */
  uuid(): string {
    const hex = this.chars(32, '0123456789abcdef');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  }
}

/** Strings no endpoint should choke on: injection, traversal, odd Unicode, control characters, sizes. */
export const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  '   padded   ',
  '\u0000',
  'nul\u0000inside',
  '\u0001\u0002\u0003\u001b[31mred\u001b[0m\u007f',
  'line\r\nSet-Cookie: injected=1',
  '\t\n\v\f\r',
  '../../../../etc/passwd',
  '..\\..\\..\\windows\\win.ini',
  '/etc/shadow',
  '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  '....//....//etc/passwd',
  "' OR '1'='1' --",
  '1; DROP TABLE users; --',
  '" OR ""="',
  '$(id)',
  '`id`',
  '; rm -rf / #',
  '| cat /etc/passwd',
  '--upload-pack=touch /tmp/pwned',
  '-oProxyCommand=id',
  'ext::sh -c id',
  '{{7*7}}${7*7}<%= 7*7 %>',
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  '__proto__',
  'constructor',
  'null',
  'undefined',
  'NaN',
  'true',
  '0',
  '-1',
  '1e309',
  '\u202egnp.exe',
  '\u200b\u200c\u200d\ufeff',
  'ＡＤＭＩＮ',
  'admin\u0130',
  '😀🚀💥',
  '\ud800',
  '\udfff\ud800',
  'ß'.repeat(300),
  'é'.repeat(1001),
  'a'.repeat(63),
  'a'.repeat(64),
  'a'.repeat(101),
  'a'.repeat(255),
  'a'.repeat(256),
  'a'.repeat(1000),
  'a'.repeat(1001),
  'x'.repeat(4097),
  'y'.repeat(70_000),
  'API',
  'www',
  '-leading',
  'trailing-',
  'UPPER-case',
  'under_score',
  'dot.ted',
  'slw_k1_',
  'slw_k1_' + 'A'.repeat(40),
  'Bearer abc',
  '%00',
  '%zz',
  '%',
  '?a=1&b=2#frag',
  'http://127.0.0.1:1/x',
  'file:///etc/passwd',
  '\\\\?\\C:\\',
];

/** Numbers at the edges: negative, zero, fractional, huge, unsafe integers. */
export const HOSTILE_NUMBERS: readonly number[] = [
  0, -0, -1, 1, 0.5, -0.0001, 7.25, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), 2 ** 53, 2 ** 53 + 2, -(2 ** 53), 1e308, -1e308, 5e-324, 65536, 4096, 2049, 999999,
];

/** Any JSON value of a random type, for wrong-type fields and roots. */
export function anyJson(rng: Rng, depth = 0): unknown {
  const kind = rng.pick(depth > 2 ? ['string', 'number', 'bool', 'null'] : ['string', 'number', 'bool', 'null', 'array', 'object']);
  switch (kind) {
    case 'string':
      return rng.pick(HOSTILE_STRINGS);
    case 'number':
      return rng.pick(HOSTILE_NUMBERS);
    case 'bool':
      return rng.chance(0.5);
    case 'null':
      return null;
    case 'array':
      return Array.from({ length: rng.int(0, 3) }, () => anyJson(rng, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = rng.int(0, 3); i > 0; i--) out[rng.pick(['a', 'id', 'email', '__proto__', 'constructor', 'x'.repeat(rng.int(1, 40))])] = anyJson(rng, depth + 1);
      return out;
    }
  }
}

/** Texts labelled JSON that are not JSON, or are JSON a parser may handle badly. */
export function malformedJson(rng: Rng): { kind: string; body: Buffer } {
  const options: { kind: string; text: () => string | Buffer }[] = [
    { kind: 'truncated', text: () => '{"email": "a@b.c", "pass' },
    { kind: 'trailing-garbage', text: () => '{"name": "x"} trailing' },
    { kind: 'single-quotes', text: () => "{'name': 'x'}" },
    { kind: 'bare-word', text: () => 'hello' },
    { kind: 'nan', text: () => '{"memory_mb": NaN, "cpus": Infinity}' },
    { kind: 'comments', text: () => '{/* c */ "name": "x"}' },
    { kind: 'bom', text: () => '\ufeff{"name": "x"}' },
    { kind: 'deep-array', text: () => '['.repeat(rng.pick([1000, 20_000, 200_000])) },
    { kind: 'deep-object', text: () => '{"a":'.repeat(rng.pick([1000, 20_000])) + '1' + '}'.repeat(rng.pick([1000, 20_000])) },
    { kind: 'proto', text: () => '{"__proto__": {"isAdmin": true}, "name": "x"}' },
    { kind: 'constructor-prototype', text: () => '{"constructor": {"prototype": {"isAdmin": true}}}' },
    { kind: 'duplicate-keys', text: () => '{"name": "a", "name": "b", "subdomain": "x", "subdomain": "y"}' },
    { kind: 'lone-surrogate-escape', text: () => '{"name": "\\ud800\\udc00\\ud800"}' },
    { kind: 'bad-escape', text: () => '{"name": "\\x41\\u12"}' },
    { kind: 'huge-number', text: () => `{"memory_mb": 1${'0'.repeat(400)}, "cpus": -1e400}` },
    { kind: 'nul-bytes', text: () => '{"name"\u0000: "x"}' },
    { kind: 'invalid-utf8', text: () => Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x22, 0x7d]) },
    { kind: 'whitespace-only', text: () => ' \n\t ' },
    { kind: 'many-keys', text: () => JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i]))) },
  ];
  const chosen = rng.pick(options);
  const text = chosen.text();
  return { kind: chosen.kind, body: Buffer.isBuffer(text) ? text : Buffer.from(text) };
}
