// The clock as every stored timestamp reads it.

/** The current time as the ISO 8601 UTC string every timestamp column holds. */
export const nowIso = (): string => new Date().toISOString();
