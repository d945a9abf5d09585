// htmx glue for every page: refusals stay in their form, failures say so, the page survives.
(function () {
  "use strict";

  // A whole HTML document (Django's own error pages, a CSRF failure), not one of our fragments.
  function isDocument(text) {
    return /^\s*(<!doctype|<html)/i.test(text || "");
  }

  // Our refusals (400, 403, 429…) are fragments for their form or for #page-error, swapped by
  // the responseHandling in base.html. Under DEBUG (`make up`) django-htmx's debug script
  // would replace the whole document with them: stop the event before it reaches that
  // listener (on document); htmx itself goes on and swaps the fragment. Django's debug
  // pages (whole documents) still reach it.
  window.addEventListener(
    "htmx:beforeOnLoad",
    function (event) {
      var xhr = event.detail.xhr;
      if (xhr && xhr.status >= 400 && xhr.status < 500 && !isDocument(xhr.responseText)) {
        event.stopPropagation();
      }
    },
    true
  );

  // Where a problem with a request shows: at the top of its form, else the page's error box.
  function showProblem(elt, message) {
    var form = elt && elt.closest ? elt.closest("form") : null;
    if (form) {
      var box = form.querySelector(":scope > .htmx-problem");
      if (!box) {
        box = document.createElement("ul");
        box.className = "errorlist htmx-problem";
        box.setAttribute("role", "alert");
        form.insertBefore(box, form.firstChild);
      }
      box.innerHTML = "";
      var item = document.createElement("li");
      item.textContent = message;
      box.appendChild(item);
      return;
    }
    var page = document.getElementById("page-error");
    if (page) {
      page.innerHTML = '<ul class="messages"><li class="error"></li></ul>';
      page.querySelector("li").textContent = message;
      page.setAttribute("data-transient", "");
    }
  }

  // A connection problem shown in the page's box goes once a request gets through again
  // (a polling page recovers by itself when the server is back).
  document.addEventListener("htmx:afterRequest", function (event) {
    var page = document.getElementById("page-error");
    if (event.detail.successful && page && page.hasAttribute("data-transient")) {
      page.innerHTML = "";
      page.removeAttribute("data-transient");
    }
  });

  function statusText(xhr) {
    return xhr.status + (xhr.statusText ? " " + xhr.statusText : "");
  }

  // A whole-document error page never goes into a form: say what happened instead.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status >= 400 && isDocument(xhr.responseText)) {
      event.detail.shouldSwap = false;
      showProblem(event.detail.elt, "The server refused this (" + statusText(xhr) + "). Reload the page and try again.");
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    if (xhr.status >= 500) {
      showProblem(event.detail.elt, "Something went wrong on our side (" + statusText(xhr) + "). Try again in a moment.");
    }
  });
  document.addEventListener("htmx:sendError", function (event) {
    showProblem(event.detail.elt, "The server could not be reached. Check your connection and try again.");
  });
  document.addEventListener("htmx:timeout", function (event) {
    showProblem(event.detail.elt, "The server took too long to answer. Try again.");
  });
  // A form sent again starts without the last problem.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.tagName === "FORM") {
      var box = elt.querySelector(":scope > .htmx-problem");
      if (box) box.remove();
    }
  });

  // Boxes marked data-follow (the run log) stay at their end while the reader is there, and
  // keep the reader's place once they scroll up; a [data-jump-to=<box id>] control brings them
  // back. Polling replaces the box, so where each one was is kept by its id.
  var followed = {};

  function atEnd(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight < 24;
  }

  function showJump(box, following) {
    var jump = document.querySelector('[data-jump-to="' + box.id + '"]');
    if (jump) jump.hidden = following;
  }

  function follow(box) {
    var state = followed[box.id] || (followed[box.id] = { following: true, top: 0 });
    box.scrollTop = state.following ? box.scrollHeight : state.top;
    showJump(box, state.following);
    box.addEventListener("scroll", function () {
      state.following = atEnd(box);
      state.top = box.scrollTop;
      showJump(box, state.following);
    });
  }

  htmx.onLoad(function (content) {
    if (content.matches && content.matches("[data-follow]")) follow(content);
    content.querySelectorAll("[data-follow]").forEach(follow);
  });

  // What used to be inline handlers (the Content-Security-Policy allows no inline script):
  // [data-open-dialog=<id>] opens that dialog instead of following its link, a form with
  // data-confirm asks first, a control with data-submit-on-change sends its form.
  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-open-dialog]");
    var dialog = opener && document.getElementById(opener.getAttribute("data-open-dialog"));
    if (!dialog || !dialog.showModal) return;
    event.preventDefault();
    dialog.showModal();
  });
  document.addEventListener(
    "submit",
    function (event) {
      var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
      if (question && !window.confirm(question)) {
        event.preventDefault();
        event.stopPropagation();
      }
    },
    true
  );
  document.addEventListener("change", function (event) {
    var control = event.target;
    if (control.hasAttribute && control.hasAttribute("data-submit-on-change") && control.form) {
      control.form.submit();
    }
  });

  // The header's Menu button, below the width the whole header fits in (belvedir.css).
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("header.top .menu-toggle");
    if (!toggle) return;
    var header = toggle.closest("header.top");
    var open = header.getAttribute("data-menu") !== "open";
    header.setAttribute("data-menu", open ? "open" : "closed");
    toggle.setAttribute("aria-expanded", String(open));
  });

  document.addEventListener("click", function (event) {
    var jump = event.target.closest && event.target.closest("[data-jump-to]");
    var box = jump && document.getElementById(jump.getAttribute("data-jump-to"));
    if (!box) return;
    followed[box.id] = { following: true, top: 0 };
    box.scrollTop = box.scrollHeight;
    showJump(box, true);
  });
})();
