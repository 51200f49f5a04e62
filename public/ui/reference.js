// The API reference page (/reference): the server's own OpenAPI document, rendered as a readable list of endpoints grouped by tag.
import { h } from './dom.js';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** A schema in a few words: `string`, `array of Deployment`, `{name: string, …}`. */
function describe(schema, doc, depth = 0) {
  if (!schema) return 'nothing';
  if (schema.$ref) return schema.$ref.split('/').pop();
  if (schema.anyOf || schema.oneOf) return (schema.anyOf || schema.oneOf).map((s) => describe(s, doc, depth)).join(' or ');
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (schema.type === 'array') return `array of ${describe(schema.items, doc, depth)}`;
  if (schema.type === 'object' && schema.properties && depth < 1) {
    const required = new Set(schema.required || []);
    return `{${Object.entries(schema.properties).map(([k, v]) => `${k}${required.has(k) ? '' : '?'}: ${describe(v, doc, depth + 1)}`).join(', ')}}`;
  }
  return Array.isArray(schema.type) ? schema.type.join(' | ') : schema.type || 'object';
}

function operation(doc, path, method, op) {
  const anchor = `${method}-${path}`.replace(/[^a-z0-9]+/gi, '-').replace(/-+$/, '');
  const params = (op.parameters || []).map((p) => h('li', {}, h('code', { text: p.name }), ` (${p.in}${p.required ? ', required' : ''}): ${describe(p.schema, doc)}`, p.description ? ` — ${p.description}` : ''));
  const body = op.requestBody?.content && Object.entries(op.requestBody.content)[0];
  const responses = Object.entries(op.responses || {}).map(([status, r]) => {
    const content = r.content && Object.values(r.content)[0];
    return h('li', {}, h('code', { text: status }), ` ${r.description || ''}${content?.schema ? `: ${describe(content.schema, doc)}` : ''}`);
  });
  return h('section', { class: 'card op', id: anchor, 'aria-labelledby': `${anchor}-title` },
    h('h3', { id: `${anchor}-title` }, h('span', { class: `method ${method}`, text: method.toUpperCase() }), ' ', h('code', { text: path })),
    op.summary ? h('p', { text: op.summary }) : '',
    (op.security && op.security.length === 0) ? h('p', { class: 'muted', text: 'No authentication.' }) : '',
    params.length ? [h('h4', { text: 'Parameters' }), h('ul', {}, params)] : '',
    body ? [h('h4', { text: `Body (${body[0]})` }), h('p', {}, h('code', { class: 'schema', text: describe(body[1].schema, doc) }))] : '',
    h('h4', { text: 'Answers' }), h('ul', {}, responses));
}

async function main() {
  const res = await fetch('/api/v1/openapi.json');
  if (!res.ok) throw new Error(`the OpenAPI document could not be read (HTTP ${res.status})`);
  const doc = await res.json();
  const groups = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || 'other';
      if (!groups.has(tag)) groups.set(tag, []);
      groups.get(tag).push(operation(doc, path, method, op));
    }
  }
  const toc = document.getElementById('reference-toc');
  const out = document.getElementById('reference');
  for (const [tag, ops] of groups) {
    toc.append(h('a', { href: `#tag-${tag}`, text: tag }));
    out.append(h('h2', { id: `tag-${tag}`, class: 'tag', text: tag }), ...ops);
  }
  document.documentElement.dataset.ready = '';
}

main().catch((err) => {
  document.getElementById('error').textContent = err.message;
  document.documentElement.dataset.ready = '';
});
