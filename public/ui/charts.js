// Small live charts as inline SVG (no library): a sparkline of the last samples of one or two series.
const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 120;
const HEIGHT = 40;

/**
 * A sparkline: `update(seriesA, seriesB?)` redraws from arrays of numbers. `max` fixes the top of
 * the scale (memory limit, 100 % CPU); otherwise the largest sample is.
 */
export function sparkline(label, max) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${WIDTH} ${HEIGHT}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  const lines = [0, 1].map((i) => {
    const line = document.createElementNS(SVG, 'polyline');
    if (i === 1) line.setAttribute('class', 'second');
    svg.append(line);
    return line;
  });
  return {
    svg,
    update(...series) {
      const top = Math.max(max ?? 0, ...series.flat(), 1e-9);
      series.forEach((values, i) => {
        const step = WIDTH / Math.max(1, values.length - 1);
        lines[i].setAttribute('points', values.map((v, j) => `${(j * step).toFixed(1)},${(HEIGHT - 1 - (v / top) * (HEIGHT - 2)).toFixed(1)}`).join(' '));
      });
    },
  };
}
