// Request shapes derived from the server's own OpenAPI document: operations, and valid, almost-valid or hostile values for their schemas.
import { anyJson, HOSTILE_NUMBERS, HOSTILE_STRINGS, type Rng } from './fuzz-random.js';

/** A JSON schema as the OpenAPI document carries it (the subset the API uses). */
export interface Schema {
  type?: string;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  nullable?: boolean;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  maxLength?: number;
  pattern?: string;
  format?: string;
  $ref?: string;
}

/** One operation of the document. */
export interface Operation {
  readonly method: string;
  /** The path template, e.g. `/api/v1/deployments/{id}/builds/{build_id}`. */
  readonly path: string;
  readonly pathParams: readonly string[];
  readonly query: Readonly<Record<string, Schema>>;
  /** 'json' with its schema, 'multipart', or none. */
  readonly body: { kind: 'json'; schema: Schema } | { kind: 'multipart' } | undefined;
  /** `security: []`: no credential needed. */
  readonly isPublic: boolean;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, {
    security?: unknown[];
    parameters?: { in: string; name: string; schema: Schema }[];
    requestBody?: { content: Record<string, { schema: Schema }> };
  }>>;
}

/** Every operation of an OpenAPI document. */
export function operationsOf(document: unknown): Operation[] {
  const doc = document as OpenApiDocument;
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const params = op.parameters ?? [];
      const content = op.requestBody?.content ?? {};
      const json = content['application/json'];
      const body = json !== undefined ? { kind: 'json' as const, schema: json.schema } : content['multipart/form-data'] !== undefined ? { kind: 'multipart' as const } : undefined;
      out.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: Object.fromEntries(params.filter((p) => p.in === 'query').map((p) => [p.name, p.schema])),
        body,
        isPublic: Array.isArray(op.security) && op.security.length === 0,
      });
    }
  }
  return out;
}

/** Domain-aware valid values by field name (an e-mail that exists, a build id of this deployment…); undefined: derive from the schema. */
export type ValidValue = (field: string) => unknown;

/** The alternatives of a schema (anyOf/oneOf, plus null when nullable). */
function alternatives(schema: Schema): Schema[] {
  const alts = schema.anyOf ?? schema.oneOf;
  const list = alts !== undefined ? [...alts] : [schema];
  if (schema.nullable === true) list.push({ type: 'null' });
  return list;
}

/** A value the schema accepts (field-aware values first). */
export function validValue(rng: Rng, schema: Schema, field: string, known: ValidValue): unknown {
  const domain = known(field);
  if (domain !== undefined) return domain;
  const alt = rng.pick(alternatives(schema));
  if (alt.enum !== undefined) return rng.pick(alt.enum);
  switch (alt.type) {
    case 'null':
      return null;
    case 'integer':
      return rng.int(1, 1000);
    case 'number':
      return rng.int(1, 100) / 100;
    case 'boolean':
      return rng.chance(0.5);
    case 'object':
      return validObject(rng, alt, known);
    case 'array':
      return [];
    default:
      if (alt.pattern === '^[0-9]{1,6}$') return String(rng.int(0, 999_999));
      return rng.chars(rng.int(1, Math.min(alt.maxLength ?? 30, 30)));
  }
}

/** An object with every required property and some optional ones, valid by the schema. */
export function validObject(rng: Rng, schema: Schema, known: ValidValue): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const required = new Set(schema.required ?? []);
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    if (required.has(name) || rng.chance(0.4)) out[name] = validValue(rng, prop, name, known);
  }
  return out;
}

/** A value of the wrong kind or at the edge for this schema. */
export function hostileValue(rng: Rng, schema: Schema): unknown {
  const alt = rng.pick(alternatives(schema));
  const roll = rng.next();
  if (roll < 0.3) return anyJson(rng);
  if (alt.type === 'string') {
    if (alt.maxLength !== undefined && rng.chance(0.3)) return 'm'.repeat(alt.maxLength + rng.pick([0, 1, 1000]));
    return rng.pick(HOSTILE_STRINGS);
  }
  if (alt.type === 'integer' || alt.type === 'number') return rng.pick(HOSTILE_NUMBERS);
  return rng.pick(HOSTILE_STRINGS);
}

/** How a valid body was bent into an almost-valid one. */
export type Mutation = 'drop-required' | 'unknown-field' | 'wrong-field' | 'edge-length' | 'case-change';

/** A valid object with one thing wrong (or at an edge). */
export function almostValidObject(rng: Rng, schema: Schema, known: ValidValue): { body: Record<string, unknown>; mutation: Mutation } {
  const body = validObject(rng, schema, known);
  const props = Object.keys(schema.properties ?? {});
  const mutation: Mutation = rng.pick(['drop-required', 'unknown-field', 'wrong-field', 'wrong-field', 'edge-length', 'case-change']);
  const field = rng.pick(props.length > 0 ? props : ['x']);
  const prop = schema.properties?.[field] ?? {};
  switch (mutation) {
    case 'drop-required': {
      const required = schema.required ?? [];
      if (required.length > 0) delete body[rng.pick(required)];
      else body[field] = undefined;
      break;
    }
    case 'unknown-field':
      body[rng.pick(['is_admin', 'user_id', 'id', 'status', 'role', field.toUpperCase(), `${field} `])] = anyJson(rng);
      break;
    case 'wrong-field':
      body[field] = hostileValue(rng, prop);
      break;
    case 'edge-length':
      body[field] = 'e'.repeat(rng.pick([prop.maxLength ?? 100, (prop.maxLength ?? 100) + 1, 0]));
      break;
    case 'case-change': {
      const value = body[field];
      body[field] = typeof value === 'string' ? value.toUpperCase() : String(value);
      break;
    }
  }
  return { body, mutation };
}
