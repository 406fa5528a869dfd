// The schedule grid (rank x slot, PyTorch's schedule-visualizer layout) and each case's toolbar.
// Included inside the page script's function scope, after timeline.js.
  var CELL_W = 30, GRID_LEFT = 150;
  // A cell's label: data-parallel kinds shortened to fit (the full name is in the cell's title and tooltip).
  var SHORT_KIND = { UNSHARD: "UNSH", RESHARD: "RESH", REDUCE_GRAD: "RG" };
  function cellLabel(d, i) {
    var kn = KINDS[d.kind[i]].name; return SHORT_KIND[kn] ? d.stage[i] + SHORT_KIND[kn] + (d.mb[i] < 0 ? "" : d.mb[i]) : label(d, i);
  }

  // Draw step `step` of the case of timeline `tl` into `box` as a rank x slot grid of labelled cells.
  function Grid(box, tl) {
    this.box = box; this.tl = tl; this.step = null; this.cells = {};
    var self = this;
    box.addEventListener("click", function (e) {
      var c = e.target.closest(".cell"); if (c) tl.select(+c.getAttribute("data-i"));
    });
    box.addEventListener("mousemove", function (e) {
      var c = e.target.closest(".cell"); if (!c) { tip.style.display = "none"; return; }
      tl.showTip(+c.getAttribute("data-i"), e.clientX, e.clientY);
    });
    box.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    tl.on(function (what) { if ((what === "select" || what === "find") && !self.box.hidden) self.mark(); });
    var pending = false;
    box.addEventListener("scroll", function () {
      if (pending || !self.rowEls) return; pending = true;
      requestAnimationFrame(function () { pending = false; self.fill(); });
    });
    box.addEventListener("change", function (e) { if (e.target.classList.contains("grid-step")) { self.render(+e.target.value); } });
  }
  Grid.prototype.render = function (step) {
    var tl = this.tl, x = tl.x, d = x.d, box = this.box;
    box.textContent = "";
    if (!d.slot) { var p = document.createElement("p"); p.className = "failnote"; p.textContent = "No grid for this case: " + d.gridError; box.appendChild(p); return; }
    var steps = x.steps.map(function (s) { return s[2]; });
    if (step === undefined || step === null) step = d.cp.length ? d.step[d.cp[0]] : (steps.length ? steps[0] : d.step[0]);
    this.step = step; this.cells = {};
    var head = document.createElement("div"); head.className = "grid-head";
    if (steps.length > 1) {
      var lab = document.createElement("label"); lab.textContent = "step ";
      var sel = document.createElement("select"); sel.className = "grid-step";
      steps.forEach(function (s) { var o = document.createElement("option"); o.value = s; o.textContent = s; if (s === step) o.selected = true; sel.appendChild(o); });
      lab.appendChild(sel); head.appendChild(lab);
    }
    var rows = [], width = 0, jobs = 0, l, i, longest = 3;
    for (l = 0; l < d.nl.length; l++) {
      if (d.lcomm[l]) continue;
      var list = [];
      for (i = x.off[l]; i < x.off[l + 1]; i++) if (d.step[i] === step) { list.push(i); if (d.slot[i] + 1 > width) width = d.slot[i] + 1; if (d.mb[i] > 9 || d.stage[i] > 9 || KINDS[d.kind[i]].name.length > 1) longest = Math.max(longest, cellLabel(d, i).length); }
      rows.push({ lane: l, jobs: list }); jobs += list.length;
    }
    var note = document.createElement("span"); note.className = "hint";
    note.textContent = " step " + step + ": " + rows.length + " compute streams × " + width + " slots, " + jobs + " jobs, " +
      (rows.length * width - jobs) + " idle slots (hatched); one slot per job, each after what it waits for (transfers take none). Click a job to follow its micro-batch.";
    head.appendChild(note); box.appendChild(head);
    var cw = this.cw = Math.max(CELL_W, 7 * longest + 4);  // every label fits its cell (10 px monospace: 6 px a character, and a margin)
    var wrap = document.createElement("div"); wrap.className = "grid-wrap";
    var axis = document.createElement("div"); axis.className = "grid-row grid-axis"; axis.style.width = (GRID_LEFT + width * cw) + "px";
    for (var sl = 0; sl < width; sl += 5) { var t = document.createElement("span"); t.className = "slotno"; t.style.left = (GRID_LEFT + sl * cw) + "px"; t.textContent = sl; axis.appendChild(t); }
    wrap.appendChild(axis);
    var frag = document.createDocumentFragment();
    this.rowEls = []; this.width = width; this.win = null;
    rows.forEach(function (row) {
      var r = document.createElement("div"); r.className = "grid-row"; r.style.width = (GRID_LEFT + width * cw) + "px";
      r.setAttribute("data-rank", d.lrank[row.lane]);
      var name = document.createElement("span"); name.className = "grid-name"; name.textContent = d.lanes[row.lane]; name.title = d.lanes[row.lane]; r.appendChild(name);
      var lane = document.createElement("span"); lane.className = "grid-lane"; lane.style.width = (width * cw) + "px"; r.appendChild(lane);
      row.jobs.sort(function (a, b) { return d.slot[a] - d.slot[b]; });
      frag.appendChild(r); this.rowEls.push({ el: r, jobs: row.jobs, cells: [] });
    }, this);
    wrap.appendChild(frag); box.appendChild(wrap);
    this.fill();
  };
  // Cells for the slots in view (and WINDOW_SLOTS either side): a step of any size opens at once.
  var WINDOW_SLOTS = 400;
  Grid.prototype.fill = function () {
    var d = this.tl.x.d, box = this.box, s0 = 0, s1 = this.width, cw = this.cw;
    if (this.width > 2 * WINDOW_SLOTS) {
      var first = Math.floor((box.scrollLeft - GRID_LEFT) / cw), seen = Math.ceil(box.clientWidth / cw) + 1;
      var v0 = Math.max(0, first), v1 = Math.min(this.width, first + seen), w0 = this.win ? this.win[0] : 0, w1 = this.win ? this.win[1] : 0;
      if (this.win && (w0 === 0 || v0 - w0 >= WINDOW_SLOTS / 4) && (w1 === this.width || w1 - v1 >= WINDOW_SLOTS / 4)) return;
      s0 = Math.max(0, first - WINDOW_SLOTS); s1 = Math.min(this.width, first + seen + WINDOW_SLOTS);
    }
    if (this.win && this.win[0] === s0 && this.win[1] === s1) return;
    this.win = [s0, s1]; this.cells = {};
    var self = this;
    this.rowEls.forEach(function (row) {
      row.cells.forEach(function (c) { row.el.removeChild(c); }); row.cells = [];
      var lo = 0, hi = row.jobs.length;
      while (lo < hi) { var mid = (lo + hi) >>> 1; if (d.slot[row.jobs[mid]] < s0) lo = mid + 1; else hi = mid; }
      var frag = document.createDocumentFragment();
      for (var q = lo; q < row.jobs.length && d.slot[row.jobs[q]] < s1; q++) {
        var j = row.jobs[q], c = document.createElement("span"); c.className = "cell"; c.setAttribute("data-i", j);
        c.style.left = (GRID_LEFT + d.slot[j] * cw) + "px"; c.style.width = (cw - 1) + "px"; c.style.backgroundColor = KINDS[d.kind[j]].colour;
        c.textContent = cellLabel(d, j); if (c.textContent !== label(d, j)) c.title = label(d, j); frag.appendChild(c); row.cells.push(c); self.cells[j] = c;
      }
      row.el.appendChild(frag);
    });
    this.mark();
  };
  // Classes for the selection (its micro-batch, predecessors, successors) and search matches.
  Grid.prototype.mark = function () {
    var tl = this.tl, cells = this.cells, m = tl.marked(tl.sel), k;
    for (k in cells) cells[k].className = "cell";
    var add = function (list, cls) { list.forEach(function (j) { if (cells[j]) cells[j].classList.add(cls); }); };
    add(m.same, "same-mb"); add(m.preds, "pred"); add(m.succs, "succ");
    if (tl.sel >= 0 && cells[tl.sel]) cells[tl.sel].classList.add("sel");
    if (tl.found) add(tl.foundList, "found");
    if (tl.sel >= 0) this.box.classList.add("selecting"); else this.box.classList.remove("selecting");
  };

  // Wire one case's toolbar to its timeline: view toggle, comm lanes, critical path, arrows, search, keys.
  function wire(tl) {
    var sec = tl.section; if (!sec) return;
    var q = function (sel) { return sec.querySelector(sel); };
    var gridBox = q(".grid"), grid = gridBox ? new Grid(gridBox, tl) : null, info = q(".sel-info");
    var bTl = q(".view-tl"), bGrid = q(".view-grid"), help = q(".keyhelp"), keysBtn = q(".keys"), findBox = q(".find"), foundN = q(".found-n");
    var setView = function (toGrid) {
      if (!grid) return;
      gridBox.hidden = !toGrid; tl.el.hidden = toGrid;
      bTl.setAttribute("aria-pressed", String(!toGrid)); bGrid.setAttribute("aria-pressed", String(toGrid));
      if (toGrid) { grid.render(grid.step); gridBox.focus && gridBox.setAttribute("tabindex", "0"); } else tl.draw();
    };
    tl.grid = grid; tl.setView = setView;
    bTl.addEventListener("click", function () { setView(false); });
    bGrid.addEventListener("click", function () { setView(true); });
    var comm = q(".comm-toggle"), cp = q(".cp-toggle"), deps = q(".deps-toggle");
    comm.disabled = !tl.x.d.lcomm.some(function (c) { return c; });
    if (comm.disabled) comm.parentNode.title = "this case has no comm lanes";
    comm.addEventListener("change", function () { tl.setComm(comm.checked); });
    cp.disabled = !tl.x.d.cp.length;
    if (cp.disabled) cp.parentNode.title = "this case has no critical path (imported logs, or a results file without one)";
    // The critical path shown zooms to its step (the median one), where its jobs can be read.
    var showCp = function (on) { tl.showCp = on; if (on && tl.x.d.cp.length) tl.zoomToStep(tl.x.d.step[tl.x.d.cp[0]]); tl.draw(); };
    cp.addEventListener("change", function () { showCp(cp.checked); });
    deps.addEventListener("change", function () { tl.showDeps = deps.checked; tl.draw(); });
    q(".reset").addEventListener("click", function () { tl.reset(); });
    q(".whole").addEventListener("click", function () { tl.whole(); });
    keysBtn.addEventListener("click", function () { help.hidden = !help.hidden; keysBtn.setAttribute("aria-expanded", String(!help.hidden)); });
    var runFind = function () {
      var n = tl.find(findBox.value), hidden = 0;
      tl.foundList.forEach(function (i) { if (!tl.lh[tl.x.lane[i]]) hidden++; });
      foundN.textContent = findBox.value.trim() ? n + " match" + (n === 1 ? "" : "es") + (hidden ? ", " + hidden + " on hidden lanes" : "") + (n ? " (Enter: next)" : "") : "";
    };
    findBox.addEventListener("input", runFind);
    findBox.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); if (!tl.foundList.length) runFind(); tl.nextFound(); }
      else if (e.key === "Escape") { findBox.value = ""; runFind(); tl.el.focus(); }
    });
    tl.on(function (what, arg) {
      if (what === "select") {
        var i = arg, d = tl.x.d;
        if (i < 0) { info.textContent = ""; return; }
        var m = tl.marked(i), ranks = tl.markedRanks();
        info.textContent = "selected " + label(d, i) + " (step " + d.step[i] + "): micro-batch " + (d.mb[i] < 0 ? "—" : d.mb[i]) +
          " on rank(s) " + ranks.join(", ") + " outlined; waits for " + (m.preds.map(function (j) { return label(d, j); }).join(", ") || "nothing") +
          "; " + (m.succs.map(function (j) { return label(d, j); }).join(", ") || "nothing") + " waits for it. Esc clears.";
        return;
      }
      if (what !== "key") return false;
      var e = arg;
      if (e.key === "g") setView(gridBox.hidden);
      else if (e.key === "c" && !comm.disabled) { comm.checked = !comm.checked; tl.setComm(comm.checked); }
      else if (e.key === "p" && !cp.disabled) { cp.checked = !cp.checked; showCp(cp.checked); }
      else if (e.key === "a") { deps.checked = !deps.checked; tl.showDeps = deps.checked; tl.draw(); }
      else if (e.key === "/") findBox.focus();
      else if (e.key === "?") keysBtn.click();
      else return false;
      return true;
    });
    if (gridBox) gridBox.addEventListener("keydown", function (e) { if (e.key === "Escape") tl.select(-1); else if (e.key === "g") setView(false); });
  }
