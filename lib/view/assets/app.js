// app.js — the difflens viewer page: asks the server only for what is on screen
// (PNG tiles at the zoom level shown, one cell or one row at a time), so a map of any
// length opens as fast as a small one. No libraries, no network beyond this server.
"use strict";

const SEG_COLOR = ["#e8e8e8", "#000000", "#009e73", "#0072b2", "#e69f00", "#cc79a7", "#d55e00"];
const SEG_NAME = ["context", "bos", "answer", "query", "distractor", "target", "generated"];
// an image sample's segments (vision/segments): 0 background, 1 the class token, 2 the object
const IMAGE_SEG_NAME = ["background", "cls", "object"];
const OVERLAY_ALPHA = 0.6; // the map's weight over the image, as attnmap draws it
const BAND = 8;          // segment band thickness (px)
const GAP = 2;           // band to map
let AREA = 560;          // map area per panel (px): smaller for two
const MAX_TILES = 600;   // tile images kept in the page

const $ = (id) => document.getElementById(id);
const st = {
  dumps: [], samples: {}, cmaps: {}, tiles: new Map(),
  a: 0, b: -1, mode: "single", s: 0, layer: 0, head: 0, map: "",  // "": the last the dump has (diff for Diff)
  view: null,      // {s: px per cell, ox, oy: cell at the area's top-left}
  panels: [],      // [{dump, map, minus, limits, canvas, bar}]
  row: null,       // selected query position
  hoverSeq: 0,
  gen: 0,          // rebuild generation (stale polls stop)
  thumbRev: 0,
};

async function getJSON(url) {
  const r = await fetch(url);
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}

function status(text) { $("status").textContent = text || ""; }

function segNames(sample) { return sample && sample.kind === "image" ? IMAGE_SEG_NAME : SEG_NAME; }

function option(sel, value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  sel.appendChild(o);
}

// Six significant digits on screen; the exact value rides along in data-value.
function fmt(v) {
  if (v === null || v === undefined) return "—";
  return Number(v).toPrecision(6);
}

// ---------------------------------------------------------------- selection

function dumpOf(i) { return st.dumps[i]; }
function sampleInfo(d) { return dumpOf(d).samples[st.s]; }
function pairOk() {
  if (st.b < 0) return false;
  const sa = sampleInfo(st.a), sb = dumpOf(st.b).samples[st.s];
  return sb && sb.T === sa.T && sb.R === sa.R;
}

async function loadSample(d) {
  const key = d + ":" + st.s;
  if (!st.samples[key]) st.samples[key] = await getJSON(`/api/sample?d=${d}&s=${st.s}`);
  return st.samples[key];
}

async function colormap(name) {
  if (!st.cmaps[name]) st.cmaps[name] = (await getJSON(`/api/colormap?cmap=${name}`)).colors;
  return st.cmaps[name];
}

function fillSelectors() {
  const sa = sampleInfo(st.a);
  const ls = $("layer"), hs = $("head"), ms = $("map");
  ls.innerHTML = ""; hs.innerHTML = ""; ms.innerHTML = "";
  sa.layers.forEach((l) => option(ls, l, l));
  sa.heads.forEach((h) => option(hs, h, h));
  sa.maps.forEach((m) => option(ms, m, m));
  if (!sa.layers.includes(st.layer)) st.layer = sa.layers[0];
  if (!sa.heads.includes(st.head)) st.head = sa.heads[0];
  if (!sa.maps.includes(st.map)) st.map = sa.maps[sa.maps.length - 1];
  ls.value = st.layer; hs.value = st.head; ms.value = st.map;
}

// Which panels to draw: dump, map and the dump subtracted (delta).
function planPanels() {
  const out = [{ dump: st.a, map: st.map, minus: -1 }];
  if (st.b >= 0 && pairOk()) {
    const sb = dumpOf(st.b).samples[st.s];
    if (st.mode === "side") {
      const m = sb.maps.includes(st.map) ? st.map : sb.maps[sb.maps.length - 1];
      out.push({ dump: st.b, map: m, minus: -1 });
    } else if (st.mode === "delta") {
      if (!sb.maps.includes(st.map)) { status(`dump ${st.b} has no ${st.map}: no delta`); return out; }
      out[0].minus = st.b;
    }
  }
  return out;
}

function mapParams(p) {
  return `d=${p.dump}&s=${st.s}&l=${st.layer}&h=${st.head}&m=${p.map}` + (p.minus >= 0 ? `&minus=${p.minus}` : "");
}

// ------------------------------------------------------------------- panels

