// The change of the median from one case's per-step samples to another's, with its confidence interval and verdict:
// harness.stats.compare_samples in the page, for whichever two cases the side-by-side view shows.
// Included inside the page script's function scope, before page.js.
  var MIN_SAMPLES = 5, RESAMPLES = 2000, SEED = 20240, LEVEL = 0.95;
  function medianOf(values) {
    var v = Float64Array.from(values).sort(), n = v.length, h = n >> 1;
    return n % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  }
  // numpy's default percentile (linear interpolation between the two nearest ranks) of sorted values.
  function percentileOf(sorted, q) {
    var at = q / 100 * (sorted.length - 1), lo = Math.floor(at), hi = Math.ceil(at);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
  }
  // mulberry32: a small seeded generator, so a page gives one answer for one pair, every time.
  function generator(seed) {
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0; var t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  function verdictOf(low, high) { return low > 0 ? "larger" : high < 0 ? "smaller" : "no significant change"; }
  // [estimate, low, high, verdict] of median(neu) / median(base) - 1 (relative) or median(neu) - median(base);
  // low and high null where no interval is known; null where a relative change from a median of 0 is asked for.
  function compareSamples(base, neu, relative, exact) {
    var mb = medianOf(base), mn = medianOf(neu);
    if (relative && mb === 0) return null;
    var point = relative ? mn / mb - 1 : mn - mb;
    if (exact) return [point, point, point, point > 1e-12 ? "larger" : point < -1e-12 ? "smaller" : "no significant change"];
    if (base.length < MIN_SAMPLES || neu.length < MIN_SAMPLES) return [point, null, null, "not enough samples"];
    var spread = function (v) { return Math.max.apply(null, v) - Math.min.apply(null, v); };
    if (spread(base) === 0 && spread(neu) === 0) return [point, point, point, point > 0 ? "larger" : point < 0 ? "smaller" : "no significant change"];
    var rand = generator(SEED), stats = new Float64Array(RESAMPLES), bs = new Float64Array(base.length), ns = new Float64Array(neu.length);
    var resampled = function (from, into) {
      for (var i = 0; i < into.length; i++) into[i] = from[Math.floor(rand() * from.length)];
      into.sort(); var h = into.length >> 1; return into.length % 2 ? into[h] : (into[h - 1] + into[h]) / 2;
    };
    for (var r = 0; r < RESAMPLES; r++) {
      var x = resampled(base, bs), y = resampled(neu, ns);
      stats[r] = relative ? y / x - 1 : y - x;
    }
    stats.sort();
    var alpha = (1 - LEVEL) / 2, low = percentileOf(stats, 100 * alpha), high = percentileOf(stats, 100 * (1 - alpha));
    if (!isFinite(low) || !isFinite(high)) return [point, null, null, "no significant change"];
    return [point, low, high, verdictOf(low, high)];
  }
  // The two cases' step-time and bubble changes, as `python -m harness compare FILE --case A --case B` computes them.
  function pairChange(a, b) {
    var exact = a.exact && b.exact, step;
    if (Math.min.apply(null, a.steps) > 0) step = compareSamples(a.steps, b.steps, true, exact);
    else step = compareSamples([a.step_ms], [b.step_ms], true, true);  // a 0 ms step in some sample: the medians as given
    return { step: step, bubble: compareSamples(a.bubbles, b.bubbles, false, exact) };
  }
  H.compareSamples = compareSamples;
  H.pairChange = pairChange;
