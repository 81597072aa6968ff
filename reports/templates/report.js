(function () {
  "use strict";
  var PAGE = 100;
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var S = D.strings, ORDER = D.order, COLOURS = D.colours, SHORT = D.short;
  function str(i) { return i == null ? null : S[i]; }
  // shlex.quote, as the suites quote the test id in a repro command
  function shq(x) { return x === "" ? "''" : /[^\w@%+=:,.\/-]/.test(x) ? "'" + x.replace(/'/g, "'\"'\"'") + "'" : x; }
  var NCORE = D.core.length;
  var records = D.rows.map(function (row, i) {
    var r = {_i: i};
    D.core.forEach(function (k, j) { r[k] = str(row[1 + j]); });
    var tid = row[0];
    r.test_id = tid.charAt(0) === "[" ? "suites/" + r.suite + ".py::" + r.test + tid : tid;
    r.check = str(row[NCORE + 1]);
    r.reason = str(row[NCORE + 2]);
    var tail = str(row[NCORE + 3]);
    r.cause = row[NCORE + 4] == null ? "" : D.causes[row[NCORE + 4]][0];
    r.duration_s = row[NCORE + 5];
    var extra = row[NCORE + 6] || {};
    Object.keys(extra).forEach(function (k) { r[k] = extra[k]; });
    if (tail != null) r.repro = "pytest " + shq(r.test_id) + tail;
    var blob = tail != null && !r.replay && /@?reproduce_failure\(\s*(['"])([\w.+-]+)\1\s*,\s*b(['"])([^'"]*)\3\s*\)/.exec(r.reproduce_failure || "");
    if (blob) r.replay = r.repro + " --reproduce-failure " + shq(blob[2] + ":" + blob[4]);
    if (r.errors) r.errors = r.errors.map(function (e) { return {output: str(e[0]), max_abs_error: e[1], bound: str(e[2]), ratio: e[3]}; });
    return r;
  });
  var causeLabel = {};
  D.causes.forEach(function (c) { causeLabel[c[0]] = c[1] + ": " + c[2] + (c[3] ? ": " + c[3] : ""); });
  // How far out of bounds a check's worst output was (|error| / bound), or -1 unmeasured.
  function ratioOf(r) {
    if (r._ratio !== undefined) return r._ratio;
    var best = -1;
    (r.errors || []).forEach(function (e) {
      if (e.ratio == null) return;
      var v = e.ratio === "inf" ? Infinity : Number(e.ratio);
      if (v > best) best = v;
    });
    r._ratio = best;
    return best;
  }
  function rank(s) { var i = ORDER.indexOf(s); return i < 0 ? ORDER.length : i; }  // unknown: most severe
  // Most severe first, then the furthest out of bounds, then by test id: what needs
  // review comes first.
  records.forEach(function (r) { r._rank = rank(r.status); });
  records.sort(function (a, b) {
    return (b._rank - a._rank) || (ratioOf(b) - ratioOf(a)) || (a.test_id < b.test_id ? -1 : a.test_id > b.test_id ? 1 : 0);
  });
  var byIndex = [];
  records.forEach(function (r) { byIndex[r._i] = r; });
  var fields = ["status", "vendor", "profile", "mode", "op", "impl", "dtype", "suite", "check", "cause"];
  var AXES = ["op", "suite", "check", "profile"];  // the matrix's own: a cell click sets them
  var selects = {};
  fields.forEach(function (f) {
    var sel = document.getElementById("filter-" + f);
    selects[f] = sel;
    var values = {};
    records.forEach(function (r) { if (r[f] != null && r[f] !== "") values[r[f]] = (values[r[f]] || 0) + 1; });
    var keys = Object.keys(values);
    if (f === "cause") keys.sort(function (a, b) { return values[b] - values[a]; }); else keys.sort();
    keys.forEach(function (v) {
      var o = document.createElement("option");
      o.value = v; o.textContent = (f === "cause" ? (causeLabel[v] || v).slice(0, 90) : v) + " (" + values[v] + ")";
      sel.appendChild(o);
    });
    sel.addEventListener("change", function () { page = 0; apply(true); });
  });
  var text = document.getElementById("filter-text");
  text.addEventListener("input", function () { page = 0; apply(true); });
  var tbody = document.querySelector("#records tbody");
  var shown = document.getElementById("shown-count");
  var page = 0, matching = records, openDetails = false, matrixAll = false;

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { if (k === "text") e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function badge(status, label) { return el("span", {"class": "badge s-" + status, text: label}); }
  function safeLink(url) { return /^https?:\/\//i.test(String(url)); }  // never javascript: or data:

  var compileIndex = null;  // record index -> its compile-stat rows, built on first use
  function compileRows(r) {
    if (!compileIndex) {
      compileIndex = {};
      Object.keys(D.compile).forEach(function (p) {
        var t = D.compile[p];
        t.rows.forEach(function (row) { (compileIndex[row[0]] = compileIndex[row[0]] || []).push(statsOf(t, row)); });
      });
    }
    return compileIndex[r._i] || [];
  }
  function statsOf(t, row) {
    var o = {};
    t.columns.forEach(function (c, j) { var v = t.text[j] ? str(row[j + 1]) : row[j + 1]; if (v != null) o[c] = v; });
    return o;
  }
  var HANDLED = {_i: 1, _rank: 1, _ratio: 1, test_id: 1, status: 1, op: 1, impl: 1, profile: 1, vendor: 1, mode: 1, dtype: 1, suite: 1, test: 1, check: 1, cause: 1,
                 reason: 1, shape: 1, errors: 1, repro: 1, replay: 1, reproduce_failure: 1, example: 1, quality_warnings: 1, expectation: 1, properties: 1, duration_s: 1,
                 message: 1, traceback: 1};
  function detail(r) {
    var box = el("div");
    box.appendChild(el("div", {}, [el("b", {text: "test id: "}), el("code", {text: r.test_id})]));
    if (r.reason) box.appendChild(el("div", {}, [el("b", {text: "reason: "}), el("span", {text: r.reason})]));
    if (r.message) box.appendChild(el("div", {}, [el("b", {text: "message:"}), el("pre", {"class": "message", text: String(r.message)})]));
    if (r.traceback) box.appendChild(el("div", {}, [el("b", {text: "traceback (last frames):"}), el("pre", {"class": "traceback", text: Array.isArray(r.traceback) ? r.traceback.join("\n") : String(r.traceback)})]));
    if (r.shape) box.appendChild(el("div", {}, [el("b", {text: "failing shape: "}), el("code", {text: r.shape})]));
    if (r.errors && r.errors.length) {
      var t = el("table", {"class": "errors"}, [el("tr", {}, [el("th", {text: "output"}), el("th", {text: "max abs error"}), el("th", {text: "bound"}), el("th", {text: "error / bound"})])]);
      r.errors.forEach(function (e) { t.appendChild(el("tr", {}, [el("td", {text: e.output}), el("td", {text: String(e.max_abs_error)}), el("td", {text: String(e.bound)}), el("td", {"class": "ratio", text: e.ratio == null ? "" : e.ratio === "inf" ? "inf" : Number(e.ratio).toPrecision(3) + "x"})])); });
      box.appendChild(t);
    }
    if (r.repro) box.appendChild(el("div", {}, [el("b", {text: "reproduce:"}), el("pre", {"class": "repro", text: r.repro})]));
    if (r.replay) box.appendChild(el("div", {}, [el("b", {text: "replay exactly this failing example (" + r.reproduce_failure + "):"}), el("pre", {"class": "replay", text: r.replay})]));
    if (r.example) box.appendChild(el("div", {}, [el("b", {text: "failing example:"}), el("pre", {"class": "example", text: r.example})]));
    (r.quality_warnings || []).forEach(function (q) { box.appendChild(el("div", {text: "quality warning: " + q})); });
    if (r.expectation) {
      var x = r.expectation;
      var exp = el("div", {}, [el("b", {text: (x.known ? "known upstream defect" : "expectation") + ": "}), el("span", {text: x.status + ": " + x.reason + " "})]);
      ["finding", "repro", "source"].forEach(function (k) { if (x[k]) exp.appendChild(el("div", {}, [el("span", {text: k + ": "}), el("code", {text: String(x[k])})])); });
      if (x.link) exp.appendChild(safeLink(x.link) ? el("a", {href: x.link, rel: "noreferrer", text: x.link}) : el("span", {text: String(x.link)}));
      box.appendChild(exp);
    }
    var stats = compileRows(r);
    if (stats.length) box.appendChild(el("div", {}, [el("b", {text: "compile stats:"}), el("pre", {text: stats.map(function (s) { return JSON.stringify(s); }).join("\n")})]));
    var props = Object.keys(r.properties || {});
    if (props.length) box.appendChild(el("div", {}, [el("b", {text: "properties:"}), el("pre", {text: props.map(function (k) { return k + ": " + JSON.stringify(r.properties[k]); }).join("\n")})]));
    var other = Object.keys(r).filter(function (k) { return !HANDLED[k] && r[k] != null && r[k] !== ""; });
    if (other.length) box.appendChild(el("div", {}, [el("b", {text: "other fields:"}), el("pre", {"class": "other", text: other.map(function (k) { return k + ": " + (typeof r[k] === "string" ? r[k] : JSON.stringify(r[k])); }).join("\n")})]));
    box.appendChild(el("div", {"class": "muted", text: "duration " + r.duration_s + " s"}));
    return el("tr", {"class": "detail"}, [el("td", {colspan: "8"}, [box])]);
  }

  function row(r) {
    var tr = el("tr", {"class": "record", "data-status": r.status}, [
      el("td", {}, [badge(r.status, r.status)]), el("td", {text: r.op || ""}), el("td", {text: r.impl || ""}),
      el("td", {text: r.profile || ""}), el("td", {text: r.mode || ""}), el("td", {text: r.dtype || ""}),
      el("td", {}, [el("span", {text: (r.suite || "") + " / " + (r.test || r.test_id) + (r.check ? " [" + r.check + "]" : "")})]),
      el("td", {text: (r.reason || "").slice(0, 200)})]);
    tr.addEventListener("click", function () {
      var next = tr.nextSibling;
      if (next && next.className === "detail") { next.remove(); } else { tr.after(detail(r)); }
    });
    return tr;
  }

  function wanted() {
    var want = {};
    fields.forEach(function (f) { if (selects[f].value) want[f] = selects[f].value; });
    return want;
  }
  function matches(r, want, q, skip) {
    for (var f in want) { if (!(skip && skip[f]) && String(r[f]) !== want[f]) return false; }
    return !q || (r.test_id + " " + (r.reason || "")).toLowerCase().indexOf(q) >= 0;
  }

  function apply(updateHash) {
    var want = wanted();
    var q = text.value.trim().toLowerCase();
    matching = records.filter(function (r) { return matches(r, want, q); });
    var pages = Math.max(1, Math.ceil(matching.length / PAGE));
    page = Math.min(page, pages - 1);
    var frag = document.createDocumentFragment();
    matching.slice(page * PAGE, (page + 1) * PAGE).forEach(function (r) { frag.appendChild(row(r)); });
    tbody.replaceChildren(frag);
    if (openDetails) tbody.querySelectorAll("tr.record").forEach(function (tr) { tr.click(); });
    shown.textContent = (matching.length ? (page * PAGE + 1) + "-" + Math.min((page + 1) * PAGE, matching.length) : "0") +
      " of " + matching.length + " checks" + (matching.length !== records.length ? " (filtered from " + records.length + ")" : "") +
      ", page " + (page + 1) + " of " + pages;
    document.querySelectorAll(".prev").forEach(function (b) { b.disabled = page === 0; });
    document.querySelectorAll(".next").forEach(function (b) { b.disabled = page >= pages - 1; });
    if (updateHash) {
      var h = Object.keys(want).map(function (k) { return k + "=" + encodeURIComponent(want[k]); });
      if (q) h.push("q=" + encodeURIComponent(q));
      history.replaceState(null, "", h.length ? "#" + h.join("&") : location.pathname + location.search);
    }
    drawMatrix(want, q);
  }

  // The status a cell reads as: its most severe, not counting not-supported checks
  // unless it holds nothing else (passes beside not-supported checks read as passed).
  function readsAs(counts) {
    var best = null;
    Object.keys(counts).forEach(function (s) {
      if (s === "not_supported") return;
      if (best === null || rank(s) > rank(best)) best = s;
    });
    return best === null ? "not_supported" : best;
  }
  var QUIET = {pass: 1, not_supported: 1};
  function drawMatrix(want, q) {
    var skip = {};
    AXES.forEach(function (a) { skip[a] = 1; });
    var cells = {}, profileSet = {}, keys = [];
    records.forEach(function (r) {
      if (!matches(r, want, q, skip)) return;
      var p = r.profile || "-", key = [r.op || "-", r.suite || "-", r.check || ""].join("\u0000");
      var row = cells[key];
      if (!row) { row = cells[key] = {}; keys.push(key); }
      var c = row[p] || (row[p] = {});
      c[r.status] = (c[r.status] || 0) + 1;
      profileSet[p] = 1;
    });
    keys.sort();
    var profiles = Object.keys(profileSet).sort();
    var withParams = keys.some(function (k) { return k.split("\u0000")[2] !== ""; });
    var loud = keys.filter(function (k) {
      var row = cells[k];
      return Object.keys(row).some(function (p) { return Object.keys(row[p]).some(function (s) { return !QUIET[s]; }); });
    });
    var show = matrixAll ? keys : loud;
    var head = el("tr", {}, [el("th", {text: "op"}), el("th", {text: "suite"})].concat(withParams ? [el("th", {text: "check"})] : [])
      .concat(profiles.map(function (p) { return el("th", {text: p}); })));
    var frag = document.createDocumentFragment();
    show.forEach(function (k) {
      var parts = k.split("\u0000"), row = cells[k];
      var tds = [el("td", {text: parts[0]}), el("td", {text: parts[1]})];
      if (withParams) tds.push(el("td", {text: parts[2]}));
      profiles.forEach(function (p) {
        var c = row[p];
        if (!c) { tds.push(el("td", {"class": "muted", text: "-"})); return; }
        var as = readsAs(c);
        var order = Object.keys(c).sort(function (a, b) { return rank(b) - rank(a); });
        var td = el("td", {"class": "cell s-" + as, "data-op": parts[0], "data-suite": parts[1], "data-check": parts[2], "data-profile": p,
                           "data-reads-as": as, title: "click to list these checks"},
                    [el("span", {"class": "reads-as", text: as}), el("br"),
                     el("span", {"class": "counts", text: order.map(function (s) { return c[s] + (SHORT[s] || "?"); }).join(" ")})]);
        tds.push(td);
      });
      frag.appendChild(el("tr", {}, tds));
    });
    var table = document.getElementById("matrix");
    table.tHead.replaceChildren(head);
    table.tBodies[0].replaceChildren(frag);
    table.hidden = show.length === 0;  // no header over no rows
    document.getElementById("matrix-shown").textContent = matrixAll
      ? "All " + keys.length + " rows."
      : loud.length + " of " + keys.length + " rows hold a check that neither passed nor was not supported" +
        (loud.length < keys.length ? "; the other " + (keys.length - loud.length) + " are hidden." : ".");
    var btn = document.getElementById("matrix-all");
    btn.textContent = matrixAll ? "show only those " + loud.length : "show all " + keys.length + " rows";
    btn.hidden = loud.length === keys.length;
  }
  document.getElementById("matrix-all").addEventListener("click", function () { matrixAll = !matrixAll; apply(false); });
  document.getElementById("matrix").addEventListener("click", function (e) {
    var td = e.target.closest("td.cell");
    if (!td) return;
    AXES.forEach(function (f) { selects[f].value = ""; });
    AXES.forEach(function (f) { setSelect(f, td.getAttribute("data-" + f)); });
    page = 0; apply(true);
    document.getElementById("checks").scrollIntoView();
  });

  function setSelect(k, v) {
    if (v && ![].some.call(selects[k].options, function (o) { return o.value === v; }))
      selects[k].appendChild(el("option", {value: v, text: v + " (0)"}));
    selects[k].value = v;
  }
  // Filters can be given in the address: report.html#status=fail&op=gelu (&details=1);
  // such an address scrolls to the check list.
  function fromHash() {
    var any = false;
    fields.forEach(function (f) { selects[f].value = ""; });
    text.value = ""; openDetails = false;
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("="); if (i < 0) return;
      var k = kv.slice(0, i), v = decodeURIComponent(kv.slice(i + 1));
      if (selects[k]) { setSelect(k, v); any = true; }
      else if (k === "q") { text.value = v; any = true; }
      else if (k === "details") { openDetails = v === "1"; any = true; }  // expand every shown row
    });
    return any;
  }

  document.querySelectorAll(".prev").forEach(function (b) { b.addEventListener("click", function () { page--; apply(false); }); });
  document.querySelectorAll(".next").forEach(function (b) { b.addEventListener("click", function () { page++; apply(false); }); });
  document.getElementById("clear-filters").addEventListener("click", function () {
    fields.forEach(function (f) { selects[f].value = ""; }); text.value = ""; page = 0; apply(true);
  });
  window.addEventListener("hashchange", function () {  // a link of the failure summary
    if (fromHash()) { page = 0; apply(false); document.getElementById("checks").scrollIntoView(); }
  });

  var compileBox = document.getElementById("compile-stats");
  if (compileBox) compileBox.addEventListener("toggle", function () {
    var out = document.getElementById("compile-tables");
    if (!compileBox.open || out.childNodes.length) return;
    Object.keys(D.compile).forEach(function (p) {
      var t = D.compile[p];
      var tb = el("tbody");
      t.rows.forEach(function (row) {
        var r = byIndex[row[0]] || {};
        var stats = statsOf(t, row);
        tb.appendChild(el("tr", {}, [el("td", {text: r.op || ""}), el("td", {text: r.impl || ""}), el("td", {}, [badge(r.status, r.status)])]
          .concat(t.columns.map(function (c) { var v = stats[c]; return el("td", {text: v == null ? "" : typeof v === "string" ? v : JSON.stringify(v)}); }))));
      });
      out.appendChild(el("h3", {text: p}));
      out.appendChild(el("table", {"class": "compile-stats"}, [el("thead", {}, [el("tr", {}, [el("th", {text: "op"}), el("th", {text: "impl"}), el("th", {text: "status"})]
        .concat(t.columns.map(function (c) { return el("th", {text: c}); })))]), tb]));
    });
  });

  var scroll = fromHash();
  apply(false);
  if (scroll) document.getElementById("checks").scrollIntoView();
  document.body.setAttribute("data-ready", "1");
})();