async function rebuild(keepView) {
  const gen = ++st.gen;
  status("");
  const sa = sampleInfo(st.a);
  const plan = planPanels();
  // colour limits: shared by panels of one kind (both diverging or both not)
  const lim = await Promise.all(plan.map((p) => getJSON(`/api/limits?${mapParams(p)}&pool=${$("pool").value}`)));
  for (const kind of [true, false]) {
    const idx = plan.map((_, i) => i).filter((i) => lim[i].diverging === kind);
    if (!idx.length) continue;
    let lo = Math.min(...idx.map((i) => lim[i].vmin)), hi = Math.max(...idx.map((i) => lim[i].vmax));
    if (kind) { hi = Math.max(hi, -lo); lo = -hi; }
    if ($("scale").value === "log" && !kind) lo = Math.max(lo, hi * 1e-4);
    const complete = idx.every((i) => lim[i].complete);
    idx.forEach((i) => { plan[i].limits = { vmin: lo, vmax: hi, diverging: kind, complete }; });
  }
  const box = $("panels");
  box.innerHTML = "";
  const newArea = plan.length > 1 ? 440 : 560;
  if (newArea !== AREA && st.view) { st.view.s *= newArea / AREA; }
  AREA = newArea;
  st.panels = [];
  for (const p of plan) {
    const div = document.createElement("div");
    div.className = "panel";
    const d = dumpOf(p.dump);
    const t = document.createElement("div");
    t.className = "title";
    t.textContent = `${d.name} (${d.model_type}) · ${p.map}` + (p.minus >= 0 ? ` − ${dumpOf(p.minus).name}` : "") +
      ` · layer ${st.layer} head ${st.head}`;
    const c = document.createElement("canvas");
    c.className = "map";
    c.width = c.height = AREA + BAND + GAP;
    c.dataset.dump = p.dump;
    const bar = document.createElement("canvas");
    bar.className = "bar";
    bar.width = AREA + BAND + GAP;
    bar.height = 34;
    div.append(t, c, bar);
    box.appendChild(div);
    p.canvas = c;
    p.bar = bar;
    p.sample = await loadSample(p.dump);
    p.cmap = await colormap(p.limits.diverging ? "rdbu" : $("cmap").value);
    attachEvents(p);
    st.panels.push(p);
  }
  if (!keepView || !st.view) fit();
  drawLegend();
  drawGenerated();
  draw();
  st.panels.forEach((p) => drawBar(p));
  drawNoise();
  drawOutliers();
  drawCaptions();
  await drawOverlays();
  if (st.panels.some((p) => !p.limits.complete)) {
    // a large map: this is a preview; poll until its full grid is pooled
    status("preview — pooling the whole map…");
    const poll = async () => {
      if (gen !== st.gen) return;
      const l = await Promise.all(plan.map((p) => getJSON(`/api/limits?${mapParams(p)}&pool=${$("pool").value}`)));
      if (gen !== st.gen) return;
      if (l.every((x) => x.complete)) { st.thumbRev++; drawOverview(); rebuild(true); } else setTimeout(poll, 500);
    };
    setTimeout(poll, 500);
  }
  // what the side panel shows follows the new map: the last hovered cell, the selected row
  const lc = st.lastCell;
  if (lc && lc.r < sa.R && lc.k < sa.T) hover({ ...lc, q: st.panels[0].sample.rows[lc.r] });
  else { st.lastCell = null; $("hover").textContent = "hover the map"; }
  if (st.row !== null && sa.R && st.panels[0].sample.rows.includes(st.row)) selectRow(st.row);
  else { st.row = null; $("topk").innerHTML = ""; $("rowtitle").textContent = ""; clearStrip(); }
}

function fit() {
  const sa = sampleInfo(st.a);
  const s = AREA / Math.max(sa.R, sa.T);
  st.view = { s, ox: 0, oy: 0 };
}

function zoomAt(factor, px, py) {
  const sa = sampleInfo(st.a), v = st.view;
  const minS = AREA / Math.max(sa.R, sa.T) / 2, maxS = 64;
  const ns = Math.min(maxS, Math.max(minS, v.s * factor));
  const cx = v.ox + px / v.s, cy = v.oy + py / v.s; // the cell under the pointer stays put
  v.s = ns;
  v.ox = cx - px / ns;
  v.oy = cy - py / ns;
  draw();
}

function level(p) {
  const si = sampleInfo(p.dump);
  return Math.max(0, Math.min(si.zmax, Math.floor(Math.log2(1 / st.view.s))));
}

function tileURL(p, z, x, y) {
  const L = p.limits;
  return `/api/tile?${mapParams(p)}&z=${z}&x=${x}&y=${y}&vmin=${L.vmin}&vmax=${L.vmax}` +
    `&scale=${$("scale").value}&cmap=${$("cmap").value}&pool=${$("pool").value}&rev=${L.complete ? 1 : 0}`;
}

// A tile image: loaded (drawn), loading (null for now), and a redraw when it arrives.
function tile(url) {
  let t = st.tiles.get(url);
  if (t) { st.tiles.delete(url); st.tiles.set(url, t); return t.ok ? t.img : null; }
  const img = new Image();
  t = { img, ok: false };
  img.onload = () => { t.ok = true; scheduleDraw(); };
  img.onerror = () => { st.tiles.delete(url); status("a tile failed to load"); };
  img.src = url;
  st.tiles.set(url, t);
  while (st.tiles.size > MAX_TILES) st.tiles.delete(st.tiles.keys().next().value);
  return null;
}

let drawPending = false;
function scheduleDraw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => { drawPending = false; draw(); });
}

