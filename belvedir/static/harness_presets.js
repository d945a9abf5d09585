// The New harness page: the catalog card picked stays highlighted (the server marks it too, on
// a reload of ?preset=…).
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var card = event.target.closest && event.target.closest("a.card.preset");
    if (!card) return;
    document.querySelectorAll("a.card.preset").forEach(function (c) {
      c.classList.toggle("selected", c === card);
      if (c === card) {
        c.setAttribute("aria-current", "true");
      } else {
        c.removeAttribute("aria-current");
      }
    });
  });
})();
