#!/usr/bin/env node
// usage: node report.mjs <html-file> <screenshot.png>
//
// Opens a self-contained `bf` HTML report in headless Chromium and prints ONE
// JSON object describing what a reader would see (console errors, network
// requests, chart geometry, text), then saves a full-page screenshot.
// Exit 0 whenever the page loaded, even if it is broken: the Rust test makes
// the assertions. Exit 2 only when the browser or the file could not be used.
//
// env: BF_BROWSER_MODULES  node_modules folder holding playwright-core
//                          (default: ./node_modules next to this script)
//      BF_CHROMIUM         browser binary (default: /usr/bin/chromium)
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { die as stop, launch } from './chromium.mjs';

const die = (msg) => stop('report.mjs', msg);

const [htmlArg, pngArg] = process.argv.slice(2);
if (!htmlArg || !pngArg) die('usage: node report.mjs <html-file> <screenshot.png>');
const htmlFile = path.resolve(htmlArg);
if (!existsSync(htmlFile)) die(`no such file: ${htmlFile}`);

// Last resort against a hung browser: Playwright kills the child on exit.
setTimeout(() => die('timed out after 150 s'), 150_000).unref();

const browser = await launch('report.mjs');

let code = 0;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  const docUrl = pathToFileURL(htmlFile).href;

  // Listeners go on before navigation so nothing the page does at parse time is missed.
  const consoleMsgs = [];
  const requests = [];
  page.on('console', (m) => {
    const t = m.type();
    if (t === 'error' || t === 'warning') consoleMsgs.push(`${t}: ${m.text()}`);
  });
  page.on('pageerror', (e) => consoleMsgs.push(`pageerror: ${e.message}`));
  page.on('request', (r) => {
    if (r.url() !== docUrl) requests.push(r.url());
  });

  try {
    await page.goto(docUrl, { waitUntil: 'load', timeout: 30_000 });
  } catch (e) {
    throw new Error(`cannot load ${docUrl}: ${e.message}`);
  }

  const facts = await page.evaluate(() => {
    // getBoundingClientRect and getScreenCTM are viewport-relative; add the
    // scroll offset so every number is a page coordinate, like the screenshot.
    const sx = window.scrollX;
    const sy = window.scrollY;
    const box = (el) => {
      const r = el.getBoundingClientRect();
      return { x: r.x + sx, width: r.width };
    };
    const toPage = (el, x, y) => {
      const m = el.getScreenCTM();
      const p = m ? new DOMPoint(x, y).matrixTransform(m) : { x, y };
      return [p.x + sx, p.y + sy];
    };
    // Vertices of a path's d: M/L/H/V (absolute and relative); for curves and
    // arcs only the end point, which is enough to compare series positions.
    const pathVertices = (d) => {
      const argc = { M: 2, L: 2, H: 1, V: 1, C: 6, S: 4, Q: 4, T: 2, A: 7, Z: 0 };
      const tokens = d.match(/[a-zA-Z]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/g) || [];
      const pts = [];
      let x = 0, y = 0, sx0 = 0, sy0 = 0, cmd = null, i = 0;
      while (i < tokens.length) {
        if (/^[a-zA-Z]$/.test(tokens[i])) cmd = tokens[i++];
        if (!cmd) break;
        const up = cmd.toUpperCase();
        const rel = cmd !== up;
        if (up === 'Z') { x = sx0; y = sy0; cmd = null; continue; }
        const n = argc[up];
        if (n === undefined) break;
        const a = tokens.slice(i, i + n).map(Number);
        if (a.length < n || a.some(Number.isNaN)) break;
        i += n;
        if (up === 'H') x = rel ? x + a[0] : a[0];
        else if (up === 'V') y = rel ? y + a[0] : a[0];
        else { x = rel ? x + a[n - 2] : a[n - 2]; y = rel ? y + a[n - 1] : a[n - 1]; }
        if (up === 'M') { sx0 = x; sy0 = y; cmd = rel ? 'l' : 'L'; } // extra M pairs are line-tos
        pts.push([x, y]);
      }
      return pts;
    };

    const charts = [...document.querySelectorAll('section.chart')].map((sec) => {
      const svgs = sec.querySelectorAll('svg');
      const marks = sec.querySelectorAll(
        'svg polyline, svg path, svg circle, svg rect:not(.hit):not(.window)').length;
      const hits = [...sec.querySelectorAll('rect.hit')].map((r) => ({
        first: r.getAttribute('data-first'),
        last: r.getAttribute('data-last'),
        inside: r.getAttribute('data-inside') === 'true',
        before: r.getAttribute('data-before'),
        after: r.getAttribute('data-after'),
        title: r.querySelector('title')?.textContent ?? null,
        cover: getComputedStyle(r).fill,
        ...box(r),
      }));
      const w = sec.querySelector('rect.window');
      const window_ = w
        ? { first: w.getAttribute('data-first'), last: w.getAttribute('data-last'), ...box(w) }
        : null;
      const lines = [];
      if (svgs[0]) {
        for (const el of svgs[0].querySelectorAll('polyline, path[d]')) {
          const raw = el.tagName.toLowerCase() === 'polyline'
            ? [...el.points].map((p) => [p.x, p.y])
            : pathVertices(el.getAttribute('d'));
          lines.push({
            stroke: el.getAttribute('stroke'),
            points: raw.map(([x, y]) => toPage(el, x, y)),
          });
        }
      }
      return {
        metric: sec.getAttribute('data-metric'),
        svgs: svgs.length,
        marks,
        hits,
        window: window_,
        lines,
      };
    });

    // A calendar's days (bf gaps --html): each hover area's facts, and the colour the picture
    // under it is drawn in there (the first element beneath that is not an overlay's).
    const days = [...document.querySelectorAll('rect.day')].map((r) => {
      r.scrollIntoView({ block: 'center', inline: 'center' }); // elementsFromPoint sees the viewport only
      const b = r.getBoundingClientRect();
      const under = document
        .elementsFromPoint(b.x + b.width / 2, b.y + b.height / 2)
        .find((el) => el.tagName.toLowerCase() === 'rect' && !el.closest('svg.overlay'));
      return {
        day: r.getAttribute('data-day'),
        rows: r.getAttribute('data-rows'),
        mark: r.getAttribute('data-mark'),
        title: r.querySelector('title')?.textContent ?? null,
        fill: under ? under.getAttribute('fill') : null,
        cover: getComputedStyle(r).fill, // the hover area itself: must let the picture show

      };
    });

    const csp = document.querySelector('meta[http-equiv="Content-Security-Policy" i]');
    return {
      csp: csp ? csp.getAttribute('content') : null,
      title: document.title,
      text: document.body ? document.body.innerText : '',
      charts,
      days,
      tables: document.querySelectorAll('table').length,
    };
  });

  process.stdout.write(JSON.stringify({ console: consoleMsgs, requests, ...facts }) + '\n');
  await page.screenshot({ path: path.resolve(pngArg), fullPage: true, timeout: 30_000 });
} catch (e) {
  process.stderr.write(`report.mjs: ${e.message}\n`);
  code = 2;
} finally {
  await browser.close().catch(() => {});
}
process.exit(code);
