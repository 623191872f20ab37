// taskdesk pages: what htmx does not do by itself.
// - 5xx answers and lost connections end a self-polling row's `load` chain: say so, and try
//   the row again a little later (a 4xx is an answer — e.g. the task is gone — and is shown).
// - Focus follows a form's answer, so keyboard and screen-reader users land on the result.
// - A toast closes with its button and fades by itself after a while.
// - On a narrow screen, a chip shows the active tasks with their progress and jumps to them.
(function () {
  "use strict";
  var RETRY_MS = 10000;
  var TOAST_MS = 8000;
  var FADE_MS = 600;

  function closeToast(toast) {
    if (!toast || toast.classList.contains("fading")) return;
    toast.classList.add("fading");
    setTimeout(function () {
      // Empty, not removed: the next toast is swapped into the same element.
      toast.textContent = "";
      toast.classList.remove("fading");
      toast.removeAttribute("data-toast");
    }, FADE_MS);
  }

  function armToast() {
    var toast = document.getElementById("toast");
    if (!toast || !toast.hasAttribute("data-toast") || toast.hasAttribute("data-armed")) return;
    toast.setAttribute("data-armed", "");
    setTimeout(function () {
      if (document.body.contains(toast)) closeToast(toast);
    }, TOAST_MS);
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("[data-toast-close]") : null;
    if (button) closeToast(button.closest(".toast"));
  });

  function updateChip() {
    var chip = document.getElementById("task-chip");
    if (!chip) return;
    var rows = document.querySelectorAll("#tasks .task[data-active]");
    if (!rows.length) {
      chip.hidden = true;
      return;
    }
    var text = (rows.length === 1 ? chip.dataset.one : chip.dataset.many).replace("{n}", rows.length);
    var bars = document.querySelectorAll("#tasks .task[data-active] progress");
    if (bars.length) {
      var sum = 0;
      for (var i = 0; i < bars.length; i++) sum += Number(bars[i].value) || 0;
      text += " · " + Math.round(sum / bars.length) + " %";
    }
    chip.querySelector(".chip-text").textContent = text;
    chip.hidden = false;
  }

  document.addEventListener("htmx:afterSettle", function () {
    armToast();
    updateChip();
  });
  document.addEventListener("DOMContentLoaded", updateChip);

  function flash(text) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = "";
    var p = document.createElement("p");
    p.className = "msg error";
    p.textContent = text;
    box.appendChild(p);
  }

  function retryRow(elt) {
    var row = elt && elt.closest ? elt.closest("[data-poll]") : null;
    if (!row || !row.id) return;
    setTimeout(function () {
      if (!document.body.contains(row)) return;
      htmx.ajax("GET", row.getAttribute("hx-get"), { target: "#" + row.id, swap: "outerHTML" });
    }, RETRY_MS);
  }

  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail.xhr ? evt.detail.xhr.status : 0;
    flash(document.body.dataset.msgServer + " (HTTP " + status + ")");
    retryRow(evt.detail.elt);
  });

  document.addEventListener("htmx:sendError", function (evt) {
    flash(document.body.dataset.msgOffline);
    retryRow(evt.detail.elt);
  });

  document.addEventListener("htmx:afterRequest", function (evt) {
    // A good answer to anything the person did clears an old error.
    var verb = evt.detail.requestConfig && evt.detail.requestConfig.verb;
    if (evt.detail.successful && verb && verb !== "get") {
      var box = document.getElementById("flash");
      if (box && evt.detail.target !== box) box.textContent = "";
    }
  });

  document.addEventListener("htmx:afterSwap", function (evt) {
    var verb = evt.detail.requestConfig && evt.detail.requestConfig.verb;
    if (verb !== "post") return;
    var target = evt.detail.target;
    if (target.id && !document.body.contains(target)) target = document.getElementById(target.id);
    if (!target) return;
    var focusable = target.querySelector("[role=alert], [role=status]") || target;
    if (focusable && focusable.focus) {
      if (!focusable.hasAttribute("tabindex")) focusable.setAttribute("tabindex", "-1");
      focusable.focus({ preventScroll: false });
    }
  });
})();
