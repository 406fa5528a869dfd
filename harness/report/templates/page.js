// Page set-up: case timelines (first at once, the rest on idle or in view), print, the comparison view, sorting.
// Included inside the page script's function scope, after timeline.js and grid.js.
  function makeTimeline(el, k, view) {
    var tl = new Timeline(el, k, view); H.timelines.push(tl); return tl;
  }
  function initCase(el) {
    if (el.__tl) return el.__tl;
    var k = +el.getAttribute("data-case"), x = decode(k);
    var tl = el.__tl = makeTimeline(el, k, new View(0, 1)); tl.index = k; tl.reset(); wire(tl); return tl;
  }
  try {
    var els = document.querySelectorAll(".tl[data-case]");
    // The first case draws at once; the others when they scroll into view, or one by one when the page is idle,
    // so a full-page capture finds every timeline drawn; print draws whatever is left first.
    if (els.length) initCase(els[0]);
    var next = 1, idle = window.requestIdleCallback || function (fn) { return setTimeout(fn, 30); };
    var drawRest = function () { while (next < els.length && els[next].__tl) next++; if (next < els.length) { initCase(els[next++]); idle(drawRest); } };
    if (els.length > 1) idle(drawRest);
    if ("IntersectionObserver" in window) {
      var io = new IntersectionObserver(function (entries) {
        entries.forEach(function (en) { if (en.isIntersecting) { initCase(en.target); io.unobserve(en.target); } });
      }, { rootMargin: "200px" });
      for (var j = 1; j < els.length; j++) io.observe(els[j]);
    }
    // A case's toolbar is wired when its timeline is made: a click, key or focus in a case not made yet (still
    // waiting for idle time or for its scroll into view) makes it first, in the capture phase, so the control's
    // own listener, added now, still receives the event.
    var initWithin = function (e) {
      var sec = e.target && e.target.closest ? e.target.closest("section") : null, el = sec && sec.querySelector(".tl[data-case]");
      if (el && !el.__tl) initCase(el);
    };
    ["click", "keydown", "focusin"].forEach(function (type) { document.addEventListener(type, initWithin, true); });
    H.caseTimeline = function (k) { return initCase(els[k]); };
    H.drawAll = function () {
      for (var q = 0; q < els.length; q++) initCase(els[q]);
      H.timelines.forEach(function (t) { t.draw(); });
      return H.timelines.length;
    };
    window.addEventListener("beforeprint", H.drawAll);
    var printMq = window.matchMedia && window.matchMedia("print");
    if (printMq) printMq.addEventListener("change", function (e) { if (e.matches) H.drawAll(); });
    // The comparison view.
    var selA = document.getElementById("cmp-a"), selB = document.getElementById("cmp-b");
    if (selA && selB) {
      var cv = new View(0, 1), cpBox = document.getElementById("cmp-cp");
      var top = makeTimeline(document.getElementById("cmp-top"), +selA.value, cv);
      var bottom = makeTimeline(document.getElementById("cmp-bottom"), +selB.value, cv);
      var overlay = function () {
        var on = cpBox.checked, na = PAYLOAD.numbers[top.k], nb = PAYLOAD.numbers[bottom.k], m = [];
        if (on && na.cpMs !== null) m.push({ t: na.cpMs * 1000, colour: "#b42318", text: "top's critical path " + na.cpMs.toFixed(3) + " ms" });
        if (on && nb.cpMs !== null) m.push({ t: nb.cpMs * 1000, colour: "#1f5fbf", text: "bottom's " + nb.cpMs.toFixed(3) + " ms" });
        [top, bottom].forEach(function (t) { t.showCp = on; t.marks = m; t.draw(); });
      };
      cpBox.addEventListener("change", overlay);
      top.reset();
      var pct = function (v) { return (v >= 0 ? "+" : "") + v.toFixed(2); };
      var numbers = function () {
        var a = +selA.value, b = +selB.value, body = document.querySelector("#cmp-numbers tbody");
        var ca = PAYLOAD.numbers[a], cb = PAYLOAD.numbers[b], same = a === b;
        var pair = same ? null : H.pairChange(ca, cb), words = { larger: "slower", smaller: "faster" };
        if (pair && pair.step) pair.step[3] = words[pair.step[3]] || pair.step[3];
        H.shownPair = pair;
        var verdict = function (ch) { return same ? "same case" : ch ? ch[3] + (ca.flagged || cb.flagged ? " (flagged: unstable or contended)" : "") : "n/a: the top case's median step is 0"; };
        var delta = function (ch, unit) { return same ? "—" : ch ? pct(ch[0] * 100) + unit : "n/a"; };
        var ci = function (ch, unit) { return same || !ch || ch[1] === null ? "—" : (ch[1] === ch[2] ? "exact" : "[" + (ch[1] * 100).toFixed(2) + ", " + (ch[2] * 100).toFixed(2) + "]" + unit); };
        var rel = function (x, y) { return same || x === null || y === null || !x ? "—" : pct((y - x) / x * 100) + "%"; };
        var rows = [
          ["step time (median)", ca.step_ms.toFixed(3) + " ms", cb.step_ms.toFixed(3) + " ms", delta(pair && pair.step, "%"), ci(pair && pair.step, "%"), verdict(pair && pair.step)],
          ["spread over steps", ca.spread, cb.spread, "", "", ""],
          ["bubble (idle share)", (ca.bubble * 100).toFixed(3) + "%", (cb.bubble * 100).toFixed(3) + "%", delta(pair && pair.bubble, " pp"), ci(pair && pair.bubble, " pp"), verdict(pair && pair.bubble)],
          ["critical path", ca.cpMs === null ? "—" : ca.cpMs.toFixed(3) + " ms", cb.cpMs === null ? "—" : cb.cpMs.toFixed(3) + " ms", rel(ca.cpMs, cb.cpMs), "", "the chain of the median step (of an even number of steps: the lower middle one)"],
          ["peak memory (largest rank)", ca.mem === null ? "— (no memory model)" : bytesFmt(ca.mem), cb.mem === null ? "— (no memory model)" : bytesFmt(cb.mem), rel(ca.mem, cb.mem), ca.mem !== null && cb.mem !== null && !same ? "exact (model)" : "", ""]];
        // Both cases named in the table's header and above their timelines (the selects are not printed).
        [["cmp-th-a", "top: ", ca], ["cmp-th-b", "bottom: ", cb], ["cmp-name-a", "top: ", ca], ["cmp-name-b", "bottom: ", cb]].forEach(function (n) {
          var el = document.getElementById(n[0]); if (!el) return;
          var b = document.createElement("bdi"); b.textContent = n[2].label; b.className = "cut"; b.title = n[2].label;
          el.textContent = n[1]; el.appendChild(b);
        });
        body.textContent = "";
        rows.forEach(function (row) {
          var tr = document.createElement("tr");
          row.forEach(function (text, i) { var td = document.createElement("td"); td.textContent = text; if (i === 0 || i === 5) td.className = "l"; tr.appendChild(td); });
          body.appendChild(tr);
        });
      };
      numbers();
      selA.addEventListener("change", function () { top.setCase(+selA.value); top.reset(); numbers(); overlay(); });
      selB.addEventListener("change", function () { bottom.setCase(+selB.value); bottom.reset(); numbers(); overlay(); });
      // A dot of the step-time against peak-memory chart: its case goes to the bottom of the comparison.
      Array.prototype.forEach.call(document.querySelectorAll("#memory-chart .mdot"), function (dot) {
        dot.addEventListener("click", function () {
          selB.value = dot.getAttribute("data-k"); selB.dispatchEvent(new Event("change"));
          document.getElementById("cmp-numbers").scrollIntoView({ block: "nearest" });
        });
      });
      H.compare = [top, bottom];
    }
    window.addEventListener("resize", function () { H.timelines.forEach(function (t) { t.draw(); }); });
  } catch (err) { H.errors.push(String(err)); throw err; }

  // Sortable overview table (numbers by data-v, text naturally).
  var table = document.getElementById("summary");
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows), asc = th.getAttribute("aria-sort") !== "ascending";
      rows.sort(function (r1, r2) {
        var a = r1.cells[col], b = r2.cells[col], res;
        if (a.hasAttribute("data-v")) res = parseFloat(a.getAttribute("data-v")) - parseFloat(b.getAttribute("data-v"));
        else res = a.textContent.localeCompare(b.textContent, undefined, { numeric: true });
        return asc ? res : -res;
      });
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  H.loadMs = performance.now();
