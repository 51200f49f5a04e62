// The headers of a call one instance forwards to another (decisions §15): the edge drops them from every visitor's request, so only a signed call carries them.

/** The headers a forwarded call carries (lower case); a visitor's own are never passed on. */
export const FORWARD_HEADERS = {
  timestamp: 'slipway-forward-timestamp',
  nonce: 'slipway-forward-nonce',
  instance: 'slipway-forward-instance',
  for: 'slipway-forward-for',
  proto: 'slipway-forward-proto',
  signature: 'slipway-forward-signature',
} as const;

/** Every forward header name, to drop them from whatever reaches an app or a tunnel. */
export const FORWARD_HEADER_NAMES: readonly string[] = Object.values(FORWARD_HEADERS);
