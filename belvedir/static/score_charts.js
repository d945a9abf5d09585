// Draws each <canvas data-score-chart="ID"> from the json_script element ID with Chart.js
// (vendor/chartjs), on page load and on content HTMX swaps in. Without scripts the page
// keeps the points as an open table; once the chart is drawn that table folds away.
(function () {
  "use strict";
  var DAY = 86400000;
  var COLORS = ["#3b5bdb", "#2b8a3e", "#e67700", "#c92a2a", "#862e9c", "#0b7285", "#5c940d", "#a61e4d"];

  function when(ms) {
    return new Date(ms).toLocaleString([], { dateStyle: "short", timeStyle: "short" });
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
    // Day ticks on whole days for long ranges; date and time within a few days.
    var ticks = range > 3 * DAY
      ? { stepSize: DAY * Math.ceil(range / DAY / 6), callback: function (v) { return new Date(v).toLocaleDateString(); } }
      : { maxTicksLimit: 6, callback: function (v) { return when(v); } };
    new window.Chart(canvas, {
      type: "line",
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
              label: function (item) { return item.dataset.label + ": " + item.raw.y.toFixed(3) + " (" + item.raw.run + ")"; },
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