function draw() { st.panels.forEach(drawPanel); }

function drawPanel(p) {
  const c = p.canvas, g = c.getContext("2d"), v = st.view, si = sampleInfo(p.dump);
  const x0 = BAND + GAP, y0 = BAND + GAP;
  g.fillStyle = "#fff";
  g.fillRect(0, 0, c.width, c.height);
  g.save();
  g.beginPath();
  g.rect(x0, y0, AREA, AREA);
  g.clip();
  g.imageSmoothingEnabled = false;
  const z = level(p), T2 = si.tile;
  const span = T2 * 2 ** z;
  const tx0 = Math.max(0, Math.floor(v.ox / span)), ty0 = Math.max(0, Math.floor(v.oy / span));
  const tx1 = Math.min(Math.ceil(si.T / span), Math.ceil((v.ox + AREA / v.s) / span));
  const ty1 = Math.min(Math.ceil(si.R / span), Math.ceil((v.oy + AREA / v.s) / span));
  for (let ty = ty0; ty < ty1; ty++)
    for (let tx = tx0; tx < tx1; tx++) {
      const img = tile(tileURL(p, z, tx, ty));
      if (img) {
        const cell = 2 ** z;
        g.drawImage(img, x0 + (tx * span - v.ox) * v.s, y0 + (ty * span - v.oy) * v.s,
                    img.width * cell * v.s, img.height * cell * v.s);
        continue;
      }
      // not here yet: draw the part of a coarser tile that covers it
      for (let zz = z + 1; zz <= si.zmax; zz++) {
        const sp = T2 * 2 ** zz, px = Math.floor(tx * span / sp), py = Math.floor(ty * span / sp);
        const url = tileURL(p, zz, px, py), t = st.tiles.get(url);
        if (!t || !t.ok) continue;
        const cell = 2 ** zz;
        g.drawImage(t.img, x0 + (px * sp - v.ox) * v.s, y0 + (py * sp - v.oy) * v.s,
                    t.img.width * cell * v.s, t.img.height * cell * v.s);
        break;
      }
    }
  // the selected row
  if (st.row !== null) {
    const r = p.sample.rows.indexOf(st.row);
    if (r >= 0) {
      g.strokeStyle = "#e00";
      g.lineWidth = 1;
      g.strokeRect(x0 - 1, y0 + (r - v.oy) * v.s - 0.5, AREA + 2, Math.max(1, v.s) + 1);
    }
  }
  g.restore();
  // segment bands: keys along the top, query rows down the left
  const seg = p.sample.segments, rows = p.sample.rows;
  for (let x = 0; x < AREA; x++) {
    const k = Math.floor(v.ox + (x + 0.5) / v.s);
    if (k < 0 || k >= si.T) continue;
    g.fillStyle = SEG_COLOR[seg[k]] || SEG_COLOR[0];
    g.fillRect(x0 + x, 0, 1, BAND);
  }
  for (let y = 0; y < AREA; y++) {
    const r = Math.floor(v.oy + (y + 0.5) / v.s);
    if (r < 0 || r >= si.R) continue;
    g.fillStyle = SEG_COLOR[seg[rows[r]]] || SEG_COLOR[0];
    g.fillRect(0, y0 + y, BAND, 1);
  }
}

async function drawBar(p, scale = $("scale").value) {
  const L = p.limits;
  const tk = await getJSON(`/api/ticks?vmin=${L.vmin}&vmax=${L.vmax}&scale=${scale}&div=${L.diverging ? 1 : 0}`);
  const g = p.bar.getContext("2d"), x0 = 44, w = p.bar.width - 2 * x0;
  g.fillStyle = "#fff";
  g.fillRect(0, 0, p.bar.width, p.bar.height);
  // the bar is uniform in the scale's position t, like attnmap's colour bar
  for (let x = 0; x < w; x++) {
    g.fillStyle = p.cmap[Math.min(255, Math.floor(256 * x / w))];
    g.fillRect(x0 + x, 2, 1, 14);
  }
  g.fillStyle = "#222";
  g.font = "11px sans-serif";
  g.textAlign = "center";
  tk.ticks.forEach((t) => {
    const x = x0 + t.t * w;
    g.fillRect(x, 16, 1, 4);
    g.fillText(t.label, x, 31);
  });
  g.textAlign = "left";
  g.fillText(scale, 0, 13);
}

function drawLegend() {
  const s0 = st.panels[0].sample, seen = new Set(s0.segments);
  const el = $("legend");
  el.innerHTML = "segments:";
  segNames(s0).forEach((n, i) => {
    if (!seen.has(i)) return;
    const sw = document.createElement("span");
    sw.className = "sw";
    sw.style.background = SEG_COLOR[i];
    el.append(sw, n);
  });
  const sw = document.createElement("span");
  sw.className = "sw";
  sw.style.background = "#c8c8c8";
  if (s0.causal !== false) el.append(sw, "masked (future)");
}

// ------------------------------------------------------------- interaction

