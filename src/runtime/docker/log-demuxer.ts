// Container logs: the engine's multiplexed stdout/stderr frames turned back into text.

/**
 * Splits the engine's multiplexed log stream (8-byte frame headers: stream type, 3 zero bytes,
 * big-endian length) into text. Falls back to raw text if the stream is not multiplexed (a TTY).
 */
export class LogDemuxer {
  #pending: Buffer = Buffer.alloc(0);
  #raw = false;
  // One decoder per stream so a UTF-8 character split across frames decodes whole.
  #decoders = [new TextDecoder(), new TextDecoder(), new TextDecoder()];

  push(chunk: Buffer): string {
    if (this.#raw) return this.#decode(1, chunk);
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    let out = '';
    while (this.#pending.length >= 8) {
      const type = this.#pending[0] ?? 0;
      if (type > 2 || this.#pending[1] !== 0 || this.#pending[2] !== 0 || this.#pending[3] !== 0) {
        this.#raw = true;
        const rest = this.#pending;
        this.#pending = Buffer.alloc(0);
        return out + this.#decode(1, rest);
      }
      const size = this.#pending.readUInt32BE(4);
      if (this.#pending.length < 8 + size) break;
      out += this.#decode(type, this.#pending.subarray(8, 8 + size));
      this.#pending = this.#pending.subarray(8 + size);
    }
    return out;
  }

  end(): string {
    let out = this.#pending.length > 0 ? this.#decode(1, this.#pending) : '';
    this.#pending = Buffer.alloc(0);
    for (const decoder of this.#decoders) out += decoder.decode();
    return out;
  }

  #decode(type: number, bytes: Buffer): string {
    const decoder = this.#decoders[type] ?? this.#decoders[1];
    return decoder === undefined ? bytes.toString('utf8') : decoder.decode(bytes, { stream: true });
  }
}
