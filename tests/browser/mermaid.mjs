#!/usr/bin/env node
// usage: node mermaid.mjs <markdown-file>
//
// Checks that every ```mermaid block `bf` writes into Markdown would really
// render (as on GitHub, which runs mermaid in a browser): each block is parsed
// and rendered by mermaid's own browser bundle in headless Chromium, offline.
// Prints ONE JSON object: { blocks: [{ ok, error, type, bars, lines, series,
// title, xLabels, nan, svgLength }] }.
// Exit 0 whatever the blocks contain (the Rust test asserts); exit 2 only when
// the file, the modules or the browser could not be used.
//
// env: BF_BROWSER_MODULES  node_modules folder holding playwright-core and mermaid
//                          (default: ./node_modules next to this script)
//      BF_CHROMIUM         browser binary (default: /usr/bin/chromium)
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { die as stop, launch, modules } from './chromium.mjs';

const bundle = path.join(modules, 'mermaid', 'dist', 'mermaid.min.js');
const die = (msg) => stop('mermaid.mjs', msg);

const [mdArg] = process.argv.slice(2);
if (!mdArg) die('usage: node mermaid.mjs <markdown-file>');
let markdown;
try {
  markdown = readFileSync(mdArg, 'utf8');
} catch (e) {
  die(`cannot read ${mdArg}: ${e.message}`);
}
if (!existsSync(bundle)) die(`no mermaid bundle at ${bundle} (run npm ci there)`);

// Fenced blocks per CommonMark: the closing fence uses the same character, is
// at least as long as the opening one, and carries no info string.
function mermaidBlocks(md) {
  const blocks = [];
  let open = null;
  let body = [];
  for (const line of md.split(/\r?\n/)) {
    if (!open) {
      const m = /^ {0,3}(`{3,}|~{3,})\s*mermaid\s*$/.exec(line);
      if (m) { open = m[1]; body = []; }
      continue;
    }
    const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
    if (close && close[1][0] === open[0] && close[1].length >= open.length) {
      blocks.push(body.join('\n'));
      open = null;
    } else {
      body.push(line);
    }
  }
  if (open) blocks.push(body.join('\n')); // unterminated: CommonMark runs it to EOF
  return blocks;
}

// First word of the diagram proper, past any front matter and %% comments.
function diagramType(text) {
  const lines = text.split('\n');
  let i = 0;
  if (lines[0]?.trim() === '---') {
    i = lines.findIndex((l, j) => j > 0 && l.trim() === '---') + 1 || lines.length;
  }
  for (; i < lines.length; i++) {
    const t = lines[i].trim();
    if (t && !t.startsWith('%%')) return t.split(/\s+/)[0];
  }
  return null;
}

const blocks = mermaidBlocks(markdown);

// Last resort against a hung browser: Playwright kills the child on exit.
setTimeout(() => die('timed out'), 60_000 + 30_000 * (blocks.length + 1)).unref();

const browser = await launch('mermaid.mjs');

const withTimeout = (p, ms, what) => Promise.race([
  p,
  new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms).unref()),
]);

let code = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  // Any request would mean the bundle reached for the network; fail loudly.
  await page.route('**/*', (route) => route.abort());
  await page.setContent('<!doctype html><html><head><meta charset="utf-8"></head><body></body></html>');
  // addScriptTag({ path }) inlines the file, so nothing is fetched.
  await page.addScriptTag({ path: bundle });
  await page.evaluate(() => window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' }));

  const results = [];
  for (let i = 0; i < blocks.length; i++) {
    const text = blocks[i];
    let r;
    try {
      r = await withTimeout(page.evaluate(async ({ text, id }) => {
        try {
          await window.mermaid.parse(text);
          const { svg } = await window.mermaid.render(id, text);
          // Inspect the markup in a detached container: mermaid has already laid it out.
          const holder = document.createElement('div');
          holder.innerHTML = svg;
          // xychart: one <g class="bar-plot-N"> with a <rect> per bar and one
          // <g class="line-plot-N"> with a single <path> per line series; N counts
          // all series in declaration order.
          const series = [...holder.querySelectorAll('g.plot > g[class*="-plot-"]')].map((g) => {
            const kind = g.getAttribute('class').startsWith('bar-plot-') ? 'bar' : 'line';
            const points = kind === 'bar'
              ? g.querySelectorAll('rect').length
              : (g.querySelector('path')?.getAttribute('d')?.match(/[ML]/g) || []).length;
            return { kind, points };
          });
          return {
            ok: true,
            error: null,
            bars: holder.querySelectorAll('g[class^="bar-plot-"] rect').length,
            lines: holder.querySelectorAll('g[class^="line-plot-"] path').length,
            series,
            title: holder.querySelector('.chart-title text')?.textContent ?? null,
            xLabels: [...holder.querySelectorAll('.bottom-axis .label text')].map((t) => t.textContent),
            // A series shorter than the x-axis renders silently with NaN coordinates.
            nan: /="[^"]*NaN/.test(svg),
            svgLength: svg.length,
          };
        } catch (e) {
          // A failed render can leave its scratch element behind; drop it so
          // the next block starts clean.
          document.getElementById('d' + id)?.remove();
          document.getElementById(id)?.remove();
          return { ok: false, error: String(e?.message ?? e), bars: 0, lines: 0, series: [],
            title: null, xLabels: [], nan: false, svgLength: 0 };
        }
      }, { text, id: `m${i}` }), 30_000, `block ${i}`);
    } catch (e) {
      r = { ok: false, error: e.message, bars: 0, lines: 0, series: [], title: null, xLabels: [],
        nan: false, svgLength: 0 };
    }
    results.push({ ok: r.ok, error: r.error, type: diagramType(text), ...r });
  }
  process.stdout.write(JSON.stringify({ blocks: results }) + '\n');
} catch (e) {
  process.stderr.write(`mermaid.mjs: ${e.message}\n`);
  code = 2;
} finally {
  await browser.close().catch(() => {});
}
process.exit(code);