function cellAt(p, ev) {
  const rect = p.canvas.getBoundingClientRect();
  const x = ev.clientX - rect.left - BAND - GAP, y = ev.clientY - rect.top - BAND - GAP;
  if (x < 0 || y < 0 || x >= AREA || y >= AREA) return null;
  const si = sampleInfo(p.dump);
  const k = Math.floor(st.view.ox + x / st.view.s), r = Math.floor(st.view.oy + y / st.view.s);
  if (k < 0 || r < 0 || k >= si.T || r >= si.R) return null;
  return { r, k, q: p.sample.rows[r], x, y };
}

function attachEvents(p) {
  const c = p.canvas;
  let drag = null;
  c.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const rect = c.getBoundingClientRect();
    zoomAt(ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX - rect.left - BAND - GAP, ev.clientY - rect.top - BAND - GAP);
  }, { passive: false });
  c.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, ox: st.view.ox, oy: st.view.oy, moved: false }; });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
  c.addEventListener("mousemove", (ev) => {
    if (drag && ev.buttons) {
      const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        st.view.ox = drag.ox - dx / st.view.s;
        st.view.oy = drag.oy - dy / st.view.s;
        scheduleDraw();
        return;
      }
    }
    const cell = cellAt(p, ev);
    if (cell) hover(cell);
  });
  c.addEventListener("click", (ev) => {
    if (drag && drag.moved) return;
    const cell = cellAt(p, ev);
    if (cell) selectRow(cell.q);
  });
}

function tokenText(sample, pos) {
  const t = sample.text ? sample.text[pos] : "#" + sample.tokens[pos];
  return t.replace(/\s/g, "␣");
}

async function hover(cell) {
  const seq = ++st.hoverSeq;
  st.lastCell = cell;
  const dumps = [st.a];
  if (st.b >= 0 && pairOk() && st.mode !== "single") dumps.push(st.b);
  let res;
  try {
    res = await Promise.all(dumps.map((d) =>
      getJSON(`/api/cell?d=${d}&s=${st.s}&l=${st.layer}&h=${st.head}&q=${cell.q}&k=${cell.k}`)));
  } catch (e) { status(e.message); return; }
  if (seq !== st.hoverSeq) return; // a newer hover won
  const s0 = st.panels[0].sample, c0 = res[0];
  const el = $("hover");
  el.innerHTML = "";
  const head = document.createElement("div");
  const names = segNames(s0);
  head.innerHTML = `query <b id="hq">${cell.q}</b> <span class="tok"></span> (${names[c0.query.segment] || "?"})` +
    ` → key <b id="hk">${cell.k}</b> <span class="tok"></span> (${names[c0.key.segment] || "?"})` +
    (c0.masked ? " · masked (future key)" : "");
  const toks = head.querySelectorAll(".tok");
  toks[0].textContent = tokenText(s0, cell.q);
  toks[1].textContent = tokenText(s0, cell.k);
  el.appendChild(head);
  const tab = document.createElement("table");
  tab.innerHTML = "<tr><th>dump</th><th>map1</th><th>map2</th><th>diff</th><th>λ</th></tr>";
  res.forEach((c, i) => {
    const tr = document.createElement("tr");
    const d = dumps[i];
    const cells = [dumpOf(d).name, c.map1, c.map2, c.diff, c.lambda];
    cells.forEach((v, j) => {
      const td = document.createElement("td");
      td.textContent = j ? fmt(v) : v;
      if (j) {
        td.className = "v";
        td.dataset.value = v === null || v === undefined ? "" : String(v);
        td.dataset.dump = d;
        td.dataset.field = ["", "map1", "map2", "diff", "lambda"][j];
      }
      tr.appendChild(td);
    });
    tab.appendChild(tr);
  });
  if (res.length === 2) {
    const tr = document.createElement("tr");
    tr.innerHTML = "<td>A − B</td>";
    ["map1", "map2", "diff"].forEach((m) => {
      const td = document.createElement("td");
      td.className = "v";
      const a = res[0][m], b = res[1][m];
      td.textContent = a === undefined || b === undefined || a === null || b === null ? "—" : fmt(a - b);
      tr.appendChild(td);
    });
    tab.appendChild(tr);
  }
  el.appendChild(tab);
  el.dataset.q = cell.q;
  el.dataset.k = cell.k;
}

async function selectRow(q) {
  st.row = q;
  const p = st.panels[0];
  let r;
  try {
    r = await getJSON(`/api/row?${mapParams(p)}&q=${q}&topk=10&width=${$("strip").width}`);
  } catch (e) { status(e.message); return; }
  $("rowtitle").textContent = `query ${q}: top ${r.top.length} of ${r.keys} keys (${p.map}` +
    (p.minus >= 0 ? " delta" : "") + `, ${dumpOf(p.dump).name})`;
  const ol = $("topk");
  ol.innerHTML = "";
  r.top.forEach((e) => {
    const li = document.createElement("li");
    li.dataset.k = e.k;
    li.dataset.v = e.v;
    const tok = document.createElement("span");
    tok.className = "tok";
    tok.textContent = e.text !== undefined ? e.text.replace(/\s/g, "␣") : "#" + e.token;
    const v = document.createElement("span");
    v.className = "v";
    v.textContent = fmt(e.v);
    li.append(`key ${e.k} `, tok, ` (${segNames(p.sample)[e.segment] || "?"}) `, v);
    ol.appendChild(li);
  });
  drawStrip(r);
  draw();
  if (p.sample.kind === "image") drawOverlays();
}

