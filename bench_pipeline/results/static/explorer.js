// The results explorer: renders the JSON embedded in #bench-data. Plain JS, no request of any
// kind: every element is built here from the embedded data.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("bench-data").textContent);
  var S = { tab: "", failuresOnly: false, tag: "", config: "", holdout: "all", x: "avg_cost_usd", y: "overall", cell: null, trial: null };

  // ------------------------------------------------------------------ helpers
  function esc(v) {
    return String(v).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function num(v, d) { return isNum(v) ? v.toFixed(d === undefined ? 3 : d) : "–"; }
  function usd(v) { return isNum(v) ? "$" + v.toFixed(4) : "unknown"; }
  function secs(v) { return isNum(v) ? v.toFixed(2) + " s" : "–"; }
  function pct(v) { return isNum(v) ? Math.round(v * 100) + "%" : "–"; }
  function el(id) { return document.getElementById(id); }
  function scorers() {
    var t = D.config_table[0] || {};
    return Object.keys(t).filter(function (k) { return k.indexOf("score_") === 0; }).map(function (k) { return k.slice(6); });
  }
  var SCORERS = scorers();
  var TAGS = (function () {
    var seen = {};
    D.by_tag.forEach(function (r) { seen[r.tag] = 1; });
    return Object.keys(seen).sort();
  })();
  function taskTags(task) {
    var t = D.tasks[task];
    return t && t.tags && t.tags.length ? t.tags : ["-"];
  }
  function isHoldout(task) { var t = D.tasks[task]; return !!(t && t.holdout); }
  function configIds() { return D.config_table.map(function (r) { return r.config_id; }); }

  // ------------------------------------------------------------------ header
  function header() {
    var m = D.meta, parts = [];
    Object.keys(m).forEach(function (k) {
      if (k === "notes") return;
      parts.push("<span><b>" + esc(k) + "</b> " + esc(m[k]) + "</span>");
    });
    var notes = m.notes ? String(m.notes).split(" | ").map(function (n) { return '<div class="note">' + esc(n) + "</div>"; }).join("") : "";
    return "<h1>" + esc("Run " + m.run_id + " · suite " + m.suite) + '</h1><div class="meta">' + parts.join("") + "</div>" + notes;
  }

  function tabs() {
    var b = ['<button data-tab="" class="' + (S.tab === "" ? "on" : "") + '">All tasks</button>'];
    TAGS.forEach(function (t) {
      b.push('<button data-tab="' + esc(t) + '" class="' + (S.tab === t ? "on" : "") + '">tag ' + esc(t) + "</button>");
    });
    return '<div class="tabs" id="tabs">' + b.join("") + "</div>";
  }

  // ------------------------------------------------------------------ recommendations
  var REC_LABELS = { best_quality: ["Best quality", "overall"], most_efficient: ["Most efficient", "overall_per_usd"], lowest_cost: ["Lowest cost", "avg_cost_usd"] };
  function recommendations() {
    var out = "<h2>Recommendations" + (S.tab ? " — tag " + esc(S.tab) : "") + "</h2>";
    if (S.tab) {
      var rows = D.recommendations_by_tag.filter(function (r) { return r.tag === S.tab; });
      out += '<ul class="recs">' + rows.map(function (r) {
        return "<li><b>" + esc(r.recommendation.replace("_", " ")) + "</b>: " + (r.config_id ? esc(r.config_id) + " (" + esc(r.metric) + " " + num(r.value) + ")" : "none qualifies") + "</li>";
      }).join("") + "</ul>";
      var n = rows[0] || {};
      if (n.comparable === false) out += '<div class="note">Not comparable: ' + esc(n.comparable_note) + "</div>";
      if (n.overlap) out += '<div class="note">Overlap: ' + esc(n.overlap_note) + "</div>";
      return out;
    }
    var rec = D.recommendations;
    out += '<ul class="recs" id="recommendations">';
    Object.keys(REC_LABELS).forEach(function (k) {
      var p = rec[k], lab = REC_LABELS[k];
      out += "<li><b>" + lab[0] + "</b>: " + (p ? esc(p.config_id) + " (" + lab[1] + " " + num(p[lab[1]], 4) + ")" : "none qualifies") + "</li>";
    });
    out += "</ul>";
    if (rec.comparable === false) out += '<div class="note">Not comparable: ' + esc(rec.comparable_note) + "</div>";
    if (rec.overlap) out += '<div class="note">Overlap: ' + esc(rec.overlap_note) + "</div>";
    if (rec.excluded_from_cost && rec.excluded_from_cost.length) out += '<div class="note">Left out of cost picks (unknown cost): ' + esc(rec.excluded_from_cost.join(", ")) + "</div>";
    return out;
  }

  // ------------------------------------------------------------------ chart
  function axisLabel(c) {
    for (var i = 0; i < D.axes.length; i++) if (D.axes[i].column === c) return D.axes[i].label;
    return c;
  }
  function picker(id, value) {
    return '<select id="' + id + '">' + D.axes.map(function (a) {
      return '<option value="' + esc(a.column) + '"' + (a.column === value ? " selected" : "") + ">" + esc(a.label) + "</option>";
    }).join("") + "</select>";
  }
  function chartSection() {
    return '<h2>Pareto frontier</h2><div class="filters">x axis ' + picker("x-axis", S.x) + " y axis " + picker("y-axis", S.y) +
      '</div><div class="chartbox"><div id="chart"></div><div id="chart-side"></div></div>';
  }
  function drawChart() {
    var rows = D.frontiers[S.x + "|" + S.y] || [];
    var W = 640, H = 400, L = 64, R = 20, T = 16, B = 52;
    var pts = rows.filter(function (r) { return !r.excluded_reason; });
    var xs = pts.map(function (r) { return r[S.x]; }), ys = pts.map(function (r) { return r[S.y]; });
    // Costs and times start at 0; scores in [0, 1] show the whole [0, 1] scale.
    function range(v, lowerBetter) {
      if (!v.length) return [0, 1];
      var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
      if (!lowerBetter && lo >= 0 && hi <= 1) return [0, 1.05];
      lo = Math.min(lo, 0);
      if (hi - lo < 1e-9) hi = lo + 1;
      return [lo, hi + (hi - lo) * 0.08];
    }
    var lower = { avg_cost_usd: 1, avg_duration_seconds: 1 };
    var rx = range(xs, !!lower[S.x]), ry = range(ys, !!lower[S.y]);
    function px(v) { return L + (v - rx[0]) / (rx[1] - rx[0]) * (W - L - R); }
    function py(v) { return H - B - (v - ry[0]) / (ry[1] - ry[0]) * (H - T - B); }
    var s = '<svg id="pareto" viewBox="0 0 ' + W + " " + H + '" width="' + W + '" height="' + H + '" data-x="' + esc(S.x) + '" data-y="' + esc(S.y) + '">';
    s += '<line x1="' + L + '" y1="' + (H - B) + '" x2="' + (W - R) + '" y2="' + (H - B) + '" stroke="#57606a"/>';
    s += '<line x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (H - B) + '" stroke="#57606a"/>';
    for (var i = 0; i <= 4; i++) {
      var vx = rx[0] + (rx[1] - rx[0]) * i / 4, vy = ry[0] + (ry[1] - ry[0]) * i / 4;
      s += '<text x="' + px(vx) + '" y="' + (H - B + 16) + '" font-size="11" text-anchor="middle">' + esc(+vx.toPrecision(3)) + "</text>";
      s += '<text x="' + (L - 6) + '" y="' + (py(vy) + 4) + '" font-size="11" text-anchor="end">' + esc(+vy.toPrecision(3)) + "</text>";
    }
    s += '<text x="' + ((L + W - R) / 2) + '" y="' + (H - 10) + '" font-size="12" text-anchor="middle">' + esc(axisLabel(S.x)) + "</text>";
    s += '<text transform="translate(14 ' + ((T + H - B) / 2) + ') rotate(-90)" font-size="12" text-anchor="middle">' + esc(axisLabel(S.y)) + "</text>";
    var front = pts.filter(function (r) { return r.on_frontier; }).sort(function (a, b) { return a[S.x] - b[S.x]; });
    if (front.length > 1) {
      s += '<polyline fill="none" stroke="#1a7f37" stroke-width="2" points="' + front.map(function (r) { return px(r[S.x]) + "," + py(r[S.y]); }).join(" ") + '"/>';
    }
    pts.forEach(function (r) {
      var on = r.on_frontier, base = r.config_id === D.baseline_config;
      s += '<g class="pt' + (on ? " frontier" : "") + '" data-config="' + esc(r.config_id) + '"><circle cx="' + px(r[S.x]) + '" cy="' + py(r[S.y]) + '" r="' + (on ? 7 : 5) +
        '" fill="' + (on ? "#1a7f37" : "#8c959f") + '" stroke="' + (base ? "#0969da" : "#fff") + '" stroke-width="' + (base ? 3 : 1) + '"><title>' +
        esc(r.config_id + ": " + S.x + " " + r[S.x] + ", " + S.y + " " + r[S.y]) + "</title></circle>" +
        '<text x="' + (px(r[S.x]) + 9) + '" y="' + (py(r[S.y]) - 7) + '" font-size="11">' + esc(r.config_id + (base ? " (baseline)" : "")) + "</text></g>";
    });
    if (!pts.length) {
      s += '<text x="' + (W / 2) + '" y="' + (H / 2) + '" font-size="13" text-anchor="middle" fill="#57606a">no configuration can be plotted on these axes (see the list)</text>';
    }
    s += "</svg>";
    el("chart").innerHTML = s;
    var ids = front.map(function (r) { return r.config_id; });
    var excl = rows.filter(function (r) { return r.excluded_reason; });
    el("chart-side").innerHTML = '<div id="frontier-list" data-frontier="' + esc(ids.join(",")) + '"><b>On the frontier</b> (' + esc(S.x) + " vs " + esc(S.y) + "): " +
      (ids.length ? esc(ids.join(", ")) : "none") + "</div>" +
      "<table><tr><th class=t>config</th><th>" + esc(S.x) + "</th><th>" + esc(S.y) + "</th><th class=t>frontier</th></tr>" +
      rows.map(function (r) {
        return "<tr><td class=t>" + esc(r.config_id) + "</td><td>" + num(r[S.x], 4) + "</td><td>" + num(r[S.y], 3) + "</td><td class=t>" +
          (r.excluded_reason ? '<span class="muted">not plotted: ' + esc(r.excluded_reason) + "</span>" : r.on_frontier ? "<b>yes</b>" : "dominated by " + esc(r.dominated_by || "")) + "</td></tr>";
      }).join("") + "</table>" +
      (excl.length ? '<div class="note">Not plotted: ' + excl.map(function (r) { return esc(r.config_id + " — " + r.excluded_reason); }).join("; ") + "</div>" : "");
  }

  // ------------------------------------------------------------------ config table
  function delta(v, base, higherBetter, fmt) {
    if (!isNum(v) || !isNum(base)) return "";
    var d = v - base;
    if (Math.abs(d) < 1e-12) return ' <span class="small muted">±0</span>';
    var good = higherBetter ? d > 0 : d < 0;
    return ' <span class="small ' + (good ? "better" : "worse") + '">' + (d > 0 ? "+" : "−") + fmt(Math.abs(d)) + "</span>";
  }
  function configTable() {
    var rows = S.tab ? D.by_tag.filter(function (r) { return r.tag === S.tab; }) : D.config_table;
    var base = null;
    rows.forEach(function (r) { if (r.config_id === D.baseline_config) base = r; });
    var h = "<h2>Configurations" + (S.tab ? " — tag " + esc(S.tab) : "") + "</h2>";
    h += '<p class="small muted">Coloured differences are against the baseline configuration ' + esc(D.baseline_config || "(none)") +
      ": green better, red worse. " + (D.meta.baseline_run && D.meta.baseline_run !== "none" ? "Δ run: against the baseline run " + esc(D.meta.baseline_run) + "." : "") + "</p>";
    h += '<table id="config-table"><thead><tr><th class=t>config</th><th>overall [95% CI]</th>';
    SCORERS.forEach(function (s) { h += "<th>" + esc(s) + "<br><span class=small>mean (scored/of)</span></th>"; });
    h += "<th>pass rate</th><th>pass^k</th><th>avg cost (coverage)</th><th>avg time</th><th>succeeded</th>";
    var runDelta = rows.some(function (r) { return isNum(r.delta_overall); });
    if (runDelta) h += "<th>Δ run overall</th><th>Δ run cost</th>";
    h += "</tr></thead><tbody>";
    rows.forEach(function (r) {
      var b = base && r !== base ? base : null;
      h += '<tr data-config="' + esc(r.config_id) + '"><td class=t><b>' + esc(r.config_id) + "</b>" + (r.config_id === D.baseline_config ? ' <span class="badge">baseline</span>' : "") +
        (r.model ? '<br><span class="small muted">' + esc(r.model) + (r.effort ? " · " + esc(r.effort) : "") + "</span>" : "") + "</td>";
      h += "<td>" + num(r.overall) + ' <span class="small muted">[' + num(r.overall_ci_low, 2) + ", " + num(r.overall_ci_high, 2) + "]</span>" + (b ? delta(r.overall, b.overall, true, function (v) { return v.toFixed(3); }) : "") + "</td>";
      SCORERS.forEach(function (s) {
        h += "<td>" + num(r["score_" + s]) + ' <span class="small muted">(' + (r["scored_" + s] === undefined ? "–" : r["scored_" + s]) + "/" + (r["of_" + s] === undefined ? "–" : r["of_" + s]) + ")</span>" +
          (b ? delta(r["score_" + s], b["score_" + s], true, function (v) { return v.toFixed(3); }) : "") + "</td>";
      });
      h += "<td>" + pct(r.pass_rate) + (b ? delta(r.pass_rate, b.pass_rate, true, pct) : "") + "</td>";
      h += "<td>" + num(r.pass_hat_k, 2) + (isNum(r.k) ? ' <span class="small muted">k=' + r.k + "</span>" : "") + "</td>";
      h += "<td>" + usd(r.avg_cost_usd) + ' <span class="small muted">(' + pct(r.cost_coverage) + ")</span>" + (b && r.cost_coverage >= 1 && b.cost_coverage >= 1 ? delta(r.avg_cost_usd, b.avg_cost_usd, false, usd) : "") +
        (r.cost_unknown ? '<br><span class="small muted">unknown: ' + esc(r.cost_unknown) + "</span>" : "") + "</td>";
      h += "<td>" + secs(r.avg_duration_seconds) + (b ? delta(r.avg_duration_seconds, b.avg_duration_seconds, false, secs) : "") + "</td>";
      h += "<td>" + esc(r.trials_succeeded) + "/" + esc(r.trials) + "</td>";
      if (runDelta) {
        h += "<td>" + (isNum(r.delta_overall) ? delta(r.delta_overall, 0, true, function (v) { return v.toFixed(3); }) : "–") + "</td>";
        h += "<td>" + (isNum(r.delta_avg_cost_usd) ? delta(r.delta_avg_cost_usd, 0, false, usd) : "–") + "</td>";
      }
      h += "</tr>";
    });
    return h + "</tbody></table>";
  }

  // ------------------------------------------------------------------ regressions
  function regressions() {
    var h = "<h2>Regressions</h2>";
    if (!D.regressions.length) {
      return h + '<p class="muted" id="regressions">' + (D.meta.baseline_run && D.meta.baseline_run !== "none" ? "No metric against the baseline run " + esc(D.meta.baseline_run) + " was checked." : "No baseline run pinned for this suite: nothing to compare (bench baseline set SUITE RUN).") + "</p>";
    }
    var bad = D.regressions.filter(function (r) { return r.regressed; });
    h += '<p id="regressions">' + (bad.length ? '<b class="worse">' + bad.length + " regression(s)</b>" : '<span class="better">no regression</span>') + " against " + esc(D.meta.baseline_run) + "</p>";
    h += "<table><tr><th class=t>config</th><th class=t>metric</th><th>baseline</th><th>current</th><th>tolerance</th><th class=t>regressed</th><th class=t>note</th></tr>";
    D.regressions.forEach(function (r) {
      h += "<tr><td class=t>" + esc(r.config_id) + "</td><td class=t>" + esc(r.metric) + "</td><td>" + num(r.baseline, 4) + "</td><td>" + num(r.current, 4) + "</td><td>" + num(r.tolerance, 3) +
        '</td><td class="t ' + (r.regressed ? "worse" : "") + '">' + (r.regressed ? "yes" : "no") + '</td><td class="t wrap">' + esc(r.note || "") + "</td></tr>";
    });
    return h + "</table>";
  }

  // ------------------------------------------------------------------ grid
  function cellState(g) {
    var ts = (g.trial_ids || []).map(function (t) { return D.trials[t]; }).filter(Boolean);
    var c = { passed: 0, failed: 0, unscored: 0, infra: 0 };
    ts.forEach(function (t) { c[t.state] = (c[t.state] || 0) + 1; });
    var state = c.passed && c.failed ? "mixed" : c.failed ? "failed" : c.passed ? "passed" : c.infra ? "infra" : "unscored";
    var why = [];
    ts.forEach(function (t) {
      if (t.state === "unscored" || t.state === "infra") {
        var r = (t.scores.filter(function (s) { return s.status !== "scored"; })[0] || {}).reason || t.error || t.outcome;
        if (why.indexOf(r) < 0) why.push(r);
      }
    });
    return { state: state, counts: c, trials: ts, why: why };
  }
  var STATE_TEXT = { passed: "passed", failed: "failed", mixed: "mixed", unscored: "not scored", infra: "infrastructure" };
  function filters() {
    return '<div class="filters" id="filters"><label><input type="checkbox" id="f-failures"' + (S.failuresOnly ? " checked" : "") + "> failures only</label>" +
      '<label>tag <select id="f-tag"><option value="">all</option>' + TAGS.map(function (t) { return '<option value="' + esc(t) + '"' + (S.tag === t ? " selected" : "") + ">" + esc(t) + "</option>"; }).join("") + "</select></label>" +
      '<label>config <select id="f-config"><option value="">all</option>' + configIds().map(function (t) { return '<option value="' + esc(t) + '"' + (S.config === t ? " selected" : "") + ">" + esc(t) + "</option>"; }).join("") + "</select></label>" +
      '<label>holdouts <select id="f-holdout"><option value="all">included</option><option value="only"' + (S.holdout === "only" ? " selected" : "") + '>only holdouts</option><option value="exclude"' + (S.holdout === "exclude" ? " selected" : "") + ">excluded</option></select></label></div>";
  }
  function gridSection() {
    return "<h2>Task × configuration</h2>" + filters() +
      '<p class="legend small"><span class="passed-l" style="background:#dafbe1">passed</span><span style="background:#ffd8d3">failed</span><span style="background:#fff1c2">mixed</span>' +
      '<span style="background:repeating-linear-gradient(45deg,#eef1f4,#eef1f4 5px,#fff 5px,#fff 10px)"><i>not scored</i></span><span style="background:#ddd6fe">infrastructure</span> ' +
      "Cells: repetitions passed / scored (of all) · mean overall. Click a cell for its trials.</p>" +
      '<div class="gridwrap" id="gridwrap"></div><div id="cell-panel"></div><div id="trial-panel"></div>';
  }
  function drawGrid() {
    var tag = S.tab || S.tag;
    var configs = configIds().filter(function (c) { return !S.config || c === S.config; });
    var byKey = {};
    D.grid.forEach(function (g) { byKey[g.task_id + "\u0000" + g.config_id] = g; });
    var tasks = [];
    D.grid.forEach(function (g) { if (tasks.indexOf(g.task_id) < 0) tasks.push(g.task_id); });
    tasks.sort();
    var h = '<table class="grid" id="grid"><thead><tr><th class=t>task</th>' + configs.map(function (c) { return "<th>" + esc(c) + "</th>"; }).join("") + "</tr></thead><tbody>";
    tasks.forEach(function (task) {
      if (tag && taskTags(task).indexOf(tag) < 0) return;
      if (S.holdout === "only" && !isHoldout(task)) return;
      if (S.holdout === "exclude" && isHoldout(task)) return;
      var cells = [], shown = 0;
      configs.forEach(function (c) {
        var g = byKey[task + "\u0000" + c];
        if (!g) { cells.push('<td class="empty">–</td>'); return; }
        var st = cellState(g);
        var hide = S.failuresOnly && (st.state === "passed" || st.state === "unscored");
        if (hide) { cells.push('<td class="empty hidden-cell" data-hidden="1"></td>'); return; }
        shown++;
        var scored = st.counts.passed + st.counts.failed;
        var text = scored ? st.counts.passed + "/" + scored + (scored < g.reps ? " (of " + g.reps + ")" : "") + (isNum(g.overall) ? " · " + g.overall.toFixed(2) : "") : STATE_TEXT[st.state];
        var title = STATE_TEXT[st.state] + (st.why.length ? ": " + st.why.join("; ") : "");
        var sel = S.cell && S.cell[0] === task && S.cell[1] === c ? " sel" : "";
        cells.push('<td class="cell ' + st.state + sel + '" data-state="' + st.state + '" data-task="' + esc(task) + '" data-config="' + esc(c) + '" title="' + esc(title) + '">' + esc(text) +
          (st.state === "unscored" || st.state === "infra" ? '<br><span class="small">' + esc((st.why[0] || "").slice(0, 40)) + "</span>" : "") + "</td>");
      });
      if (S.failuresOnly && !shown) return;
      var t = D.tasks[task] || {};
      h += '<tr><td class=t title="' + esc(t.title || "") + '">' + esc(task) + (isHoldout(task) ? ' <span class="badge">holdout</span>' : "") + (t.is_text ? ' <span class="badge">text</span>' : "") + "</td>" + cells.join("") + "</tr>";
    });
    el("gridwrap").innerHTML = h + "</tbody></table>";
  }

  function drawCell() {
    var p = el("cell-panel");
    if (!S.cell) { p.innerHTML = ""; return; }
    var g = null;
    D.grid.forEach(function (x) { if (x.task_id === S.cell[0] && x.config_id === S.cell[1]) g = x; });
    if (!g) { p.innerHTML = ""; return; }
    var st = cellState(g);
    var h = '<div class="panel" id="cell-trials"><h3>' + esc(g.task_id + " × " + g.config_id) + ' — <span class="badge ' + esc(st.state) + '">' + STATE_TEXT[st.state] + "</span></h3>";
    if (st.why.length) h += '<div class="note">Not scored / infrastructure: ' + esc(st.why.join("; ")) + "</div>";
    h += "<table><tr><th>rep</th><th class=t>outcome</th><th class=t>state</th><th>overall</th><th>cost</th><th>duration</th><th class=t>primary reason</th></tr>";
    st.trials.forEach(function (t) {
      var reason = (t.scores[0] || {}).reason || t.error || "";
      h += '<tr class="trialrow" data-trial="' + esc(t.trial_id) + '"><td>' + esc(t.repetition) + "</td><td class=t>" + esc(t.outcome) + '</td><td class=t><span class="badge ' + esc(t.state) + '">' + STATE_TEXT[t.state] +
        "</span></td><td>" + num(t.overall, 2) + "</td><td>" + usd(t.cost_usd) + "</td><td>" + secs(t.duration_seconds) + '</td><td class="t wrap">' + esc(reason.slice(0, 200)) + "</td></tr>";
    });
    p.innerHTML = h + '</table><p class="small muted">Click a repetition to open the trial.</p></div>';
  }

  // ------------------------------------------------------------------ trial view
  function diffHtml(text) {
    return '<pre class="diff" id="trial-diff">' + text.split("\n").map(function (l) {
      var c = l.indexOf("+++") === 0 || l.indexOf("---") === 0 || l.indexOf("diff ") === 0 ? "file" : l[0] === "+" ? "add" : l[0] === "-" ? "del" : l.indexOf("@@") === 0 ? "hunk" : "";
      return '<span class="' + c + '">' + (esc(l) || " ") + "</span>";
    }).join("") + "</pre>";
  }
  function usageText(u) {
    if (!u) return "";
    var parts = [];
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"].forEach(function (k) { if (isNum(u[k]) && u[k]) parts.push(k.replace("_tokens", "") + " " + u[k]); });
    parts.push("cost " + (isNum(u.cost_usd) ? usd(u.cost_usd) : "unknown" + (u.cost_unknown_reason ? " (" + u.cost_unknown_reason + ")" : "")));
    return parts.join(" · ");
  }
  function contentText(content) {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return JSON.stringify(content, null, 1);
    return content.map(function (b) {
      if (b.type === "text") return b.text;
      if (b.type === "tool_use") return "[tool_use " + b.name + "] " + JSON.stringify(b.input);
      if (b.type === "thinking") return "[thinking] " + (b.thinking || "");
      return JSON.stringify(b);
    }).join("\n");
  }
  function eventHtml(e) {
    var kind = e.event, cls = "", body = "", head = esc(kind) + (e.attempt ? " · attempt " + e.attempt : "");
    if (kind === "model_request" || kind === "chat_request") {
      cls = "model"; head += (e.call ? " · call " + e.call : "") + (e.turn ? " · turn " + e.turn : "") + (e.model ? " · " + esc(e.model) : "") + (isNum(e.message_count) ? " · " + e.message_count + " messages" : "");
      body = e.last_user || e.user || "";
    } else if (kind === "model_response" || kind === "chat_response") {
      cls = "model"; head += (e.call ? " · call " + e.call : "") + (e.turn ? " · turn " + e.turn : "") + (e.stop_reason ? " · " + esc(e.stop_reason) : "") + (isNum(e.latency_ms) ? " · " + e.latency_ms + " ms" : "") +
        ' · <span class="tokens">' + esc(usageText(e.usage)) + "</span>";
      body = e.content !== undefined ? contentText(e.content) : e.body !== undefined ? contentText(((e.body.choices || [])[0] || {}).message ? e.body.choices[0].message.content : e.body) : "";
    } else if (kind === "tool_call") {
      cls = "tool"; head += " · " + esc(e.name); body = JSON.stringify(e.input, null, 1);
    } else if (kind === "tool_result") {
      cls = e.is_error ? "err" : "result"; head += " · " + esc(e.name) + (e.is_error ? " · error" : ""); body = e.content;
    } else if (kind === "attempt_start" || kind === "findings") {
      body = e.prompt || "";
    } else {
      var rest = {};
      Object.keys(e).forEach(function (k) { if (k !== "event" && k !== "ts" && k !== "attempt") rest[k] = e[k]; });
      if (e.usage) head += ' · <span class="tokens">' + esc(usageText(e.usage)) + "</span>";
      if (kind.indexOf("error") >= 0 || e.error) cls = "err";
      body = Object.keys(rest).length ? JSON.stringify(rest, null, 1) : "";
    }
    return '<div class="ev ' + cls + '"><div class="small"><b>' + head + "</b></div>" + (body ? "<pre>" + esc(typeof body === "string" ? body : JSON.stringify(body)) + "</pre>" : "") + "</div>";
  }
  function turnsHtml(t, ev) {
    var details = null;
    t.scores.forEach(function (s) { if (s.scorer === "assert" && s.details && s.details.turns) details = s.details.turns; });
    var turns = ev.turns || [];
    if (!turns.length && !details) return "";
    var n = Math.max(turns.length, details ? details.length : 0), h = '<h3>Turns</h3><div id="trial-turns">';
    for (var i = 0; i < n; i++) {
      var rec = turns[i] || {}, d = details ? details[i] || {} : {};
      h += '<div class="panel turn" data-turn="' + (i + 1) + '"><b>Turn ' + (i + 1) + "</b>" + (d.status ? ' <span class="badge ' + (d.passed ? "passed" : "failed") + '">' + esc(d.status) + "</span>" : "") +
        (isNum(rec.latency_ms) ? ' <span class="small muted">' + rec.latency_ms + " ms</span>" : "") + (isNum(rec.completion_tokens) ? ' <span class="small muted">' + rec.completion_tokens + " completion tokens</span>" : "") +
        (isNum(rec.cost_usd) ? ' <span class="small muted">' + usd(rec.cost_usd) + "</span>" : "") +
        '<div class="small muted">user</div><pre>' + esc(rec.user || d.user || "") + '</pre><div class="small muted">answer' + (rec.response_cut ? " (cut at " + D.caps.turn_chars + " characters)" : "") +
        '</div><pre class="answer">' + esc(rec.response === undefined || rec.response === null ? "(no answer recorded)" : rec.response) + "</pre>";
      if (d.asserts && d.asserts.length) {
        h += '<table class="asserts"><tr><th class=t>assertion</th><th class=t>value</th><th class=t>status</th><th class=t>reason</th></tr>' + d.asserts.map(function (a) {
          return "<tr><td class=t>" + esc(a.type) + '</td><td class="t wrap">' + esc(JSON.stringify(a.value)) + '</td><td class="t ' + (a.status === "passed" ? "better" : "worse") + '">' + esc(a.status) + '</td><td class="t wrap">' + esc(a.reason || "") + "</td></tr>";
        }).join("") + "</table>";
      } else if (d.reason) h += '<div class="small">' + esc(d.reason) + "</div>";
      h += "</div>";
    }
    return h + "</div>";
  }
  function drawTrial() {
    var p = el("trial-panel");
    var t = S.trial ? D.trials[S.trial] : null;
    if (!t) { p.innerHTML = ""; return; }
    var ev = D.evidence[S.trial] || {};
    var h = '<div class="panel" id="trial-view"><h3>Trial ' + esc(t.trial_id) + ' <span class="badge ' + esc(t.state) + '">' + STATE_TEXT[t.state] + "</span></h3>";
    h += '<table class="trial-facts"><tr><th class=t>outcome</th><td class=t>' + esc(t.outcome) + (t.error ? " — " + esc(t.error) : "") + "</td></tr>" +
      '<tr><th class=t>cost</th><td class="t" id="trial-cost">' + (isNum(t.cost_usd) ? usd(t.cost_usd) : "unknown" + (t.cost_unknown_reason ? " (" + esc(t.cost_unknown_reason) + ")" : "")) + "</td></tr>" +
      "<tr><th class=t>tokens</th><td class=t>" + esc(["input", "output", "cache_read", "cache_write"].map(function (k) { return k + " " + (isNum(t[k + "_tokens"]) ? t[k + "_tokens"] : "unknown"); }).join(" · ")) + "</td></tr>" +
      "<tr><th class=t>duration</th><td class=t>" + secs(t.duration_seconds) + " (agent " + secs(t.agent_seconds) + ", grading " + secs(t.grading_seconds) + ")</td></tr>" +
      "<tr><th class=t>overall</th><td class=t>" + num(t.overall) + "</td></tr><tr><th class=t>evidence</th><td class=t>" + esc(t.evidence_dir || "") + "</td></tr></table>";
    if (ev.missing || ev.omitted) h += '<div class="note">' + esc(ev.missing || ev.omitted) + "</div>";
    h += '<h3>Scores</h3><table id="trial-scores"><tr><th class=t>scorer</th><th class=t>status</th><th>value</th><th class=t>reason</th><th class=t>rationale / details</th></tr>';
    t.scores.forEach(function (s) {
      var d = s.details || {}, rationale = d.rationale || d.explanation || (d.criteria ? JSON.stringify(d.criteria) : "");
      if (Array.isArray(d.task_criteria)) {
        // The judge's verdict and reason per criterion (llm_judge:correctness).
        rationale = d.task_criteria.map(function (v) { return "criterion " + v.index + ": " + v.verdict + (v.reason ? " — " + v.reason : ""); }).join("\n");
      }
      if (d.judge_model) rationale = (rationale ? rationale + "\n" : "") + "judge " + d.judge_model + (d.judge_grades_itself ? " (grades its own answers)" : "");
      if (!rationale && s.scorer !== "assert" && s.scorer !== "checks" && Object.keys(d).length) rationale = JSON.stringify(d);
      h += "<tr><td class=t>" + esc(s.scorer) + "</td><td class=t>" + esc(s.status) + "</td><td>" + num(s.value, 3) + '</td><td class="t wrap">' + esc(s.reason || "") + '</td><td class="t wrap">' + esc(String(rationale).slice(0, 4000)).replace(/\n/g, "<br>") + "</td></tr>";
    });
    h += "</table>";
    var tests = [];
    t.scores.forEach(function (s) { if (s.details && Array.isArray(s.details.tests)) tests = tests.concat(s.details.tests); });
    if (tests.length) {
      h += "<h3>Tests</h3><table><tr><th class=t>test</th><th class=t>status</th></tr>" + tests.slice(0, 500).map(function (x) { return "<tr><td class=t>" + esc(x.id || x.name || JSON.stringify(x)) + "</td><td class=t>" + esc(x.status || x.outcome || "") + "</td></tr>"; }).join("") + "</table>";
    }
    if (ev.checks && ev.checks.length) {
      h += '<h3>Checks</h3><div id="trial-checks">';
      ev.checks.forEach(function (c) {
        h += '<div class="panel check" data-check="' + esc(c.id) + '"><b>' + esc(c.id) + "</b> " + esc(c.description || "") + ' — <span class="' + (c.status === "passed" ? "better" : "worse") + '">' + esc(c.status) + "</span>" +
          ' · <span class="exit-code">exit code ' + esc(c.exit_code === null || c.exit_code === undefined ? "none" : c.exit_code) + "</span>" + (c.timed_out ? " · timed out" : "") + (isNum(c.duration_seconds) ? " · " + secs(c.duration_seconds) : "") +
          '<div class="small muted">command</div><pre class="command">' + esc(c.command ? c.command.join(" ") : "(not recorded)") + "</pre>" +
          '<div class="small muted">output' + (c.output_cut ? " (cut at " + D.caps.check_output_chars + " characters)" : "") + '</div><pre class="check-output">' + esc(c.output || "(no output)") + "</pre></div>";
      });
      h += "</div>";
    }
    h += turnsHtml(t, ev);
    var textTask = (D.tasks[t.task_id] || {}).is_text;
    if (ev.diff !== undefined && !(textTask && !ev.diff)) {
      h += "<h3>Diff" + (ev.diff_cut ? ' <span class="small muted">(cut at ' + D.caps.diff_chars + " characters)</span>" : "") + "</h3>" + (ev.diff ? diffHtml(ev.diff) : '<p class="muted" id="trial-diff">no change (empty diff)</p>');
    }
    if (ev.events) {
      h += "<h3>Transcript <span class=\"small muted\">" + ev.events.length + " of " + ev.events_total + " events" + (ev.events.length < ev.events_total ? " (cut at " + D.caps.events + ")" : "") + '</span></h3><div id="trial-transcript">' + ev.events.map(eventHtml).join("") + "</div>";
    }
    p.innerHTML = h + "</div>";
  }

  // ------------------------------------------------------------------ paired comparisons, turns
  function paired() {
    var h = "<h2>Paired comparisons</h2>";
    if (!D.paired.length) return h + '<p class="muted" id="paired">No pair: the run has one configuration or no baseline configuration.</p>';
    h += '<p class="small muted">Each candidate against the baseline on the same task and repetition; infrastructure and unscored pairs are left out; holdout pairs are counted apart.</p>';
    h += '<table id="paired"><tr><th class=t>candidate vs baseline</th><th>pairs</th><th>both pass</th><th>candidate only</th><th>baseline only</th><th>neither</th><th>left out (infra / unscored)</th><th>holdout pairs (cand. only / base only)</th><th>sign test W/L/T</th><th>p</th><th>Δ cost / trial</th><th>Δ time / trial</th></tr>';
    D.paired.forEach(function (r) {
      h += "<tr><td class=t><b>" + esc(r.candidate_config) + "</b> vs " + esc(r.baseline_config) + (r.baseline_run_id && r.baseline_run_id !== r.candidate_run_id ? ' <span class="small muted">(' + esc(r.baseline_run_id) + ")</span>" : "") + "</td><td>" + esc(r.pairs) + "</td><td>" + esc(r.both_pass) +
        '</td><td class="better">' + esc(r.candidate_only) + '</td><td class="worse">' + esc(r.baseline_only) + "</td><td>" + esc(r.neither) + "</td><td>" + esc(r.infra_excluded) + " / " + esc(r.unscored_excluded) +
        "</td><td>" + esc(r.holdout_pairs) + " (" + esc(r.holdout_candidate_only) + " / " + esc(r.holdout_baseline_only) + ")</td><td>" + esc(r.sign_wins) + "/" + esc(r.sign_losses) + "/" + esc(r.sign_ties) + "</td><td>" + num(r.sign_test_p, 3) +
        "</td><td>" + (isNum(r.cost_delta_mean_usd) ? delta(r.cost_delta_mean_usd, 0, false, usd) : "unknown") + "</td><td>" + (isNum(r.duration_delta_mean_seconds) ? delta(r.duration_delta_mean_seconds, 0, false, secs) : "–") + "</td></tr>";
    });
    return h + "</table>";
  }
  function scenarioTurns() {
    if (!D.scenario_turns.length) return "";
    var h = '<h2>Text tasks: per turn</h2><p class="small muted">A turn passes only when it passed in every repetition (pass^N). Open a cell above for each answer and its assertions.</p><table id="scenario-turns"><tr><th class=t>task</th><th class=t>config</th><th>turn</th><th>repetitions</th><th>passes</th><th class=t>passed</th><th>pass rate</th></tr>';
    D.scenario_turns.forEach(function (r) {
      h += "<tr><td class=t>" + esc(r.task_id) + "</td><td class=t>" + esc(r.config_id) + "</td><td>" + esc(r.turn) + "</td><td>" + esc(r.repetitions) + "</td><td>" + esc(r.passes) + '</td><td class="t ' + (r.passed ? "better" : "worse") + '">' + (r.passed ? "yes" : "no") + "</td><td>" + pct(r.pass_rate) + "</td></tr>";
    });
    return h + "</table>";
  }
  function capsNote() {
    var c = D.caps;
    if (!c || !c.diff_chars) return "";
    return '<p class="small muted" id="caps">Evidence is bounded so the page stays small: diffs cut at ' + c.diff_chars + " characters, check output at " + c.check_output_chars + ", transcripts at " + c.events +
      " events (" + c.event_field_chars + " characters a field), answers at " + c.turn_chars + ", " + c.total_chars + " characters in all; each cut is marked, and the whole evidence stays in the trial's folder.</p>";
  }

  // ------------------------------------------------------------------ wiring
  function render() {
    document.getElementById("app").innerHTML = header() + tabs() + recommendations() + chartSection() + configTable() + regressions() + gridSection() + paired() + scenarioTurns() + capsNote();
    drawChart(); drawGrid(); drawCell(); drawTrial();
  }
  document.addEventListener("change", function (e) {
    var id = e.target.id;
    if (id === "x-axis") { S.x = e.target.value; drawChart(); }
    else if (id === "y-axis") { S.y = e.target.value; drawChart(); }
    else if (id === "f-failures") { S.failuresOnly = e.target.checked; drawGrid(); }
    else if (id === "f-tag") { S.tag = e.target.value; drawGrid(); }
    else if (id === "f-config") { S.config = e.target.value; drawGrid(); }
    else if (id === "f-holdout") { S.holdout = e.target.value; drawGrid(); }
  });
  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target : e.target.parentNode;
    var tab = t.closest("[data-tab]");
    if (tab && tab.parentNode.id === "tabs") { S.tab = tab.getAttribute("data-tab"); S.cell = null; S.trial = null; render(); return; }
    var cell = t.closest("td.cell");
    if (cell) { S.cell = [cell.getAttribute("data-task"), cell.getAttribute("data-config")]; S.trial = null; drawGrid(); drawCell(); drawTrial(); el("cell-panel").scrollIntoView(); return; }
    var row = t.closest("tr.trialrow");
    if (row) { S.trial = row.getAttribute("data-trial"); drawTrial(); el("trial-panel").scrollIntoView(); }
  });
  if (!D.frontiers[S.x + "|" + S.y] && D.axes.length > 1) { S.x = D.axes[D.axes.length - 1].column; S.y = D.axes[0].column; }
  // Cost unknown for every config (e.g. a model without a price): open on time instead.
  if (!(D.frontiers[S.x + "|" + S.y] || []).some(function (r) { return !r.excluded_reason; }) && D.frontiers["avg_duration_seconds|" + S.y]) S.x = "avg_duration_seconds";
  render();
})();
