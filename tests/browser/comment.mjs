#!/usr/bin/env node
// usage: node comment.mjs <markdown-file> <screenshot.png>
//
// A pull-request comment as a reader sees it, for the README's picture: the markdown rendered by
// `marked` (GitHub-flavoured), each ```mermaid block drawn by Mermaid's own bundle, in headless
// Chromium, offline, and a screenshot of the page saved. Not a test: scripts/screenshots runs it.
//
// env: BF_BROWSER_MODULES  node_modules folder holding playwright-core, mermaid and marked
//      BF_CHROMIUM         browser binary (default: /usr/bin/chromium)
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { die as stop, launch, load, modules } from './chromium.mjs';

const die = (msg) => stop('comment.mjs', msg);
const [mdArg, pngArg] = process.argv.slice(2);
if (!mdArg || !pngArg) die('usage: node comment.mjs <markdown-file> <screenshot.png>');
setTimeout(() => die('timed out'), 150_000).unref();

const { marked } = await load('comment.mjs', path.join('marked', 'lib', 'marked.esm.js'));

// Mermaid blocks become the elements mermaid.run() draws; everything else is marked's HTML.
const renderer = new marked.Renderer();
const code = renderer.code.bind(renderer);
renderer.code = (token) =>
  token.lang === 'mermaid' ? `<pre class="mermaid">${token.text.replace(/</g, '&lt;')}</pre>` : code(token);
const body = marked.parse(readFileSync(mdArg, 'utf8'), { gfm: true, renderer });
const page = `<!doctype html><meta charset="utf-8"><style>
body { font: 14px/1.5 -apple-system, system-ui, sans-serif; color: #1f2328; max-width: 860px; margin: 16px auto;
  border: 1px solid #d0d7de; border-radius: 6px; padding: 16px 24px; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 4px 10px; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; } pre.mermaid { background: none; }
</style>${body}`;

const browser = await launch('comment.mjs');
try {
  const tab = await browser.newPage({ viewport: { width: 940, height: 900 } });
  await tab.setContent(page, { waitUntil: 'load' });
  await tab.addScriptTag({ path: path.join(modules, 'mermaid', 'dist', 'mermaid.min.js') });
  await tab.evaluate(async () => {
    window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });
    await window.mermaid.run({ querySelector: 'pre.mermaid' });
  });
  // From the first table's charts on: the picture the README shows of a comment.
  const top = await tab.evaluate(() => {
    const first = [...document.querySelectorAll('p')].find((p) => p.textContent.startsWith('Before and after'));
    return first ? first.getBoundingClientRect().top + window.scrollY - 12 : 0;
  });
  const height = await tab.evaluate(() => document.body.scrollHeight + 32);
  const clip = { x: 0, y: top, width: 940, height: Math.min(height - top, 1100) };
  await tab.screenshot({ path: path.resolve(pngArg), clip, fullPage: true });
} finally {
  await browser.close();
}