function clearStrip() {
  const c = $("strip"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
}

// The row as bars over the tokens (pooled by the entry farthest from 0 per bar).
function drawStrip(r) {
  const c = $("strip"), g = c.getContext("2d"), n = r.strip.length;
  g.fillStyle = "#fff";
  g.fillRect(0, 0, c.width, c.height);
  const m = Math.max(1e-12, ...r.strip.map((v) => Math.abs(v || 0)));
  const neg = r.strip.some((v) => v < 0), base = neg ? c.height / 2 : c.height - 8;
  const seg = st.panels[0].sample.segments;
  for (let i = 0; i < n; i++) {
    const v = r.strip[i] || 0, x = i * c.width / n, w = Math.max(1, c.width / n - (n < 100 ? 1 : 0));
    const h = v / m * (neg ? c.height / 2 - 2 : c.height - 10);
    g.fillStyle = v < 0 ? "#2166ac" : "#b2182b";
    g.fillRect(x, base - Math.max(h, 0), w, Math.abs(h));
    const k = Math.floor((i + 0.5) * r.keys / n);
    g.fillStyle = SEG_COLOR[seg[k]] || SEG_COLOR[0];
    g.fillRect(x, c.height - 6, w, 6);
  }
}

// ------------------------------------------------------------ statistics

function at(ds, idx) {
  // element of a {shape, data} dataset at a full index
  let o = 0;
  for (let i = 0; i < ds.shape.length; i++) o = o * ds.shape[i] + idx[i];
  return ds.data[o];
}

// probe --generate: each panel's generated text (or ids), from position `start` on
function drawGenerated() {
  const el = $("generated"), seen = new Set();
  el.innerHTML = "";
  for (const p of st.panels) {
    const g = p.sample.generated;
    if (!g || seen.has(p.dump)) continue;
    seen.add(p.dump);
    const line = document.createElement("div");
    const text = g.text !== null ? g.text : g.tokens.map((t) => "#" + t).join(" ");
    line.textContent = `${dumpOf(p.dump).name}: ${text} (${g.tokens.length} tokens from position ${g.start})`;
    el.appendChild(line);
  }
  el.parentElement.style.display = seen.size ? "" : "none";
}

async function drawNoise() {
  const el = $("noise");
  el.innerHTML = "";
  const dumps = [st.a];
  if (st.b >= 0 && pairOk() && st.mode !== "single") dumps.push(st.b);
  const samples = await Promise.all(dumps.map(loadSample));
  const names = (samples[0].stats.segment_names || "bos,context_before,answer,context_after,query,distractor,target")
    .split(",");
  const mi = (s, M) => (s.kind === "image" ? Math.max(0, Math.min(M - 1, ["map1", "map2", "diff"].indexOf(st.map))) : M - 1);
  const rows = [];
  samples.forEach((s, i) => {
    const ds = s.stats["noise/shares_abs"] || s.stats["noise/shares"];
    if (!ds) return;
    // the softmax map, or a Diff dump's diff map; an image sample: the map shown
    const [M, L, H, S] = ds.shape, m = mi(s, M);
    const mean = new Array(S).fill(0);
    for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) for (let j = 0; j < S; j++) mean[j] += at(ds, [m, l, h, j]) / (L * H);
    const here = st.layer < L && st.head < H ? names.map((_, j) => at(ds, [m, st.layer, st.head, j])) : null;
    rows.push({ label: dumpOf(dumps[i]).name, mean, here });
  });
  if (!rows.length) { el.textContent = "no noise statistics in this dump"; return; }
  const colors = ["#0072b2", "#d55e00"];
  const tab = document.createElement("table");
  const hr = document.createElement("tr");
  hr.appendChild(document.createElement("th"));
  rows.forEach((r) => {
    for (const what of ["mean", `L${st.layer} H${st.head}`]) {
      const th = document.createElement("th");
      th.textContent = `${r.label.replace(/\.h5$/, "")} ${what}`;
      hr.appendChild(th);
    }
  });
  tab.appendChild(hr);
  names.forEach((n, j) => {
    const tr = document.createElement("tr");
    const name = document.createElement("td");
    name.textContent = n;
    tr.appendChild(name);
    rows.forEach((r, i) => {
      for (const vals of [r.mean, r.here]) {
        const td = document.createElement("td");
        if (vals && vals[j] !== null) {
          const bar = document.createElement("span");
          bar.className = "bar";
          bar.style.width = Math.max(0, Math.min(1, vals[j])) * 60 + "px";
          bar.style.background = colors[i % 2];
          bar.style.opacity = vals === r.mean ? "1" : "0.5";
          td.append(bar, vals[j].toFixed(3));
        } else td.textContent = "—";
        tr.appendChild(td);
      }
    });
    tab.appendChild(tr);
  });
  el.appendChild(tab);
}

