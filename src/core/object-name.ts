// Names people give their objects (a job, a backup destination): free text, trimmed, spaces and case kept.

/** The most characters a name may have. */
export const OBJECT_NAME_MAX = 100;

/** The rule, as error messages state it. */
export const OBJECT_NAME_RULE = `1 to ${OBJECT_NAME_MAX} characters (spaces allowed), without control characters`;

/**
 * The name trimmed, or undefined when it is not a string of 1 to 100 characters (counted as code
 * points, after trimming) without control characters. It is shown and matched as given, never
 * lower-cased: where it goes into a command line, it is one argv element, not shell text.
 */
export function objectName(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const name = value.trim();
  const length = [...name].length;
  if (length < 1 || length > OBJECT_NAME_MAX || /\p{Cc}/u.test(name)) return undefined;
  return name;
}
