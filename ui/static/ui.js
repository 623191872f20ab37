// taskdesk pages: what htmx does not do by itself.
// - One watcher per page asks `/watch` for everything that changes by itself (unfinished task
//   rows, the bell, the worker badge, the list's "anything newer?"), one request per tick; see
//   ui/watch/watcher.py. The server says when to ask next (X-Poll-In): the earliest row on its schedule,
//   else every 5 s. A hidden tab asks every 30 s and at once when shown again. A 503/429 waits
//   for its Retry-After, a lost connection backs off; the watcher never stops by itself.
// - A block that polls by itself (data-poll-self: the import form's controls) renders its next
//   poll as an hx-trigger on the rows' schedule (ui/watch/polling.py); a hidden tab holds that poll
//   and sends it at once when shown again.
// - 5xx answers and lost connections of what the person did are said in #flash.
// - Focus follows a form's answer, so keyboard and screen-reader users land on the result.
// - A toast closes with its button and fades by itself after a while.
// - On a narrow screen, a chip shows the active tasks with their progress and jumps to them.
(function () {
  "use strict";
  var IDLE_MS = 5000; // when the server gives no X-Poll-In
  var HIDDEN_MS = 30000;
  var ERROR_MS = 10000;
  var MAX_BACKOFF_MS = 60000;
  var MAX_ROWS = 60; // rows one /watch carries at most (ui/watch/watcher.py MAX_ROWS)
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

  // A one-time link shown once (an invitation): focusing it selects it all, ready to copy.
  document.addEventListener("focusin", function (evt) {
    var el = evt.target;
    if (el && el.hasAttribute && el.hasAttribute("data-select-on-focus")) el.select();
  });

  function flash(text) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = "";
    var p = document.createElement("p");
    p.className = "msg error";
    p.textContent = text;
    box.appendChild(p);
  }

  function isWatcher(evt) {
    return evt.detail.elt && evt.detail.elt.id === "watch";
  }

  document.addEventListener("htmx:responseError", function (evt) {
    if (isWatcher(evt)) return; // the watcher backs off and tries again by itself
    var status = evt.detail.xhr ? evt.detail.xhr.status : 0;
    flash(document.body.dataset.msgServer + " (HTTP " + status + ")");
  });

  document.addEventListener("htmx:sendError", function (evt) {
    flash(document.body.dataset.msgOffline);
    if (isWatcher(evt)) document.getElementById("flash").dataset.offline = "1";
  });

  document.addEventListener("htmx:afterRequest", function (evt) {
    // A good answer to anything the person did clears an old error.
    var verb = evt.detail.requestConfig && evt.detail.requestConfig.verb;
    if (evt.detail.successful && verb && verb !== "get") {
      var box = document.getElementById("flash");
      if (box && evt.detail.target !== box) box.textContent = "";
    }
  });

  // --- the page watcher ---------------------------------------------------------------------
  var watch = { elt: null, timer: null, at: Infinity, busy: false, again: false, last: 0, fails: 0 };
  var seenRows = new WeakSet();

  function watchUrl() {
    var parts = [];
    var done = {};
    var rows = document.querySelectorAll("[data-poll][data-task-id]");
    for (var i = 0; i < rows.length; i++) {
      var d = rows[i].dataset;
      if (done[d.taskId]) continue;
      // ui/watch/watcher.py MAX_ROWS: the newest rows (on top) first; the rest wait for a later tick.
      if (parts.length >= MAX_ROWS) break;
      done[d.taskId] = true;
      parts.push("r=" + encodeURIComponent([d.taskId, d.since, d.v, d.cancel].join(":")));
    }
    var bell = document.getElementById("bell");
    if (bell) parts.push("bell=" + encodeURIComponent(bell.dataset.seen || "-1"));
    var health = document.getElementById("health");
    if (health) parts.push("h=" + encodeURIComponent(health.dataset.v || ""));
    var list = document.getElementById("tasks-watch");
    if (list) {
      parts.push("list=" + encodeURIComponent(list.dataset.list));
      parts.push("newest=" + encodeURIComponent(list.dataset.newest));
      // Checked up to this task id by an earlier tick (X-Watch-Mark): a page whose list has
      // nothing newer to show is answered from the server's memory, not its database.
      if (list.dataset.mark) parts.push("mark=" + encodeURIComponent(list.dataset.mark));
      parts.push("limit=" + encodeURIComponent(list.dataset.limit));
    }
    return "/watch?" + parts.join("&");
  }

  // Ask at `at` (ms since the epoch), or earlier if already due earlier; a hidden tab waits
  // at least HIDDEN_MS after its last request.
  function arm(at, replace) {
    if (!watch.elt) return;
    if (!replace && at >= watch.at) return;
    if (document.hidden) at = Math.max(at, watch.last + HIDDEN_MS);
    clearTimeout(watch.timer);
    watch.at = at;
    watch.timer = setTimeout(tick, Math.max(0, at - Date.now()));
  }

  function tick() {
    clearTimeout(watch.timer);
    watch.at = Infinity;
    if (!watch.elt || !document.body.contains(watch.elt)) return;
    if (watch.busy) {
      watch.again = true;
      return;
    }
    watch.busy = true;
    watch.last = Date.now();
    htmx.ajax("GET", watchUrl(), { source: watch.elt, swap: "none" });
  }

  function retryAfter(xhr) {
    var secs = Number(xhr.getResponseHeader("Retry-After"));
    return secs > 0 ? Math.min(secs * 1000, 5 * MAX_BACKOFF_MS) : ERROR_MS;
  }

  function watched(evt) {
    var xhr = evt.detail.xhr;
    var status = xhr ? xhr.status : 0;
    watch.busy = false;
    var wait;
    if (status >= 200 && status < 400) {
      watch.fails = 0;
      var next = Number(xhr.getResponseHeader("X-Poll-In"));
      var mark = xhr.getResponseHeader("X-Watch-Mark");
      var list = document.getElementById("tasks-watch");
      if (list && mark) list.dataset.mark = mark;
      wait = next > 0 ? next * 1000 : IDLE_MS;
      var box = document.getElementById("flash");
      if (box && box.dataset.offline) {
        box.textContent = "";
        delete box.dataset.offline;
      }
    } else if (status === 503 || status === 429) {
      wait = retryAfter(xhr); // overloaded or down for a moment: as long as the server asks
    } else if (status === 0) {
      watch.fails += 1; // no answer at all: 2, 4, 8 … up to 60 s
      wait = Math.min(MAX_BACKOFF_MS, 1000 * Math.pow(2, watch.fails));
    } else {
      wait = ERROR_MS;
    }
    arm(Date.now() + wait, true);
    if (watch.again) {
      watch.again = false;
      tick();
    }
  }

  // A row that appeared (the page, a form's answer, a refreshed list) is due after its delay.
  function noticeRows() {
    var rows = document.querySelectorAll("[data-poll][data-task-id]");
    var now = Date.now();
    for (var i = 0; i < rows.length; i++) {
      if (seenRows.has(rows[i])) continue;
      seenRows.add(rows[i]);
      arm(now + 1000 * (Number(rows[i].dataset.delay) || 1), false);
    }
  }

  function startWatching() {
    watch.elt = document.getElementById("watch");
    if (!watch.elt) return;
    noticeRows();
    tick(); // at once: the bell and the badge are not in the page until the first answer
  }

  document.addEventListener("htmx:afterRequest", function (evt) {
    if (isWatcher(evt)) watched(evt);
  });
  document.addEventListener("htmx:afterSettle", noticeRows);
  document.addEventListener("htmx:load", noticeRows);
  document.addEventListener("visibilitychange", function () {
    if (!watch.elt) return;
    if (document.hidden) arm(watch.last + HIDDEN_MS, true);
    else tick(); // catch up at once
  });
  // After htmx has read its configuration (it does so on DOMContentLoaded, and loads first).
  if (document.readyState === "complete") startWatching();
  else document.addEventListener("DOMContentLoaded", startWatching);

  // --- blocks that poll by themselves ---------------------------------------------------------
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!document.hidden || !elt || !elt.hasAttribute || !elt.hasAttribute("data-poll-self")) return;
    evt.preventDefault(); // not sent: its `resume` trigger sends it when the tab is shown
    elt.setAttribute("data-poll-held", "");
  });
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) return;
    var held = document.querySelectorAll("[data-poll-self][data-poll-held]");
    for (var i = 0; i < held.length; i++) {
      held[i].removeAttribute("data-poll-held");
      htmx.trigger(held[i], "resume");
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
