// duetime dashboard: local-time tooltips, confirmations, select-all, and the overview's
// auto-refresh with small hand-drawn SVG charts. No framework, no build step.
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg";
  var ZONE = (Intl.DateTimeFormat().resolvedOptions().timeZone || "local time");

  // -- formatting (mirrors duetime.server.dashboard.duration) -------------------------------

  function pad2(n) { return (n < 10 ? "0" : "") + n; }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) { return "—"; }
    var s = Math.max(0, Number(seconds));
    if (s < 1) { return Math.round(s * 1000) + " ms"; }
    if (s < 60) { return s.toFixed(1) + " s"; }
    var w = Math.floor(s);
    if (w < 3600) { return Math.floor(w / 60) + "m " + pad2(w % 60) + "s"; }
    if (w < 86400) { return Math.floor(w / 3600) + "h " + pad2(Math.floor(w % 3600 / 60)) + "m"; }
    return Math.floor(w / 86400) + "d " + pad2(Math.floor(w % 86400 / 3600)) + "h";
  }

  function rate(perSecond) {
    var v = Number(perSecond) || 0;
    return v >= 1 ? v.toFixed(1) + "/s" : (v * 60).toFixed(1) + "/min";
  }

  function rfc3339(iso) {
    var d = new Date(iso);
    if (isNaN(d.getTime())) { return iso; }
    return d.toISOString().replace(/\.\d+Z$/, "Z");
  }

  function localTitle(el) {
    var d = new Date(el.getAttribute("datetime"));
    if (!isNaN(d.getTime())) {
      el.title = rfc3339(el.getAttribute("datetime")) + "\nLocal: " + d.toLocaleString() + " (" + ZONE + ")";
    }
  }

  function localTitles(root) {
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) { localTitle(times[i]); }
  }

  function timeElement(iso) {
    var t = document.createElement("time");
    t.setAttribute("datetime", iso);
    t.textContent = rfc3339(iso);
    localTitle(t);
    return t;
  }

  // -- forms -------------------------------------------------------------------------------

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var message = button && button.getAttribute("data-confirm");
    if (message && !window.confirm(message)) { event.preventDefault(); }
  });

  document.addEventListener("change", function (event) {
    var box = event.target;
    var name = box && box.getAttribute && box.getAttribute("data-select-all");
    if (!name) { return; }
    var boxes = document.querySelectorAll('input[type="checkbox"][name="' + name + '"]');
    for (var i = 0; i < boxes.length; i++) { boxes[i].checked = box.checked; }
  });

  // -- charts --------------------------------------------------------------------------------

  function node(name, attrs, text) {
    var el = document.createElementNS(SVG_NS, name);
    for (var key in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, key)) { el.setAttribute(key, attrs[key]); }
    }
    if (text !== undefined) { el.textContent = text; }
    return el;
  }

  function niceCeiling(value) {
    if (!(value > 0)) { return 1; }
    var power = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (value <= steps[i] * power) { return steps[i] * power; }
    }
    return 10 * power;
  }

  function shortNumber(v) {
    if (v >= 1000) { return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k"; }
    return String(Math.round(v * 100) / 100);
  }

  var CHARTS = {
    succeeded: { key: "succeeded", kind: "bars", css: "bar-ok", label: shortNumber, unit: "succeeded" },
    failed: { key: "failed", kind: "bars", css: "bar-bad", label: shortNumber, unit: "failed" },
    lag: { key: "lag_p95_seconds", kind: "line", label: duration, unit: "lag p95" }
  };

  function drawChart(svg, series) {
    var spec = CHARTS[svg.getAttribute("data-chart")];
    if (!spec) { return; }
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var W = 360, H = 150, left = 44, right = 8, top = 10, bottom = 22;
    var plotW = W - left - right, plotH = H - top - bottom;
    var values = series.map(function (p) { return p[spec.key]; });
    var present = values.filter(function (v) { return v !== null && v !== undefined; });
    var peak = present.length ? Math.max.apply(null, present) : 0;
    var max = niceCeiling(peak);
    var n = Math.max(values.length, 1);
    var step = plotW / n;
    var y = function (v) { return top + plotH - (v / max) * plotH; };

    [0, 0.5, 1].forEach(function (f) {
      var yy = (top + plotH - f * plotH).toFixed(1);
      svg.appendChild(node("line", { x1: left, x2: W - right, y1: yy, y2: yy, "class": f === 0 ? "axis" : "gridline" }));
      svg.appendChild(node("text", { x: left - 5, y: Number(yy) + 3, "text-anchor": "end" }, spec.label(f * max)));
    });
    var ticks = [[0, "-60m"], [Math.floor(n / 2), "-30m"], [n - 1, "now"]];
    ticks.forEach(function (t) {
      var anchor = t[0] === 0 ? "start" : (t[0] === n - 1 ? "end" : "middle");
      var x = t[0] === n - 1 ? W - right : left + t[0] * step;
      svg.appendChild(node("text", { x: x.toFixed(1), y: H - 6, "text-anchor": anchor }, t[1]));
    });

    if (!peak) {
      svg.appendChild(node("text", { x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle", "class": "empty" },
        present.length ? "nothing in the last hour" : "no attempts in the last hour"));
      return;
    }
    if (spec.kind === "bars") {
      values.forEach(function (v, i) {
        if (!v) { return; }
        var x = left + i * step + 0.5;
        var h = Math.max(1, (v / max) * plotH);
        var bar = node("rect", { x: x.toFixed(1), y: (top + plotH - h).toFixed(1), width: Math.max(1, step - 1).toFixed(1), height: h.toFixed(1), "class": spec.css });
        bar.appendChild(node("title", {}, rfc3339(series[i].at) + ": " + v + " " + spec.unit));
        svg.appendChild(bar);
      });
      return;
    }
    // a line with gaps where a minute had no attempt
    var path = "", area = "", runStart = null, prevX = null;
    values.forEach(function (v, i) {
      var x = left + i * step + step / 2;
      if (v === null || v === undefined) {
        if (runStart !== null) { area += "L" + prevX.toFixed(1) + "," + (top + plotH) + "L" + runStart.toFixed(1) + "," + (top + plotH) + "Z"; }
        runStart = null;
        return;
      }
      var cmd = runStart === null ? "M" : "L";
      if (runStart === null) { runStart = x; area += "M" + x.toFixed(1) + "," + (top + plotH); }
      path += cmd + x.toFixed(1) + "," + y(v).toFixed(1);
      area += "L" + x.toFixed(1) + "," + y(v).toFixed(1);
      prevX = x;
      var dot = node("circle", { cx: x.toFixed(1), cy: y(v).toFixed(1), r: 1.8, "class": "dot" });
      dot.appendChild(node("title", {}, rfc3339(series[i].at) + ": " + duration(v) + " " + spec.unit));
      svg.appendChild(dot);
    });
    if (runStart !== null) { area += "L" + prevX.toFixed(1) + "," + (top + plotH) + "L" + runStart.toFixed(1) + "," + (top + plotH) + "Z"; }
    svg.insertBefore(node("path", { d: area, "class": "area" }), svg.firstChild);
    svg.appendChild(node("path", { d: path, "class": "line" }));
  }

  // -- the overview ---------------------------------------------------------------------------

  function setText(selector, text) {
    var els = document.querySelectorAll(selector);
    for (var i = 0; i < els.length; i++) { els[i].textContent = text; }
  }

  function statuses() {
    var tiles = document.querySelectorAll(".tile [data-count]");
    var out = [];
    for (var i = 0; i < tiles.length; i++) { out.push(tiles[i].getAttribute("data-count")); }
    return out;
  }

  function renderQueues(byQueue, order) {
    var body = document.querySelector("[data-queues]");
    if (!body) { return; }
    var names = Object.keys(byQueue).sort();
    var rows = document.createDocumentFragment();
    names.forEach(function (queue) {
      var tr = document.createElement("tr");
      var name = document.createElement("td");
      var link = document.createElement("a");
      link.href = "/jobs?queue=" + encodeURIComponent(queue);
      link.textContent = queue;
      name.appendChild(link);
      tr.appendChild(name);
      var total = 0;
      order.forEach(function (status) {
        var n = byQueue[queue][status] || 0;
        total += n;
        var td = document.createElement("td");
        td.className = "num" + (n ? "" : " zero");
        if (n) {
          var a = document.createElement("a");
          a.href = "/jobs?queue=" + encodeURIComponent(queue) + "&status=" + encodeURIComponent(status);
          a.textContent = String(n);
          td.appendChild(a);
        } else {
          td.textContent = "0";
        }
        tr.appendChild(td);
      });
      var sum = document.createElement("td");
      sum.className = "num strong";
      sum.textContent = String(total);
      tr.appendChild(sum);
      rows.appendChild(tr);
    });
    if (!names.length) {
      var empty = document.createElement("tr");
      var td = document.createElement("td");
      td.colSpan = order.length + 2;
      td.className = "muted";
      td.textContent = "No jobs yet.";
      empty.appendChild(td);
      rows.appendChild(empty);
    }
    body.replaceChildren(rows);
  }

  function render(stats) {
    var order = statuses();
    var byStatus = stats.by_status || {};
    order.forEach(function (status) { setText('[data-count="' + status + '"]', String(byStatus[status] || 0)); });
    var alert = document.querySelector("[data-parked-alert]");
    if (alert) { alert.classList.toggle("hidden", !byStatus.parked); }
    setText('[data-kpi="overdue"]', duration(stats.oldest_overdue_seconds));
    var windows = stats.windows || {};
    Object.keys(windows).forEach(function (key) {
      var w = windows[key];
      var m = w.minutes;
      var lag = w.lag_seconds || {};
      setText('[data-kpi="lag_p50_' + m + '"]', duration(lag.p50));
      setText('[data-kpi="lag_p95_' + m + '"]', duration(lag.p95));
      setText('[data-kpi="lag_p99_' + m + '"]', duration(lag.p99));
      setText('[data-kpi="started_' + m + '"]', String(w.started));
      setText('[data-kpi="tput_' + m + '"]', rate(w.throughput_per_second));
      setText('[data-kpi="failed_' + m + '"]', String(w.failed));
      var failed = document.querySelector('[data-kpi="failed_' + m + '"]');
      if (failed) { failed.classList.toggle("bad", w.failed > 0); }
    });
    var now = document.querySelector('[data-kpi="now"]');
    if (now && stats.now) { now.replaceChildren(timeElement(stats.now)); }
    renderQueues(stats.by_queue || {}, order);
    var charts = document.querySelectorAll("svg[data-chart]");
    for (var i = 0; i < charts.length; i++) { drawChart(charts[i], stats.series || []); }
  }

  function startOverview(root) {
    var data = document.getElementById("stats-data");
    if (data) {
      try { render(JSON.parse(data.textContent)); } catch (err) { /* keep the server's figures */ }
    }
    var src = root.getAttribute("data-src");
    var every = Math.max(1, Number(root.getAttribute("data-refresh")) || 5) * 1000;
    var status = document.getElementById("refresh-status");
    function note(text, stale) {
      if (!status) { return; }
      status.textContent = text;
      status.classList.toggle("stale", !!stale);
    }
    function tick() {
      if (document.hidden) { window.setTimeout(tick, every); return; }
      fetch(src, { credentials: "same-origin", cache: "no-store", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (response.status === 401) {
            window.location.assign("/login?next=%2F");
            return null;
          }
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.json();
        })
        .then(function (stats) {
          if (stats) { render(stats); note(""); }
        })
        .catch(function (err) { note("· refresh failed (" + err.message + "); showing older figures", true); })
        .then(function () { window.setTimeout(tick, every); });
    }
    window.setTimeout(tick, every);
  }

  function start() {
    localTitles(document);
    var overview = document.getElementById("overview");
    if (overview) { startOverview(overview); }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
