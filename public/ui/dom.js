// DOM helpers: elements built with textContent only (no HTML strings), dialogs, and small formatting.

/** `h('button', {class: 'primary', onclick: fn, disabled: true}, 'Text', child, [more])`. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (name === 'text') el.textContent = value;
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name in el && typeof value !== 'string') el[name] = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** A status badge (`running`, `failed`…). */
export function badge(status, label) {
  return h('span', { class: `badge ${status}` }, label || status);
}

/**
 * Replaces `parent`'s children, keeping keyboard focus on the element with the same `data-key` (a
 * poll re-renders a list without throwing the user's focus away).
 */
export function replaceKeepingFocus(parent, ...children) {
  const active = document.activeElement;
  const key = active && parent.contains(active) ? active.dataset.key : undefined;
  parent.replaceChildren(...children.flat());
  if (key) parent.querySelector(`[data-key="${CSS.escape(key)}"]`)?.focus();
}

const confirmDialog = () => document.getElementById('confirm');

/**
 * A real modal confirmation (focus trapped; Enter confirms, Escape cancels). Resolves true when confirmed.
 */
export function confirmAction({ title, body, confirm = 'Confirm', danger = true }) {
  const dialog = confirmDialog();
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-body').textContent = body;
  const ok = document.getElementById('confirm-ok');
  ok.textContent = confirm;
  ok.className = danger ? 'danger' : 'primary';
  dialog.returnValue = '';
  const opener = document.activeElement;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'ok');
      if (opener && opener.isConnected) opener.focus();
    }, { once: true });
    dialog.showModal();
    ok.focus();
  });
}

/** Closes the confirmation if open (logout, navigation). */
export function closeDialogs() {
  const dialog = confirmDialog();
  if (dialog.open) dialog.close('cancel');
}

export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  if (seconds < 45) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
  return date.toLocaleDateString();
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function duration(fromIso, toIso) {
  if (!fromIso) return '';
  const ms = (toIso ? new Date(toIso) : new Date()) - new Date(fromIso);
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}