async function drawOutliers() {
  const el = $("outliers");
  const dumps = [st.a];
  if (st.b >= 0 && pairOk() && st.mode !== "single") dumps.push(st.b);
  const samples = await Promise.all(dumps.map(loadSample));
  const tab = document.createElement("table");
  tab.innerHTML = "<tr><th>dump</th><th>layer</th><th>λ</th><th>top |logit|</th><th>top |hidden|</th></tr>";
  samples.forEach((s, i) => {
    const lg = s.stats["outliers/logits/top"], hd = s.stats["outliers/hidden/top"];
    if (!lg && !hd) return; // an image sample has the hidden states' only
    const L = (lg || hd).shape[0];
    for (let l = 0; l < L; l++) {
      const tr = document.createElement("tr");
      const lam = s.lambda ? s.lambda[l] : null;
      [dumpOf(dumps[i]).name, l, lam === null ? "—" : lam.toFixed(3), lg ? at(lg, [l, 0]).toFixed(2) : "—",
       hd ? at(hd, [l, 0]).toFixed(2) : "—"].forEach((v) => {
        const td = document.createElement("td");
        td.textContent = v;
        tr.appendChild(td);
      });
      tab.appendChild(tr);
    }
  });
  el.innerHTML = "";
  el.appendChild(tab);
}

function drawOverview() {
  const el = $("overview");
  el.innerHTML = "";
  const dumps = [st.a];
  if (st.b >= 0 && pairOk() && st.mode !== "single") dumps.push(st.b);
  dumps.forEach((d) => {
    const si = dumpOf(d).samples[st.s];
    if (!si.maps.length) return;
    const map = si.maps.includes(st.map) ? st.map : si.maps[si.maps.length - 1];
    const wrap = document.createElement("div");
    const title = document.createElement("div");
    title.textContent = `${dumpOf(d).name} · ${map}`;
    const grid = document.createElement("div");
    grid.className = "ovgrid";
    grid.style.gridTemplateColumns = `28px repeat(${si.heads.length}, 76px)`;
    grid.appendChild(document.createElement("span"));
    si.heads.forEach((h) => { const s = document.createElement("span"); s.className = "lab"; s.textContent = "head " + h; grid.appendChild(s); });
    si.layers.forEach((l) => {
      const lab = document.createElement("span");
      lab.className = "lab";
      lab.textContent = "L" + l;
      grid.appendChild(lab);
      si.heads.forEach((h) => {
        const img = document.createElement("img");
        img.loading = "lazy";
        img.alt = `layer ${l} head ${h}`;
        img.dataset.layer = l;
        img.dataset.head = h;
        img.src = `/api/thumb?d=${d}&s=${st.s}&l=${l}&h=${h}&m=${map}&px=96&cmap=${$("cmap").value}&rev=${st.thumbRev}`;
        if (l === st.layer && h === st.head) img.className = "on";
        img.addEventListener("click", () => {
          st.layer = l; st.head = h;
          $("layer").value = l; $("head").value = h;
          markOverview();
          rebuild(false);
        });
        grid.appendChild(img);
      });
    });
    wrap.append(title, grid);
    el.appendChild(wrap);
  });
}

function markOverview() {
  document.querySelectorAll(".ovgrid img").forEach((img) => {
    img.className = +img.dataset.layer === st.layer && +img.dataset.head === st.head ? "on" : "";
  });
}

// ---------------------------------------------------------- image samples

function loadImage(url) {
  if (!st.images) st.images = {};
  if (!st.images[url]) {
    st.images[url] = new Promise((ok, bad) => {
      const img = new Image();
      img.onload = () => ok(img);
      img.onerror = () => bad(new Error("the image failed to load"));
      img.src = url;
    });
  }
  return st.images[url];
}

function chooseSample(i) {
  const sel = $("sample");
  sel.value = i;
  sel.dispatchEvent(new Event("change"));
}

