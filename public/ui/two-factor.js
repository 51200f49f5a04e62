// Two-factor login on the account page (decisions §18): setup with a QR code drawn here (no request leaves the host), confirm, turn off.
import { call } from './api.js';
import { h } from './dom.js';
import qrcode from './vendor/qrcode.js';

const SVG = 'http://www.w3.org/2000/svg';

/** The QR code of `text` as an SVG of dark modules (4-module quiet zone), with the text as its label. */
export function qrSvg(text) {
  const qr = qrcode(0, 'M');
  qr.addData(text, 'Byte');
  qr.make();
  const n = qr.getModuleCount();
  const size = n + 8;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${size} ${size}`);
  svg.setAttribute('width', String(size * 5));
  svg.setAttribute('height', String(size * 5));
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'QR code of the two-factor secret for your authenticator app');
  svg.setAttribute('class', 'qr');
  svg.dataset.modules = String(n);
  const background = document.createElementNS(SVG, 'rect');
  for (const [k, v] of Object.entries({ width: size, height: size, fill: '#fff' })) background.setAttribute(k, String(v));
  svg.append(background);
  let d = '';
  for (let r = 0; r < n; r += 1) for (let c = 0; c < n; c += 1) if (qr.isDark(r, c)) d += `M${c + 4} ${r + 4}h1v1h-1z`;
  const path = document.createElementNS(SVG, 'path');
  path.setAttribute('d', d);
  path.setAttribute('fill', '#000');
  svg.append(path);
  return svg;
}

export function renderTwoFactor(section, ctx) {
  const state = h('p', { id: 'twofa-state', role: 'status' });
  const body = h('div', { id: 'twofa' });
  section.append(h('h2', { text: 'Two-factor login' }), state, body);

  const codeForm = (label, button, onCode) => {
    const code = h('input', { name: 'code', inputmode: 'numeric', autocomplete: 'one-time-code', pattern: '[0-9]{6}', maxlength: '6', required: true });
    const form = h('form', { class: 'row' }, h('label', {}, label, code), h('button', { class: 'primary', text: button }));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      ctx.run(async () => onCode(code.value));
    });
    return form;
  };

  async function show() {
    const { enabled } = await call('GET', '/users/me/2fa', undefined, { signal: ctx.signal });
    state.textContent = enabled ? 'Two-factor login is on: logging in asks for a code from your app.' : 'Two-factor login is off.';
    if (enabled) {
      body.replaceChildren(codeForm('Code from your app', 'Turn off', async (code) => {
        await call('DELETE', '/users/me/2fa', { code });
        await show();
      }));
      return;
    }
    const start = h('button', { type: 'button', class: 'primary', id: 'twofa-setup', text: 'Set up two-factor login' });
    start.addEventListener('click', () => ctx.run(async () => {
      const setup = await call('POST', '/users/me/2fa');
      body.replaceChildren(
        h('p', { text: 'Scan this code with your authenticator app (or type the secret), then enter the code it shows.' }),
        qrSvg(setup.otpauth_url),
        h('p', {}, 'Secret: ', h('code', { id: 'twofa-secret', class: 'secret-value', text: setup.secret })),
        codeForm('Code from your app', 'Turn on', async (code) => {
          await call('POST', '/users/me/2fa/confirm', { code });
          await show();
        }));
      body.querySelector('input[name=code]').focus();
    }));
    body.replaceChildren(start);
  }
  ctx.run(show);
}
