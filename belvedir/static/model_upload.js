// The Models page's upload: a progress bar while the adapter zip streams up (htmx posts the
// form with XMLHttpRequest and reports its upload progress as htmx:xhr:progress).
(function () {
  "use strict";

  function parts(form) {
    var bar = document.getElementById(form.getAttribute("data-upload-progress"));
    var text = document.getElementById(bar ? bar.id + "-text" : "");
    return { bar: bar, text: text };
  }

  document.addEventListener("htmx:xhr:progress", function (event) {
    var form = event.target.closest && event.target.closest("form[data-upload-progress]");
    if (!form || !event.detail.lengthComputable) return;
    var p = parts(form);
    if (!p.bar) return;
    var percent = Math.floor((event.detail.loaded / event.detail.total) * 100);
    p.bar.hidden = false;
    p.bar.value = percent;
    if (p.text) {
      p.text.textContent =
        percent < 100 ? "Uploading… " + percent + "%" : "Uploaded; checking the zip…";
    }
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.target.closest && event.target.closest("form[data-upload-progress]");
    if (!form) return;
    var p = parts(form);
    if (p.bar) {
      p.bar.hidden = false;
      p.bar.value = 0;
    }
    if (p.text) p.text.textContent = "Uploading… 0%";
  });
})();
