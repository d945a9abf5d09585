// Draws each <canvas data-score-chart="ID"> from the json_script element ID with Chart.js
// (vendor/chartjs), each point's 95% interval as an error bar, on page load and on content
// HTMX swaps in. Without scripts the page keeps the points as an open table (the intervals
// in it too); once the chart is drawn that table folds away.
(function () {
  "use strict";
  var DAY = 86400000;
  var COLORS = ["#3b5bdb", "#2b8a3e", "#e67700", "#c92a2a", "#862e9c", "#0b7285", "#5c940d", "#a61e4d"];

  function when(ms) {
    return new Date(ms).toLocaleString([], { dateStyle: "short", timeStyle: "short" });
  }

  // How the x axis reads a time, as fine as the range needs: dates over a few days, date and
  // time over hours, the time (to the second for runs minutes apart) within one morning.
  function tickFormat(range) {
    if (range > 3 * DAY) return function (ms) { return new Date(ms).toLocaleDateString(); };
    if (range > DAY / 2) return when;
    var style = range > 10 * 60000 ? "short" : "medium";
    return function (ms) { return new Date(ms).toLocaleTimeString([], { timeStyle: style }); };
  }

  // Each point's 95% interval (point.low to point.high, from the run's per-task results) as
  // a vertical bar with caps, in its series' colour; points without one have none.
  var errorBars = {
    id: "belvedirErrorBars",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      var y = chart.scales.y;
      chart.data.datasets.forEach(function (dataset, i) {
        var meta = chart.getDatasetMeta(i);
        if (meta.hidden) return;
        ctx.save();
        ctx.strokeStyle = dataset.borderColor;
        ctx.lineWidth = 1.5;
        dataset.data.forEach(function (point, j) {
          if (point.low == null || point.high == null || !meta.data[j]) return;
          var x = meta.data[j].x, top = y.getPixelForValue(point.high), bottom = y.getPixelForValue(point.low);
          ctx.beginPath();
          ctx.moveTo(x, top); ctx.lineTo(x, bottom);
          ctx.moveTo(x - 4, top); ctx.lineTo(x + 4, top);
          ctx.moveTo(x - 4, bottom); ctx.lineTo(x + 4, bottom);
          ctx.stroke();
        });
        ctx.restore();
      });
    },
  };

  function pointLabel(item) {
    var p = item.raw, text = item.dataset.label + ": " + p.y.toFixed(3);
    if (p.stderr != null) text += " ± " + p.stderr.toFixed(3) + " (95% CI " + p.low.toFixed(3) + "–" + p.high.toFixed(3) + ")";
    return text + " (" + p.run + ")";
  }

  function draw(canvas) {
    if (!window.Chart || window.Chart.getChart(canvas)) return;
    var source = document.getElementById(canvas.dataset.scoreChart);
    if (!source) return;
    var data = JSON.parse(source.textContent);
    var figure = canvas.closest("figure");
    figure.querySelector(".chart-box").hidden = false;
    var table = figure.querySelector("details.chart-data");
    if (table) table.open = false;
    var xs = [].concat.apply([], data.series.map(function (s) { return s.points.map(function (p) { return p.x; }); }));
    var range = Math.max.apply(null, xs) - Math.min.apply(null, xs);
    // Each label once: a tick that would read as the one before it shows none (Chart.js
    // places ticks at round numbers of milliseconds, several of them within one day or minute).
    var format = tickFormat(range);
    var ticks = {
      callback: function (value, index, all) {
        var label = format(value);
        return index > 0 && format(all[index - 1].value) === label ? null : label;
      },
    };
    if (range > 3 * DAY) ticks.stepSize = DAY * Math.ceil(range / DAY / 6);
    else ticks.maxTicksLimit = 6;
    new window.Chart(canvas, {
      type: "line",
      plugins: [errorBars],
      data: {
        datasets: data.series.map(function (series, i) {
          var color = COLORS[i % COLORS.length];
          return { label: series.label, data: series.points, borderColor: color, backgroundColor: color, pointRadius: 4, pointHoverRadius: 6, tension: 0 };
        }),
      },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { type: "linear", ticks: ticks },
          y: { min: 0, max: 1, title: { display: true, text: "score" } },
        },
        plugins: {
          tooltip: {
            callbacks: {
              title: function (items) { return items.length ? when(items[0].raw.x) : ""; },
              label: pointLabel,
            },
          },
        },
        onClick: function (event, elements, chart) {
          if (!elements.length) return;
          var point = chart.data.datasets[elements[0].datasetIndex].data[elements[0].index];
          window.location.href = point.url;
        },
      },
    });
  }

  function drawAll(root) {
    (root || document).querySelectorAll("canvas[data-score-chart]").forEach(draw);
  }

  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:load", function (event) { drawAll(event.target); });
})();
