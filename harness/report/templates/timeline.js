// The canvas timeline: decoding a case, the shared view, drawing, hit-testing, selection, search.
// Included inside the page script's function scope (index.html.j2).
  var T_START = performance.now();
  var PAYLOAD = JSON.parse(document.getElementById("harness-data").textContent);
  var KINDS = PAYLOAD.kinds;
  var tip = document.getElementById("tip");
  var LANE_H = 20, SMALL_H = 8, TOP = 30, LEFT = 170, MAX_ARROWS = 5000, MEM_H = 48, GIB = 1073741824;
  // A user string in text that holds others (tooltips): isolated, so a right-to-left override in it cannot reorder the rest.
  function iso(text) { return "\u2068" + text + "\u2069"; }
  var H = window.__harness = { timelines: [], firstDrawMs: null, loadMs: null, errors: [], kinds: KINDS };

  function fmt(us) {
    var a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3) + " s";
    if (a >= 1000) return (us / 1000).toFixed(3) + " ms";
    return us.toFixed(a < 10 ? 3 : 1) + " µs";
  }
  function axisFmt(us, step) {
    if (us === 0) return "0";
    var unit = Math.abs(us) >= 1e6 ? [1e6, " s"] : Math.abs(us) >= 1000 ? [1000, " ms"] : [1, " µs"];
    var dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / unit[0]) + 1e-9)));
    return (us / unit[0]).toFixed(dec) + unit[1];
  }
  function lowerBound(arr, x, lo, hi) { while (lo < hi) { var mid = (lo + hi) >>> 1; if (arr[mid] < x) lo = mid + 1; else hi = mid; } return lo; }
  function upperBound(arr, x, lo, hi) { while (lo < hi) { var mid = (lo + hi) >>> 1; if (arr[mid] <= x) lo = mid + 1; else hi = mid; } return lo; }

  // Decode a case once: absolute starts/ends in µs, per-lane offsets, longest job per lane.
  var decoded = {};
  function bytesFmt(b) {
    if (b >= 1073741824) return (b / 1073741824).toFixed(2) + " GiB";
    if (b >= 1048576) return (b / 1048576).toFixed(1) + " MiB";
    if (b >= 1024) return (b / 1024).toFixed(1) + " KiB";
    return b + " B";
  }
  function decode(k) {
    if (decoded[k]) return decoded[k];
    var d = PAYLOAD.cases[k], n = d.gap.length, us = d.tick / 1000;
    var start = new Float64Array(n), end = new Float64Array(n), lane = new Int32Array(n);
    var off = new Int32Array(d.nl.length + 1), maxDur = new Float64Array(d.nl.length);
    var i = 0, tEnd = 0;
    for (var l = 0; l < d.nl.length; l++) {
      off[l] = i; var t = 0, md = 0;
      for (var c = 0; c < d.nl[l]; c++, i++) {
        t += d.gap[i]; start[i] = t * us; var du = d.dur[i] * us; end[i] = start[i] + du; lane[i] = l;
        if (du > md) md = du; if (end[i] > tEnd) tEnd = end[i];
      }
      maxDur[l] = md;
    }
    off[d.nl.length] = i;
    var steps = d.steps.map(function (s) { if (s[1] * us > tEnd) tEnd = s[1] * us; return [s[0] * us, s[1] * us, s[2]]; });
    var t0 = steps.length ? steps[0][0] : (n ? start[0] : 0);
    for (l = 0; l < d.nl.length; l++) if (d.nl[l] && start[off[l]] < t0) t0 = start[off[l]];
    var ov = new Uint8Array(n); for (i = 0; i < d.ov.length; i++) ov[d.ov[i]] = 1;
    // The step the timeline opens on (the median one, the critical path's): its bounds, else the first step's.
    var open = null;
    var want = PAYLOAD.open ? PAYLOAD.open[k] : null;
    for (i = 0; i < steps.length; i++) if (steps[i][2] === want) open = [steps[i][0], steps[i][1], steps[i][2]];
    if (!open && steps.length) open = steps[0].slice();
    return (decoded[k] = { d: d, n: n, start: start, end: end, lane: lane, off: off, maxDur: maxDur, steps: steps,
                           tMin: Math.min(0, t0), tMax: tEnd > 0 ? tEnd : 1, ov: ov, adj: null, open: open });
  }
  // Dependencies as adjacency lists (built on first use): preds/succs of each job, [job, flag] pairs.
  function adjacency(x) {
    if (x.adj) return x.adj;
    var n = x.n, deps = x.d.deps, pc = new Int32Array(n + 1), sc = new Int32Array(n + 1), k;
    for (k = 0; k < deps.length; k += 3) { sc[deps[k] + 1]++; pc[deps[k + 1] + 1]++; }
    for (k = 0; k < n; k++) { pc[k + 1] += pc[k]; sc[k + 1] += sc[k]; }
    var pv = new Int32Array(deps.length / 3), sv = new Int32Array(deps.length / 3), pf = pc.slice(0, n), sf = sc.slice(0, n);
    for (k = 0; k < deps.length; k += 3) { pv[pf[deps[k + 1]]++] = k; sv[sf[deps[k]]++] = k; }
    return (x.adj = { po: pc, pv: pv, so: sc, sv: sv });
  }
  function label(d, i) { return d.stage[i] + KINDS[d.kind[i]].name + (d.mb[i] < 0 ? "" : d.mb[i]); }
  // What job i waited for: idle on its stream before it, and the dependency released last.
  function waitOf(x, i) {
    var l = x.lane[i], d = x.d, prev = i > x.off[l] && d.step[i - 1] === d.step[i] ? x.end[i - 1] : null, st = null;
    for (var q = 0; q < x.steps.length; q++) if (x.steps[q][2] === d.step[i]) st = x.steps[q][0];
    var from = prev !== null ? prev : (st !== null ? st : x.start[i]), a = adjacency(x), best = -1, bestT = -Infinity;
    for (var k = a.po[i]; k < a.po[i + 1]; k++) {
      var e = a.pv[k], src = d.deps[e], t = d.deps[e + 2] ? x.start[src] : x.end[src];
      if (t > bestT) { bestT = t; best = src; }
    }
    return { idle: Math.max(0, x.start[i] - from), by: best >= 0 && bestT > from + 1e-9 ? best : -1, first: prev === null };
  }


  // A shared view (time window in µs) so several timelines can move together.
  function View(t0, t1) { this.t0 = t0; this.t1 = t1; this.members = []; }
  View.prototype.set = function (t0, t1) {
    if (!(t1 - t0 > 1e-6)) return;
    this.t0 = t0; this.t1 = t1; for (var i = 0; i < this.members.length; i++) this.members[i].draw();
  };

  function Timeline(el, k, view) {
    this.el = el; this.c = el.querySelector("canvas"); this.view = view; this.showDeps = false;
    this.showComm = true; this.collapsed = {}; this.showCp = false; this.sel = -1; this.hov = -1;
    this.found = null; this.foundList = []; this.foundAt = -1; this.marks = []; this.listeners = [];
    this.section = el.closest("section");
    view.members.push(this);
    this.setCase(k);
    var self = this, drag = null;
    this.c.addEventListener("wheel", function (e) {
      e.preventDefault();
      var f = Math.pow(1.0015, e.deltaY); self.zoom(f, self.timeAt(e.offsetX));
    }, { passive: false });
    this.c.addEventListener("mousedown", function (e) { drag = { x: e.clientX, t0: self.view.t0, t1: self.view.t1, moved: false }; self.c.classList.add("drag"); el.focus({ preventScroll: true }); });
    window.addEventListener("mouseup", function () { drag = null; self.c.classList.remove("drag"); });
    this.c.addEventListener("mousemove", function (e) {
      if (drag) {
        if (Math.abs(drag.x - e.clientX) > 2) drag.moved = true;
        var dt = (drag.x - e.clientX) / self.scale(); self.pan(drag.t0 + dt, drag.t1 - drag.t0); tip.style.display = "none"; return;
      }
      self.hover(e);
    });
    this.c.addEventListener("click", function (e) {
      if (e.offsetX < LEFT) { var l = self.laneAt(e.offsetY); if (l >= 0) self.collapse(self.x.d.lrank[l]); return; }
      self.select(self.hit(e.offsetX, e.offsetY));
    });
    this.c.addEventListener("mouseleave", function () { tip.style.display = "none"; if (self.hov >= 0) { self.hov = -1; self.draw(); } });
    el.addEventListener("keydown", function (e) { if (self.key(e)) e.preventDefault(); });
  }
  Timeline.prototype.key = function (e) {
    var v = this.view, span = v.t1 - v.t0, mid = v.t0 + span / 2;
    if (e.key === "+" || e.key === "=") this.zoom(0.8, mid);
    else if (e.key === "-" || e.key === "_") this.zoom(1.25, mid);
    else if (e.key === "ArrowLeft") this.pan(v.t0 - span / 10, span);
    else if (e.key === "ArrowRight") this.pan(v.t0 + span / 10, span);
    else if (e.key === "0" || e.key === "Home") this.reset();
    else if (e.key === "w") this.whole();
    else if (e.key === "Escape") this.select(-1);
    else return this.emit("key", e);
    return true;
  };
  Timeline.prototype.on = function (fn) { this.listeners.push(fn); };
  Timeline.prototype.emit = function (what, arg) {
    var used = false; for (var i = 0; i < this.listeners.length; i++) used = this.listeners[i](what, arg) || used; return used;
  };
  Timeline.prototype.setCase = function (k) {
    this.k = k; this.x = decode(k); this.sel = -1; this.hov = -1; this.found = null; this.foundList = []; this.collapsed = {};
    this.layout();
  };
  // Lane geometry: comm lanes hidden or shown, a collapsed rank drawn as one thin lane.
  Timeline.prototype.layout = function () {
    var d = this.x.d, n = d.nl.length, y = TOP, firstOfRank = {};
    this.ly = new Float64Array(n); this.lh = new Float64Array(n);
    for (var l = 0; l < n; l++) {
      var r = d.lrank[l], h = LANE_H;
      if (d.lcomm[l] && !this.showComm) h = 0;
      if (this.collapsed[r]) { h = firstOfRank[r] === undefined && !d.lcomm[l] ? SMALL_H : 0; }
      if (!d.lcomm[l] && firstOfRank[r] === undefined) firstOfRank[r] = l;
      this.ly[l] = y; this.lh[l] = h; y += h;
    }
    this.lanesBottom = y;
    var hgt = y + 6 + (d.mem ? d.mem.lines.length * MEM_H : 0);
    this.c.style.height = hgt + "px"; this.cssH = hgt;
  };
  Timeline.prototype.visibleLanes = function () {
    var out = []; for (var l = 0; l < this.lh.length; l++) if (this.lh[l] > 0) out.push(this.x.d.lanes[l]); return out;
  };
  Timeline.prototype.setComm = function (on) { this.showComm = on; this.layout(); this.draw(); };
  Timeline.prototype.collapse = function (r) { this.collapsed[r] = !this.collapsed[r]; this.layout(); this.draw(); };
  Timeline.prototype.laneAt = function (y) {
    for (var l = 0; l < this.lh.length; l++) if (this.lh[l] > 0 && y >= this.ly[l] && y < this.ly[l] + this.lh[l]) return l;
    return -1;
  };
  // The whole view: every member's jobs and steps, 1 % of padding at the end (and before 0 only where jobs start before 0).
  Timeline.prototype.bounds = function () {
    var lo = Infinity, hi = -Infinity, m = this.view.members;
    for (var i = 0; i < m.length; i++) { lo = Math.min(lo, m[i].x.tMin); hi = Math.max(hi, m[i].x.tMax); }
    var pad = (hi - lo) * 0.01; return [lo < 0 ? lo - pad : lo, hi + pad];  // a view that starts at 0 stays at 0
  };
  // The whole recording (key w, "all steps").
  Timeline.prototype.whole = function () { var b = this.bounds(); this.view.set(b[0], b[1]); };
  // Step `step`'s span with 2 % of padding, inside bounds(); false where the case has no such step.
  Timeline.prototype.stepSpan = function (step) {
    var x = this.x; for (var i = 0; i < x.steps.length; i++) if (x.steps[i][2] === step) {
      var a = x.steps[i][0], b = x.steps[i][1], pad = (b - a) * 0.02, bd = this.bounds();
      return [Math.max(bd[0], a - pad), Math.min(bd[1], b + pad)];
    }
    return null;
  };
  Timeline.prototype.zoomToStep = function (step) { var sp = this.stepSpan(step); if (sp && sp[1] > sp[0]) this.view.set(sp[0], sp[1]); return !!sp; };
  // How a timeline opens (and key 0): on its median step, where labels are readable; a shared view (the comparison)
  // on the members' first steps, which start together at 0; the whole recording where a case has no steps.
  Timeline.prototype.reset = function () {
    var m = this.view.members;
    if (m.length === 1 && this.x.open && this.zoomToStep(this.x.open[2])) return;
    var lo = Infinity, hi = -Infinity;
    for (var i = 0; i < m.length; i++) if (m[i].x.steps.length) { lo = Math.min(lo, m[i].x.steps[0][0]); hi = Math.max(hi, m[i].x.steps[0][1]); }
    if (!(hi > lo)) { this.whole(); return; }
    var bd = this.bounds(), pad = (hi - lo) * 0.02; this.view.set(Math.max(bd[0], lo - pad), Math.min(bd[1], hi + pad));
  };
  Timeline.prototype.scale = function () { return (this.c.clientWidth - LEFT) / (this.view.t1 - this.view.t0); };
  Timeline.prototype.timeAt = function (x) { return this.view.t0 + (x - LEFT) / this.scale(); };
  Timeline.prototype.zoom = function (f, at) {
    var v = this.view, t0 = at - (at - v.t0) * f; this.pan(t0, at + (v.t1 - at) * f - t0);
  };
  // A window of `span` µs from t0, kept inside bounds() (a window wider than them starts at their start):
  // dragging, the arrow keys and zooming never show time before 0 or after the end.
  Timeline.prototype.pan = function (t0, span) {
    var b = this.bounds();
    t0 = span < b[1] - b[0] ? Math.max(b[0], Math.min(t0, b[1] - span)) : b[0];
    this.view.set(t0, t0 + span);
  };
  Timeline.prototype.jobRect = function (i) {
    // Client-space rectangle of job i (for tests and tools).
    var s = this.scale(), r = this.c.getBoundingClientRect(), x = this.x, l = x.lane[i];
    var x0 = LEFT + (x.start[i] - this.view.t0) * s, x1 = LEFT + (x.end[i] - this.view.t0) * s;
    return { left: r.left + x0, right: r.left + Math.max(x1, x0 + 1), top: r.top + this.ly[l] + 2, bottom: r.top + this.ly[l] + Math.max(this.lh[l] - 2, 3) };
  };
  Timeline.prototype.select = function (i) { this.sel = i; this.draw(); this.emit("select", i); };
  // The jobs a selection marks: same micro-batch and step on every rank, and the selected job's preds and succs.
  Timeline.prototype.marked = function (i) {
    var x = this.x, d = x.d, same = [], preds = [], succs = [], a = adjacency(x), k;
    if (i < 0) return { same: same, preds: preds, succs: succs };
    if (d.mb[i] >= 0) for (k = 0; k < x.n; k++) if (d.mb[k] === d.mb[i] && d.step[k] === d.step[i]) same.push(k);
    for (k = a.po[i]; k < a.po[i + 1]; k++) preds.push(d.deps[a.pv[k]]);
    for (k = a.so[i]; k < a.so[i + 1]; k++) succs.push(d.deps[a.sv[k] + 1]);
    return { same: same, preds: preds, succs: succs };
  };
  Timeline.prototype.markedRanks = function () {
    var m = this.marked(this.sel), d = this.x.d, x = this.x, seen = {};
    m.same.forEach(function (k) { seen[d.lrank[x.lane[k]]] = 1; });
    return Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
  };
  // Search: "1B3" (one job per step), "2B" (a stage's kind), "W" (a kind), "SEND" (kinds containing it).
  Timeline.prototype.find = function (q) {
    var x = this.x, d = x.d, n = x.n, out = [], k, want = String(q || "").trim().toUpperCase();
    this.found = null; this.foundList = out; this.foundAt = -1;
    if (want) {
      var m = /^(\d+)([A-Z_]+)(\d*)$/.exec(want), exact = false;
      for (k = 0; k < KINDS.length; k++) if (KINDS[k].name.toUpperCase() === want) exact = true;
      var f = this.found = new Uint8Array(n);
      for (k = 0; k < n; k++) {
        var kn = KINDS[d.kind[k]].name.toUpperCase(), hit;
        if (m) hit = String(d.stage[k]) === m[1] && kn === m[2] && (m[3] === "" || String(d.mb[k]) === m[3]);
        else hit = exact ? kn === want : kn.indexOf(want) >= 0;
        if (hit) { f[k] = 1; out.push(k); }
      }
      out.sort(function (a, b) { return x.start[a] - x.start[b]; });
    }
    this.draw(); this.emit("find", out);
    return out.length;
  };
  Timeline.prototype.nextFound = function () {
    if (!this.foundList.length) return -1;
    this.foundAt = (this.foundAt + 1) % this.foundList.length;
    var i = this.foundList[this.foundAt], x = this.x, v = this.view, span = v.t1 - v.t0, mid = (x.start[i] + x.end[i]) / 2;
    if (x.end[i] - x.start[i] > span / 2) span = (x.end[i] - x.start[i]) * 4;
    // Centred on the match, but never before the view's start or past its end (bounds).
    var b = this.bounds(); span = Math.min(span, b[1] - b[0]);
    var t0 = Math.max(b[0], Math.min(mid - span / 2, b[1] - span));
    v.set(t0, t0 + span); this.select(i); return i;
  };
  // Outline job i with a `wdt` px line, `inset` px inside its box (default 0: at its edge).
  Timeline.prototype.outline = function (g, i, colour, wdt, inset) {
    var x = this.x, l = x.lane[i], s = this.scale(), h = this.lh[l], e = inset || 0; if (!h) return;
    var x0 = LEFT + (x.start[i] - this.view.t0) * s + e, x1 = LEFT + (x.end[i] - this.view.t0) * s - e, w = Math.max(x1 - x0, 3);
    g.strokeStyle = colour; g.lineWidth = wdt; g.strokeRect(x0 + wdt / 2, this.ly[l] + 1 + e + wdt / 2, Math.max(1, w - wdt), Math.max(1, h - 2 - 2 * e - wdt));
  };
  Timeline.prototype.arrow = function (g, k) {
    var x = this.x, d = x.d, s = this.scale(), t0 = this.view.t0, sI = d.deps[k], dI = d.deps[k + 1];
    var ls = x.lane[sI], ld = x.lane[dI]; if (!this.lh[ls] || !this.lh[ld]) return false;
    var fromT = d.deps[k + 2] ? x.start[sI] : x.end[sI], toT = x.start[dI];
    var ax = LEFT + (fromT - t0) * s, ay = this.ly[ls] + this.lh[ls] / 2, bx = LEFT + (toT - t0) * s, by = this.ly[ld] + this.lh[ld] / 2;
    g.beginPath(); g.moveTo(ax, ay); g.bezierCurveTo(ax + 12, ay, bx - 12, by, bx, by); g.stroke();
    var dir = by > ay ? -1 : 1;
    g.beginPath(); g.moveTo(bx, by); g.lineTo(bx - 6, by + dir * 3 - 3); g.lineTo(bx - 6, by + dir * 3 + 3); g.closePath(); g.fill();
    return true;
  };
  Timeline.prototype.draw = function () {
    var c = this.c, x = this.x, d = x.d, v = this.view, self = this;
    var dpr = window.devicePixelRatio || 1, w = c.clientWidth, hgt = this.cssH;
    if (w <= 0) return;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) { c.width = Math.round(w * dpr); c.height = Math.round(hgt * dpr); }
    var g = c.getContext("2d"); g.setTransform(dpr, 0, 0, dpr, 0, 0);
    var s = this.scale(), t0 = v.t0, t1 = v.t1, nLanes = d.nl.length, plotW = w - LEFT, bottom = this.lanesBottom, l, i;
    g.clearRect(0, 0, w, hgt); g.font = "11px system-ui, sans-serif"; g.textBaseline = "middle";
    for (l = 0; l < nLanes; l++) {
      if (!this.lh[l]) continue;
      g.fillStyle = l % 2 ? "#fafbfc" : "#f1f3f6"; g.fillRect(0, this.ly[l], w, this.lh[l]);
    }
    // Time axis.
    var span = t1 - t0, step = Math.pow(10, Math.floor(Math.log10(span / 6)));
    if (span / step > 12) step *= 5; else if (span / step > 6) step *= 2;
    g.fillStyle = "#555"; g.strokeStyle = "#e1e4e8"; g.lineWidth = 1;
    for (var tt = Math.ceil(t0 / step) * step; tt <= t1; tt += step) {
      var xt = LEFT + (tt - t0) * s; g.beginPath(); g.moveTo(xt + .5, 12); g.lineTo(xt + .5, bottom); g.stroke();
      g.fillText(axisFmt(Math.abs(tt) < step / 1e6 ? 0 : tt, step), xt + 3, 7);
    }
    g.save(); g.beginPath(); g.rect(LEFT, 0, plotW, hgt); g.clip();
    // Jobs: binary search the visible window per lane; sub-pixel jobs coalesce into one pixel column.
    for (l = 0; l < nLanes; l++) {
      var lo = x.off[l], hi = x.off[l + 1]; if (lo === hi || !this.lh[l]) continue;
      var a = lowerBound(x.start, t0 - x.maxDur[l], lo, hi), b = upperBound(x.start, t1, lo, hi);
      var y = this.ly[l] + (this.lh[l] > SMALL_H ? 2 : 1), h = this.lh[l] - (this.lh[l] > SMALL_H ? 4 : 2), lastPx = -1e9;
      for (i = a; i < b; i++) {
        var e = x.end[i]; if (e < t0) continue;
        var x0 = (x.start[i] - t0) * s, x1 = (e - t0) * s, wd = x1 - x0;
        if (wd < 1) {
          var px = Math.floor(x0); if (px <= lastPx) continue; lastPx = px;
          g.fillStyle = KINDS[d.kind[i]].colour; g.fillRect(LEFT + px, y, 1, h); continue;
        }
        if (x0 < -1) x0 = -1; if (x1 > plotW + 1) x1 = plotW + 1; wd = x1 - x0;
        g.fillStyle = KINDS[d.kind[i]].colour; g.fillRect(LEFT + x0, y, wd > 3 ? wd - 0.5 : wd, h);
        lastPx = Math.floor(x1);
        if (x.ov[i]) { g.strokeStyle = "#d00"; g.lineWidth = 2; g.strokeRect(LEFT + x0 + 1, y + 1, Math.max(1, wd - 2), h - 2); }
        if (wd > 12 && h > SMALL_H) {  // a label where it fits, in a smaller font for narrow jobs
          var lab = label(d, i), tw = g.measureText(lab).width, small = tw + 4 >= wd;
          if (small) { g.font = "9px system-ui, sans-serif"; tw = g.measureText(lab).width; }
          if (tw + 1 < wd) { g.fillStyle = "#fff"; g.fillText(lab, LEFT + Math.max(x0, 0) + Math.min(3, (wd - tw) / 2), y + h / 2 + 1); }
          if (small) g.font = "11px system-ui, sans-serif";
        }
      }
    }
    // Marks: search matches, critical path, the selection's micro-batch and its predecessors and successors.
    if (this.found) for (i = 0; i < this.foundList.length; i++) { var fi = this.foundList[i]; if (x.end[fi] >= t0 && x.start[fi] <= t1) this.outline(g, fi, "#f5b800", 3); }
    if (this.showCp && d.cp.length) {
      g.strokeStyle = "#b42318"; g.lineWidth = 2; g.beginPath();
      for (i = 0; i < d.cp.length; i++) {
        var ci = d.cp[i], cl = x.lane[ci]; if (!this.lh[cl]) continue;
        var cy = this.ly[cl] + this.lh[cl] / 2;
        if (i) g.lineTo(LEFT + (x.start[ci] - t0) * s, cy); else g.moveTo(LEFT + (x.start[ci] - t0) * s, cy);
        g.lineTo(LEFT + (x.end[ci] - t0) * s, cy);
      }
      g.stroke();
      for (i = 0; i < d.cp.length; i++) this.outline(g, d.cp[i], "#b42318", 2);
    }
    var focus = this.sel >= 0 ? this.sel : this.hov;
    if (this.sel >= 0) {
      var mk = this.marked(this.sel);
      mk.same.forEach(function (k2) { self.outline(g, k2, "#111", 2); });
      mk.preds.forEach(function (k2) { self.outline(g, k2, "#ff7f0e", 3); });
      mk.succs.forEach(function (k2) { self.outline(g, k2, "#d61f9b", 3); });
      this.outline(g, this.sel, "#111", 4);
    }
    // A search match that is also marked keeps its yellow outline, inside the mark's.
    if (this.found && this.sel >= 0) for (i = 0; i < this.foundList.length; i++) {
      var fj = this.foundList[i]; if (x.end[fj] >= t0 && x.start[fj] <= t1 && (fj === this.sel || mk.same.indexOf(fj) >= 0 || mk.preds.indexOf(fj) >= 0 || mk.succs.indexOf(fj) >= 0)) this.outline(g, fj, "#f5b800", 2, fj === this.sel ? 4 : 3);
    }
    // Step boundaries; a label only where it does not run into the previous one.
    g.strokeStyle = "#c0392b"; g.fillStyle = "#c0392b"; g.lineWidth = 1; g.setLineDash([4, 3]);
    var lastLabel = -1e9; this.stepLabels = [];
    for (i = 0; i < x.steps.length; i++) {
      var bounds = [x.steps[i][0]]; if (i === x.steps.length - 1) bounds.push(x.steps[i][1]);
      for (var q = 0; q < bounds.length; q++) {
        var xs = LEFT + (bounds[q] - t0) * s; if (xs < LEFT - 1 || xs > w + 1) continue;
        g.beginPath(); g.moveTo(xs + .5, 14); g.lineTo(xs + .5, bottom); g.stroke();
        if (q === 0) { var sl = "step " + x.steps[i][2]; if (xs >= lastLabel) { g.fillText(sl, xs + 3, 21); lastLabel = xs + 3 + g.measureText(sl).width + 6; this.stepLabels.push([xs + 3, lastLabel - 6]); } }
      }
    }
    g.setLineDash([]);
    for (i = 0; i < this.marks.length; i++) {  // vertical markers (the compare view's critical-path ends)
      var xm = LEFT + (this.marks[i].t - t0) * s; g.strokeStyle = this.marks[i].colour; g.lineWidth = 2;
      g.beginPath(); g.moveTo(xm, TOP); g.lineTo(xm, bottom); g.stroke();
      var mt = this.marks[i].text, mw = g.measureText(mt).width, mx = xm + 3 + mw > w ? xm - 3 - mw : xm + 3, my = TOP + 7 + 13 * i;
      g.fillStyle = "rgba(255,255,255,.9)"; g.fillRect(mx - 2, my - 6, mw + 4, 12);
      g.fillStyle = this.marks[i].colour; g.fillText(mt, mx, my);
    }
    // Dependency arrows: every one with an end in view (at most MAX_ARROWS, said), else the focused job's.
    g.strokeStyle = "rgba(40,40,40,.55)"; g.fillStyle = "rgba(40,40,40,.7)"; g.lineWidth = 1;
    var drawn = 0, inView = 0, k;
    if (this.showDeps && d.deps.length) {
      for (k = 0; k < d.deps.length; k += 3) {
        var sI = d.deps[k], dI = d.deps[k + 1], fromT = d.deps[k + 2] ? x.start[sI] : x.end[sI], toT = x.start[dI];
        if ((fromT < t0 && toT < t0) || (fromT > t1 && toT > t1) || !this.lh[x.lane[sI]] || !this.lh[x.lane[dI]]) continue;
        inView++;
        if (drawn < MAX_ARROWS && this.arrow(g, k)) drawn++;
      }
    } else if (focus >= 0 && d.deps.length) {
      var ad = adjacency(x); g.strokeStyle = "rgba(20,20,20,.8)"; g.lineWidth = 1.5;
      for (k = ad.po[focus]; k < ad.po[focus + 1]; k++) { inView++; if (this.arrow(g, ad.pv[k])) drawn++; }
      for (k = ad.so[focus]; k < ad.so[focus + 1]; k++) { inView++; if (this.arrow(g, ad.sv[k])) drawn++; }
    }
    this.arrowsShown = [drawn, inView];
    // Memory lanes: per rank the bytes held (a step function) on a GiB scale from 0 to the largest peak or the limit;
    // the part above the limit filled red.
    var mem = d.mem, memTop = bottom + 6;
    if (mem) {
      for (var r2 = 0; r2 < mem.lines.length; r2++) {
        var yb = memTop + (r2 + 1) * MEM_H - 4, hh = MEM_H - 10, ln = mem.lines[r2], yTop = yb - hh;
        g.fillStyle = r2 % 2 ? "#fafbfc" : "#f4f1fa"; g.fillRect(LEFT, memTop + r2 * MEM_H, plotW, MEM_H);
        g.strokeStyle = "#e3e0ea"; g.lineWidth = 1; g.beginPath(); g.moveTo(LEFT, yTop + .5); g.lineTo(w, yTop + .5); g.moveTo(LEFT, yb - hh / 2 + .5); g.lineTo(w, yb - hh / 2 + .5); g.stroke();
        var area = function (ln, yb, hh) {
          g.beginPath(); g.moveTo(LEFT + (ln.t.length ? (ln.t[0] - t0) * s : 0), yb);
          for (var q2 = 0; q2 < ln.t.length; q2++) {
            var xq = LEFT + (ln.t[q2] - t0) * s, yq = yb - hh * ln.b[q2] / mem.top;
            if (q2) g.lineTo(xq, yb - hh * ln.b[q2 - 1] / mem.top);
            g.lineTo(xq, yq);
          }
          if (ln.t.length) g.lineTo(LEFT + (ln.t[ln.t.length - 1] - t0) * s, yb);
          g.closePath();
        };
        area(ln, yb, hh);
        g.fillStyle = "rgba(111,66,193,.35)"; g.strokeStyle = "#6f42c1"; g.fill(); g.stroke();
        if (mem.limit) {
          var yl = yb - hh * mem.limit / mem.top;
          if (yl > yTop + 0.5) {  // room above the limit: the part of the area over it, in red
            g.save(); g.beginPath(); g.rect(LEFT, yTop - 2, plotW, yl - yTop + 2); g.clip();
            area(ln, yb, hh); g.fillStyle = "rgba(180,35,24,.6)"; g.fill(); g.restore();
          }
          g.strokeStyle = "#b42318"; g.setLineDash([5, 3]);
          g.beginPath(); g.moveTo(LEFT, yl + .5); g.lineTo(w, yl + .5); g.stroke(); g.setLineDash([]);
        }
      }
    }
    g.restore();
    if (mem) {
      var gib = function (b) { var v = b / GIB; return (v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2)) + " GiB"; };
      for (var r3 = 0; r3 < mem.lines.length; r3++) {
        var y0 = memTop + r3 * MEM_H, ybase = y0 + MEM_H - 4, hgt2 = MEM_H - 10;
        g.fillStyle = "#fff"; g.fillRect(0, y0, LEFT - 2, MEM_H);
        g.fillStyle = "#333"; g.fillText("rank " + r3 + " memory", 4, y0 + 10);
        var over = mem.limit && mem.peak[r3] > mem.limit;
        g.fillStyle = over ? "#b42318" : "#666";
        g.fillText("peak " + gib(mem.peak[r3]) + (over ? ", over" : ""), 4, y0 + 24);
        // the scale: 0 and the top of the lane, in GiB, right-aligned against the plot (ticks at 0, half and top)
        g.fillStyle = "#777"; g.font = "9px system-ui, sans-serif"; g.textAlign = "right";
        g.fillText(gib(mem.top), LEFT - 5, ybase - hgt2 + 3); g.fillText("0", LEFT - 5, ybase - 2);
        g.textAlign = "left"; g.font = "11px system-ui, sans-serif";
        g.strokeStyle = "#999"; g.lineWidth = 1; g.beginPath();
        [0, 0.5, 1].forEach(function (f) { var yt = Math.round(ybase - hgt2 * f) + .5; g.moveTo(LEFT - 3, yt); g.lineTo(LEFT, yt); });
        g.stroke();
      }
    }
    // Lane labels on top of everything, left of the plot (a collapsed rank: "▸ rank r").
    g.fillStyle = "#fff"; g.fillRect(0, TOP, LEFT - 2, bottom - TOP);
    for (l = 0; l < nLanes; l++) {
      if (!this.lh[l]) continue;
      g.fillStyle = l % 2 ? "#fafbfc" : "#f1f3f6"; g.fillRect(0, this.ly[l], LEFT - 2, this.lh[l]);
      if (this.lh[l] <= SMALL_H) { g.fillStyle = "#333"; g.font = "9px system-ui, sans-serif"; g.fillText("▸ rank " + d.lrank[l] + " (collapsed)", 4, this.ly[l] + this.lh[l] / 2 + 1); g.font = "11px system-ui, sans-serif"; continue; }
      g.fillStyle = "#333"; var name = d.lanes[l]; while (name.length > 3 && g.measureText(name).width > LEFT - 10) name = name.slice(0, -2);
      g.fillText(name === d.lanes[l] ? name : name + "…", 4, this.ly[l] + LANE_H / 2 + 1);
    }
    this.el.setAttribute("data-t0", t0.toFixed(3)); this.el.setAttribute("data-t1", t1.toFixed(3));
    this.el.setAttribute("data-drawn", "1");
    if (this.section) {
      var r = this.section.querySelector(".range"); if (r) r.textContent = "view " + fmt(t0) + " … " + fmt(t1) + " (" + fmt(t1 - t0) + ")";
      var an = this.section.querySelector(".arrows-n");
      if (an) an.textContent = this.showDeps ? (drawn < inView ? "showing " + drawn + " of " + inView + " arrows in view (zoom in for the rest)" : inView + " arrows in view") : "";
    }
    if (H.firstDrawMs === null) { H.firstDrawMs = performance.now(); H.firstDrawSinceScriptMs = H.firstDrawMs - T_START; }
  };
  Timeline.prototype.hit = function (offX, offY) {
    var x = this.x, lane = this.laneAt(offY);
    if (lane < 0 || offX < LEFT) return -1;
    var t = this.timeAt(offX), tol = 2 / this.scale(), lo = x.off[lane], hi = x.off[lane + 1];
    var i = upperBound(x.start, t + tol, lo, hi) - 1, best = -1, bestD = Infinity;
    for (; i >= lo && x.start[i] >= t - x.maxDur[lane] - tol; i--) {
      if (x.end[i] + tol >= t) { var dd = Math.max(0, x.start[i] - t, t - x.end[i]); if (dd < bestD || (dd === bestD && x.end[i] - x.start[i] < x.end[best] - x.start[best])) { best = i; bestD = dd; } }
    }
    return best;
  };
  // The tooltip of job i: what it is, when it ran, the cost model's duration, what it waited for.
  Timeline.prototype.tipText = function (i) {
    var x = this.x, d = x.d, kind = KINDS[d.kind[i]].name, dur = x.end[i] - x.start[i];
    var model = d.cost ? d.cost[d.stage[i] + "," + kind] : undefined, wt = waitOf(x, i);
    var why = wt.by >= 0 ? " for " + label(d, wt.by) + " on " + iso(d.lanes[x.lane[wt.by]]) : wt.first ? " from the step's start" : "";
    return iso(d.label) + "\n" + iso(d.lanes[x.lane[i]]) + "\n" + label(d, i) +
      ": stage " + d.stage[i] + ", " + kind + (d.mb[i] < 0 ? "" : ", micro-batch " + d.mb[i]) + ", chunk " + d.chunk[i] + ", step " + d.step[i] +
      "\nstart " + fmt(x.start[i]) + ", duration " + fmt(dur) + " measured" +
      (model === undefined ? " (no cost model)" : ", " + fmt(model / 1000) + " cost model" + (d.olap && d.olap[label(d, i)] ? " alone" : "")) +
      (d.olap && d.olap[label(d, i)] ? "\n" + d.olap[label(d, i)] : "") +
      "\nwaited " + fmt(wt.idle) + " idle before it" + (wt.idle > 0 ? why : "") +
      (x.ov[i] ? "\n⚠ overlaps another job on this device (host start stamps)" : "");
  };
  Timeline.prototype.showTip = function (i, clientX, clientY) {
    tip.textContent = this.tipText(i); tip.style.display = "block";
    var tx = clientX + 14, ty = clientY + 14, r = tip.getBoundingClientRect();
    if (tx + r.width > window.innerWidth - 4) tx = clientX - r.width - 10;
    if (ty + r.height > window.innerHeight - 4) ty = clientY - r.height - 10;
    tip.style.left = tx + "px"; tip.style.top = ty + "px";
  };
  Timeline.prototype.hover = function (e) {
    var i = this.hit(e.offsetX, e.offsetY);
    if (i !== this.hov) { this.hov = i; if (!this.showDeps && this.sel < 0) this.draw(); }
    if (i < 0) { tip.style.display = "none"; return; }
    this.showTip(i, e.clientX, e.clientY);
  };