// An image sample: the query row's attention to the patches over the model's input,
// the grid upsampled bilinearly (as attnmap draws it), the object box, one colour scale
// for every panel ([0, max], or ±max |v| when signed); the query row is the row selected
// in the map below, or the first stored (the class token).
async function drawOverlays() {
  const box = $("overlays"), gen = st.gen;
  const s0 = st.panels.length ? st.panels[0].sample : null;
  if (!s0 || s0.kind !== "image" || !s0.image) { box.innerHTML = ""; box.style.display = "none"; st.overlays = []; return; }
  const panels = st.panels.filter((p) => p.sample.kind === "image" && p.sample.image);
  const q = st.row !== null && s0.rows.includes(st.row) ? st.row : s0.rows[0];
  let rows, imgs;
  try {
    rows = await Promise.all(panels.map((p) => getJSON(`/api/row?${mapParams(p)}&q=${q}&topk=5&width=${p.sample.T}`)));
    imgs = await Promise.all(panels.map((p) => loadImage(`/api/image?d=${p.dump}&s=${st.s}`)));
  } catch (e) { status(e.message); return; }
  if (gen !== st.gen) return;
  const patches = rows.map((r) => r.strip.slice(1).map((v) => v || 0));
  const signed = panels.some((p) => p.limits.diverging) || patches.some((v) => v.some((x) => x < 0));
  const top = Math.max(0, ...patches.flat().map(Math.abs)), hi = top > 0 ? top : 1; // all 0 (a self-delta): [0, 1]
  const lim = { vmin: signed ? -hi : 0, vmax: hi, diverging: signed, complete: true };
  const cmap = await colormap(signed ? "rdbu" : $("cmap").value);
  if (gen !== st.gen) return;
  box.innerHTML = "";
  box.style.display = "";
  st.overlays = [];
  const OV = panels.length > 1 ? 288 : 384;
  panels.forEach((p, i) => {
    const smp = p.sample, G = smp.image.grid, d = dumpOf(p.dump);
    const div = document.createElement("div");
    div.className = "panel";
    const t = document.createElement("div");
    t.className = "title";
    t.textContent = `${d.name} · ${p.map}` + (p.minus >= 0 ? ` − ${dumpOf(p.minus).name}` : "") +
      ` · layer ${st.layer} head ${st.head} · query ${q === 0 ? "cls" : tokenText(smp, q)}`;
    const sub = document.createElement("div");
    sub.className = "sub";
    const lam = smp.lambda && st.layer < smp.lambda.length ? smp.lambda[st.layer] : null;
    const sh = smp.stats["noise/shares"], names = (smp.stats.segment_names || "cls,object,background").split(",");
    const m = sh ? Math.max(0, Math.min(sh.shape[0] - 1, ["map1", "map2", "diff"].indexOf(p.map))) : 0;
    const parts = [lam === null ? "λ —" : `λ ${lam.toFixed(4)}`];
    if (sh && p.minus < 0 && st.layer < sh.shape[1] && st.head < sh.shape[2])
      names.forEach((n, j) => parts.push(`${n} ${at(sh, [m, st.layer, st.head, j]).toFixed(3)}`));
    sub.textContent = parts.join(" · ");
    sub.dataset.lambda = lam === null ? "" : String(lam);
    const c = document.createElement("canvas");
    c.className = "overlay";
    c.width = c.height = OV;
    c.dataset.dump = p.dump;
    const bar = document.createElement("canvas");
    bar.className = "bar";
    bar.width = OV;
    bar.height = 34;
    div.append(t, sub, c, bar);
    box.appendChild(div);
    const g = c.getContext("2d");
    g.imageSmoothingEnabled = false; // the input's own pixels, as attnmap draws them
    g.drawImage(imgs[i], 0, 0, OV, OV);
    const im = g.getImageData(0, 0, OV, OV), px = im.data, v = patches[i];
    const val = (r, k) => v[Math.max(0, Math.min(G - 1, r)) * G + Math.max(0, Math.min(G - 1, k))];
    for (let y = 0; y < OV; y++) {
      const gy = (y + 0.5) * G / OV - 0.5, y0 = Math.floor(gy), fy = gy - y0;
      for (let x = 0; x < OV; x++) {
        const gx = (x + 0.5) * G / OV - 0.5, x0 = Math.floor(gx), fx = gx - x0;
        const a = val(y0, x0) * (1 - fx) + val(y0, x0 + 1) * fx, b = val(y0 + 1, x0) * (1 - fx) + val(y0 + 1, x0 + 1) * fx;
        const z = a * (1 - fy) + b * fy;
        const tt = signed ? (z / hi + 1) / 2 : z / hi;
        const col = cmap[Math.max(0, Math.min(255, Math.floor(256 * tt)))];
        const o = (y * OV + x) * 4;
        for (let ch = 0; ch < 3; ch++) {
          const cv = parseInt(col.substr(1 + 2 * ch, 2), 16);
          px[o + ch] = Math.round((1 - OVERLAY_ALPHA) * px[o + ch] + OVERLAY_ALPHA * cv);
        }
      }
    }
    g.putImageData(im, 0, 0);
    const bx = smp.image.box, S = smp.image.size;
    if (bx) {
      g.strokeStyle = "#ff2020";
      g.lineWidth = 2;
      g.strokeRect(bx[0] * OV / S, bx[1] * OV / S, (bx[2] - bx[0]) * OV / S, (bx[3] - bx[1]) * OV / S);
    }
    const ov = { dump: p.dump, canvas: c, G, OV, values: v, q, cls: rows[i].strip[0] };
    c.addEventListener("mousemove", (ev) => {
      const rect = c.getBoundingClientRect();
      const pr = Math.floor((ev.clientY - rect.top) * G / OV), pc = Math.floor((ev.clientX - rect.left) * G / OV);
      if (pr < 0 || pc < 0 || pr >= G || pc >= G) return;
      const k = 1 + pr * G + pc;
      c.dataset.patch = `${pr},${pc}`;
      c.dataset.value = String(v[pr * G + pc]);
      c.title = `patch (${pr}, ${pc}) · ${p.map} ${fmt(v[pr * G + pc])}`;
      hover({ r: s0.rows.indexOf(q), k, q, patch: [pr, pc] });
    });
    st.overlays.push(ov);
    drawBar({ limits: lim, bar, cmap }, "linear");
  });
}

// The image sample's captions (and a caption sample's siblings): text, similarity,
// zero-shot score, and a link to the caption's text-tower maps.
function drawCaptions() {
  const el = $("captions"), s0 = st.panels.length ? st.panels[0].sample : null;
  const caps = s0 && s0.captions ? s0.captions : [];
  $("capbox").style.display = s0 && s0.kind && s0.kind !== "text" ? "" : "none";
  el.innerHTML = "";
  if (!s0 || s0.kind === "text") return;
  const tab = document.createElement("table");
  tab.innerHTML = "<tr><th>#</th><th>caption</th><th>similarity</th><th>zero-shot</th><th></th></tr>";
  caps.forEach((c) => {
    const tr = document.createElement("tr");
    if (s0.kind === "caption" && s0.caption === c.caption) tr.className = "on";
    const cells = [String(c.caption), c.text === null ? "(token ids)" : c.text, fmt(c.similarity), fmt(c.zero_shot)];
    cells.forEach((v, j) => {
      const td = document.createElement("td");
      td.textContent = v;
      if (j >= 2) td.className = "v";
      tr.appendChild(td);
    });
    const td = document.createElement("td");
    if (c.sample !== null) {
      const a = document.createElement("a");
      a.textContent = "text maps";
      a.dataset.sample = c.sample;
      a.addEventListener("click", () => chooseSample(c.sample));
      td.appendChild(a);
    }
    tr.appendChild(td);
    tr.dataset.similarity = c.similarity;
    tr.dataset.zeroShot = c.zero_shot;
    tab.appendChild(tr);
  });
  el.appendChild(tab);
  if (!caps.length) el.append("no captions");
  if (s0.kind === "caption") {
    const a = document.createElement("a");
    a.id = "toimage";
    a.textContent = "← the image";
    a.addEventListener("click", () => chooseSample(s0.image_sample));
    el.appendChild(a);
  }
}

// ------------------------------------------------------------------- start

async function start() {
  st.dumps = (await getJSON("/api/dumps")).dumps;
  const da = $("dumpA"), db = $("dumpB");
  st.dumps.forEach((d) => { option(da, d.index, d.name); option(db, d.index, d.name); });
  if (st.dumps.length > 1) { st.b = 1; db.value = 1; st.mode = "side"; $("mode").value = "side"; }
  fillSamples();
  fillSelectors();
  const on = (id, f) => $(id).addEventListener("change", f);
  on("dumpA", () => { st.a = +da.value; fillSamples(); fillSelectors(); drawOverview(); rebuild(false); });
  on("dumpB", () => { st.b = +db.value; drawOverview(); rebuild(true); });
  on("mode", () => { st.mode = $("mode").value; drawOverview(); rebuild(true); });
  on("sample", () => { st.s = +$("sample").value; st.row = null; fillSelectors(); drawOverview(); rebuild(false); });
  on("layer", () => { st.layer = +$("layer").value; markOverview(); rebuild(true); });
  on("head", () => { st.head = +$("head").value; markOverview(); rebuild(true); });
  on("map", () => { st.map = $("map").value; drawOverview(); rebuild(true); });
  ["pool", "scale", "cmap"].forEach((id) => on(id, () => { if (id === "cmap") drawOverview(); rebuild(true); }));
  $("fit").addEventListener("click", () => { fit(); draw(); });
  $("zoomin").addEventListener("click", () => zoomAt(2, AREA / 2, AREA / 2));
  $("zoomout").addEventListener("click", () => zoomAt(0.5, AREA / 2, AREA / 2));
  drawOverview();
  await rebuild(false);
  document.body.dataset.ready = "1";
}

function fillSamples() {
  const sel = $("sample");
  sel.innerHTML = "";
  dumpOf(st.a).samples.forEach((s) => option(sel, s.index, `${s.index}: ${s.id} (` +
    (s.kind === "image" ? `image, ${s.T - 1} patches` : s.kind === "caption" ? `caption, ${s.T} tokens` : `${s.T} tokens`) +
    ")"));
  if (st.s >= dumpOf(st.a).samples.length) st.s = 0;
  sel.value = st.s;
}

// For tests and scripts: where a cell is on screen, and the state.
window.dlv = {
  state: st,
  cellToClient(panel, r, k) {
    const p = st.panels[panel], rect = p.canvas.getBoundingClientRect();
    return { x: rect.left + BAND + GAP + (k - st.view.ox + 0.5) * st.view.s,
             y: rect.top + BAND + GAP + (r - st.view.oy + 0.5) * st.view.s };
  },
  tilesLoaded() { return [...st.tiles.values()].every((t) => t.ok); },
  // the client position of patch (row, col)'s centre on overlay panel i
  patchToClient(i, r, c) {
    const o = st.overlays[i], rect = o.canvas.getBoundingClientRect();
    return { x: rect.left + (c + 0.5) * o.OV / o.G, y: rect.top + (r + 0.5) * o.OV / o.G };
  },
};

start().catch((e) => status(e.message));
